"""Provides the job launcher: pick a profile, see exactly what will run, edit overrides, check, submit."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from cockpit.core.errors import CockpitError
from cockpit.core.jobs import launch, profiles
from cockpit.core.jobs.preflight import Check, upload_check
from cockpit.ui.state import CockpitHost, host_of
from cockpit.ui.widgets.safe_text import clean, plain

MARKS = {"ok": ("✔", "green"), "fail": ("✘", "red"), "warn": ("!", "yellow"), "info": ("·", "dim")}


def fuzzy_score(query: str, text: str) -> int | None:
    """Lower is better; None when the query's letters do not appear in order in the text."""
    query, text = query.lower().replace(" ", ""), text.lower()
    position, score = -1, 0
    for char in query:
        found = text.find(char, position + 1)
        if found < 0:
            return None
        score += found - position - 1
        position = found
    return score


def arrows_move_list(event: events.Key, in_filter: bool, options: OptionList) -> None:
    """Up/down typed in a filter field move the list's highlight: pick without leaving the keyboard row."""
    if in_filter and event.key in ("up", "down"):
        if event.key == "up":
            options.action_cursor_up()
        else:
            options.action_cursor_down()
        event.stop()


def preview_text(
    profile: profiles.Profile, request: Mapping[str, Any], checks: Sequence[Check], force: bool
) -> Text:
    """What the preview pane shows: the profile, the exact request, the pre-flight checklist. Profiles are
    shared files and overrides are typed: all of it is plain text (`Text`, never markup)."""
    lines = [Text.assemble(plain(profile.name, "bold"), "  ", plain(profile.description)), Text()]
    lines += [Text("entrypoint", style="bold"), plain(request["entrypoint"])]
    if request.get("runtime_env"):
        runtime_env = json.dumps(request["runtime_env"], indent=1, ensure_ascii=False)  # "••" not "\\u2022"
        lines += [Text(), Text("runtime_env", style="bold"), *map(plain, runtime_env.splitlines())]
    lines += [Text(), Text("pre-flight", style="bold")]
    lines += [Text.assemble(MARKS[c.status], " ", plain(f"{c.name}: {c.detail}")) for c in checks]
    if any(c.blocking for c in checks):
        lines.append(
            Text("forced: will submit anyway", style="bold red")
            if force
            else Text("blocked (ctrl+f forces)", style="red")
        )
    return Text("\n").join(lines)


class LaunchScreen(ModalScreen[str | None]):
    """Returns the submission id, or None when the user backs out."""

    DEFAULT_CSS = """
    LaunchScreen { align: center middle; }
    LaunchScreen > Vertical {
        width: 96%; height: 92%; border: round $primary; background: $surface; padding: 0 1;
    }
    LaunchScreen #launch-body { height: 1fr; }
    LaunchScreen #profile-list { width: 40%; height: 1fr; }
    LaunchScreen #preview { width: 60%; height: 1fr; padding: 0 1; }
    LaunchScreen Input { margin: 1 0 0 0; }
    LaunchScreen #launch-help { color: $text-muted; height: 1; }
    """
    BINDINGS = [
        Binding("escape", "dismiss_none", "Cancel", id="launch.cancel"),
        Binding("ctrl+s", "submit", "Submit", id="launch.submit"),
        Binding("ctrl+f", "toggle_force", "Force", id="launch.force"),
        Binding("tab", "next_field", "Next field", show=False, priority=True, id="launch.next"),
    ]

    def __init__(
        self,
        preselect: str | None = None,
        overrides: tuple[str, ...] = (),
        *,
        noted: profiles.Profile | None = None,
    ) -> None:
        """NOTED: a resubmitted job's own profile file (given by path at its submit), listed in place of
        a profile of its name on the search path."""
        super().__init__()
        self.skipped: list[str] = []
        """Profile files and directories left out because other users can write them (one line each)."""
        self.all_profiles, self.problems = profiles.discover(
            warn=self.skipped.append, dirs=host_of(self.app).state.config.profile_dirs
        )
        if noted is not None:
            self.all_profiles = [noted, *(p for p in self.all_profiles if p.name != noted.name)]
        self.preselect = preselect
        self.initial_overrides = overrides
        self.force = False
        self.plan: launch.LaunchPlan | None = None
        """What Enter submits: the plan previewed last (its submission id too)."""
        self.problem = ""
        self._uploads: dict[str, Check | None] = {}
        """Each profile's working_dir check, walked once while the launcher is open (not on every key)."""
        """Why nothing can be submitted as typed (a malformed override), in the CLI's words."""

    @property
    def host(self) -> CockpitHost:
        return host_of(self.app)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(
                Text.assemble(("Launch a job", "bold"), "  (type to filter profiles)"), id="launch-title"
            )
            yield Input(placeholder="filter profiles…", id="filter", compact=True)
            with Horizontal(id="launch-body"):
                yield OptionList(id="profile-list")
                with VerticalScroll(id="preview"):
                    yield Static(id="preview-text")
            yield Input(
                value=" ".join(shlex.quote(o) for o in self.initial_overrides),
                placeholder="extra overrides: key=value key2=value2 …",
                id="overrides",
                compact=True,
            )
            yield Static(
                "Enter or ctrl+s submit · tab next field · ↑↓ pick · ctrl+f force past failed checks · "
                "esc cancel",
                id="launch-help",
            )

    def on_mount(self) -> None:
        for line in self.skipped:
            self.notify(clean(line), severity="warning", timeout=10, markup=False)
        self._fill("")
        if self.preselect:
            self.query_one("#overrides", Input).focus()
        else:
            self.query_one("#filter", Input).focus()

    def _fill(self, query: str) -> None:
        ranked = []
        for profile in self.all_profiles:
            score = fuzzy_score(query, f"{profile.name} {' '.join(profile.tags)} {profile.framework}")
            if score is not None:
                ranked.append((score, profile.name, profile))
        ranked.sort(key=lambda item: (item[0], item[1]))
        options = self.query_one("#profile-list", OptionList)
        options.clear_options()
        for _score, _name, profile in ranked:
            shape = f"{profile.cluster.nodes}x{profile.cluster.gpus_per_node}"
            options.add_option(
                Option(Text.assemble(plain(profile.name), "  ", (shape, "dim")), id=profile.name)
            )
        if ranked:
            index = 0
            if self.preselect:
                index = next((i for i, item in enumerate(ranked) if item[1] == self.preselect), 0)
            options.highlighted = index
        self._preview()

    def selected(self) -> profiles.Profile | None:
        options = self.query_one("#profile-list", OptionList)
        if options.highlighted is None or options.option_count == 0:
            return None
        option_id = options.get_option_at_index(options.highlighted).id
        return next((p for p in self.all_profiles if p.name == option_id), None)

    def extra_overrides(self) -> tuple[launch.Override, ...]:
        """The overrides field, split as a shell would and parsed once (the CLI's rules and messages).

        Raises:
            CockpitError: an unbalanced quote, or an item that is not KEY=VALUE.
        """
        text = self.query_one("#overrides", Input).value
        try:
            words = shlex.split(text)
        except ValueError as exc:
            raise CockpitError(f"overrides: {exc} (quote values as in a shell).") from None
        return launch.parse_overrides(words)

    def _upload(self, profile: profiles.Profile) -> Check | None:
        if profile.name not in self._uploads:
            self._uploads[profile.name] = upload_check(profile)
        return self._uploads[profile.name]

    def _preview(self) -> None:
        text = self.query_one("#preview-text", Static)
        self.plan, self.problem = None, ""
        profile = self.selected()
        if profile is None:
            problems = [Text.assemble("\n", plain(problem, "red")) for problem in self.problems]
            text.update(Text.assemble("no profile matches", *problems))
            return
        snapshot = self.host.state.snapshot
        try:
            plan = launch.plan(
                profile, self.extra_overrides(), snapshot.nodes if snapshot else None, upload=self._upload
            )
        except CockpitError as exc:
            self.problem = str(exc)
            text.update(Text.assemble(plain(profile.name, "bold"), "\n\n", plain(self.problem, "red")))
            return
        self.plan = plan
        text.update(preview_text(profile, plan.request, plan.checks, self.force))

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self._fill(event.value)

    @on(Input.Changed, "#overrides")
    def _overrides_changed(self) -> None:
        self._preview()

    @on(OptionList.OptionHighlighted)
    def _highlighted(self) -> None:
        self._preview()

    @on(Input.Submitted)
    @on(OptionList.OptionSelected)
    def _enter(self) -> None:
        self.action_submit()

    def on_key(self, event: events.Key) -> None:
        arrows_move_list(
            event, self.focused is self.query_one("#filter"), self.query_one("#profile-list", OptionList)
        )

    def action_next_field(self) -> None:
        order = [self.query_one("#filter"), self.query_one("#profile-list"), self.query_one("#overrides")]
        current = order.index(self.focused) if self.focused in order else -1
        order[(current + 1) % len(order)].focus()

    def action_toggle_force(self) -> None:
        self.force = not self.force
        self._preview()

    def action_dismiss_none(self) -> None:
        self.dismiss(None)

    def action_submit(self) -> None:
        profile = self.selected()
        if profile is None:
            self.notify("pick a profile first", severity="warning")
            return
        plan = self.plan
        if plan is None or plan.profile is not profile:
            self._preview()
            plan = self.plan
        if plan is None:
            self.notify(clean(f"not submitted: {self.problem}"), severity="error", timeout=8, markup=False)
            return
        if plan.blocking and not self.force:
            first = plan.blocking[0]
            message = clean(f"not submitted: {first.name}: {first.detail}")
            self.notify(message, severity="error", timeout=8, markup=False)
            return
        self._submit(plan, self.force)

    @work(exclusive=True, group="launch", exit_on_error=False, description="Submitting the job")
    async def _submit(self, plan: launch.LaunchPlan, force: bool) -> None:
        try:
            client = await self.host.dashboard()
            if plan.profile.post_mortem:
                self.notify(
                    "checking that the cluster's workers can load debugpy (a few seconds) …", timeout=6
                )
                plan = await launch.with_cluster_checks(client, plan)
                for check in plan.checks:
                    if check.name == "post-mortem debugger" and check.status in ("warn", "fail"):
                        failed = check.status == "fail" and not force
                        self.notify(
                            clean(f"{check.name}: {check.detail}"),
                            severity="error" if failed else "warning",
                            markup=False,
                        )
            submission_id = await launch.submit(client, plan, force=force)
        except CockpitError as exc:
            self.notify(clean(f"not submitted: {exc}"), severity="error", timeout=10, markup=False)
            return
        self.dismiss(submission_id)
