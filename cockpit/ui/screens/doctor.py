"""Provides the Doctor screen (key 8): is each running job making progress, and what is every worker doing.

At the top, the hang watch: one line per running job the hang feed follows (its last progress and how
long ago, or the hang). Below, the last stacks taken (`s`: of the hung job, else the job shown, else the
newest running one; `a`: every worker of the cluster; `j`: the next running job), grouped by identical
stack, the odd ones out first and the idle workers as one group at the end. The selected group's whole
stack and every member are under the table; Enter gives them the whole screen (and back).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static

from cockpit.core.doctor.stacks import (
    StackGroup,
    StacksReport,
    group_heading,
    merge_failures,
    working_threads,
)
from cockpit.core.text import shortened
from cockpit.core.units import duration
from cockpit.ui.screens.base import CockpitScreen
from cockpit.ui.state import JobWatch
from cockpit.ui.widgets.key_hints import KeyHints
from cockpit.ui.widgets.keyed_table import KeyedTable
from cockpit.ui.widgets.safe_text import clean, plain

COLUMNS = (
    ("count", "Count"),
    ("where", "Where"),
    ("who", "Who"),
    ("roles", "Roles"),
    ("nodes", "Nodes"),
)


def group_cells(group: StackGroup, width: int = 60) -> dict[str, Text]:
    """One group's row; every string but the count came from the cluster (shown as text, never markup)."""
    odd = group.count == 1 and not group.idle
    who = ", ".join(m.who for m in group.members[:3]) + (f" +{group.count - 3}" if group.count > 3 else "")
    nodes = ", ".join(group.nodes[:2]) + (f" +{len(group.nodes) - 2}" if len(group.nodes) > 2 else "")
    label = group.label if len(group.label) <= width else group.label[: width - 1] + "…"
    style = "dim" if group.idle else ("bold yellow" if odd else "")
    return {
        "count": plain(str(group.count), "dim" if group.idle else "bold"),
        "where": plain(label, style),
        "roles": plain(shortened("/".join(group.roles) or "-", 20), "cyan"),
        "who": plain(shortened(who, 40), "dim" if group.idle else ""),
        "nodes": plain(nodes, "dim"),
    }


def group_keys(groups: Sequence[StackGroup]) -> list[str]:
    """A key for each group's row: its first member's process (one process is in one group of a take), so
    a group redrawn keeps its row and the cursor."""
    keys: list[str] = []
    for group in groups:
        first = group.members[0] if group.members else None
        key = f"{first.node_id or first.node_ip}:{first.pid}" if first is not None else group.label
        while key in keys:  # never in a real take; a fixture may repeat a pid
            key += "+"
        keys.append(key)
    return keys


def group_details(group: StackGroup) -> Text:
    """The group's whole stack (the user's frames bright, Ray's and the libraries' dim) and every member."""
    text = Text()
    text.append_text(plain(group_heading(group), "bold"))
    threads = working_threads(group.stack) or list(group.stack.threads[:1])
    for thread in threads:
        text.append("\n")
        text.append_text(plain(f"  thread {thread.name or thread.thread_id}", "cyan"))
        for frame in thread.frames:
            text.append("\n    ")
            text.append_text(plain(frame.function, "dim" if frame.library else "bold"))
            text.append_text(plain(f"  {frame.where}", "dim"))
    if group.stack.cut:
        text.append("\n  (stack cut: too many threads or frames)", style="yellow")
    text.append(f"\n\n  {group.count} member{'s' if group.count != 1 else ''}:", style="bold")
    for member in group.members:
        where = member.hostname or member.node_ip or member.node_id[:8]
        role = f" [{member.role}]" if member.role else ""
        text.append("\n  ")
        text.append_text(plain(f"pid {member.pid} on {where}: {member.who}{role}", ""))
        if member.title and member.title != member.who:
            text.append_text(plain(f"  {member.title[:80]}", "dim"))
    return text


def watch_line(watch: JobWatch, now_ago: str = "") -> Text:
    """One running job's progress: `job X · step=42 … 3s ago` or its hang, in red."""
    line = Text(no_wrap=True, overflow="ellipsis")
    line.append_text(plain(watch.job.key, "bold"))
    line.append(" · ")
    if watch.error:
        line.append_text(plain(watch.error, "yellow"))
    elif watch.hung:
        line.append_text(plain(watch.line, "bold red"))
        line.append(" (s: stacks)", style="red")
    elif watch.last_progress_age is not None:
        line.append(f"progress {duration(watch.last_progress_age)} ago", style="green")
        if watch.last_progress:
            line.append(": ")
            line.append_text(plain(watch.last_progress[:120], "dim"))
    else:
        line.append(f"watching ({watch.watching}); no progress seen yet", style="dim")
    if watch.straggler:
        line.append_text(plain(f" · {watch.straggler}", "yellow"))
    return line


class DoctorScreen(CockpitScreen):
    TITLE = "8 Doctor"
    NEEDS = frozenset({"nodes", "jobs", "gpus"})
    SHOWS = frozenset({"doctor", "hang", "snapshot", "connection"})
    BINDINGS = [
        Binding("s", "take", "Stacks of the job", id="doctor.take", show=False),
        Binding("a", "take_all", "All workers", id="doctor.take_all", show=False),
        Binding("j", "next_job", "Next job", id="doctor.next_job", show=False),
        Binding("n", "native", "Native frames", id="doctor.native", show=False),
        Binding("enter", "expand", "Expand", id="doctor.expand", show=False),
    ]
    expanded = False
    _drawn: dict[str, StackGroup] = {}
    """The groups drawn, by row key."""
    _drawn_report: StacksReport | None = None

    def compose_body(self) -> ComposeResult:
        yield Static(id="doctor-watch")
        yield Static(id="doctor-summary")
        yield KeyedTable(COLUMNS, id="stack-groups")
        with VerticalScroll(id="stack-details-scroll"):
            yield Static(id="stack-details")
        yield KeyHints(self, id="doctor-hint")

    # -- which job -----------------------------------------------------------------------------

    def running_jobs(self) -> list[str]:
        snapshot = self.state.snapshot
        jobs = [j for j in (snapshot.jobs if snapshot else ()) if j.status == "RUNNING"]
        jobs.sort(key=lambda j: j.start_time or 0.0, reverse=True)
        return [j.key for j in jobs]

    def chosen_job(self) -> str:
        doctor = self.state.doctor
        hung = doctor.hung()
        if hung:
            return hung[0].job.key
        running = self.running_jobs()
        if doctor.job and doctor.job in running:
            return doctor.job
        return running[0] if running else ""

    # -- drawing -------------------------------------------------------------------------------

    def shown_report(self) -> StacksReport | None:
        """The take under way as far as it got, else the last complete one."""
        doctor = self.state.doctor
        return doctor.partial if doctor.taking and doctor.partial is not None else doctor.report

    def groups(self) -> tuple[StackGroup, ...]:
        report = self.shown_report()
        return report.groups if report is not None else ()

    def refresh_view(self) -> None:
        doctor = self.state.doctor
        now = time.time()
        # One line a job, cut rather than wrapped: at 80x24 every job keeps its line.
        watch = Text(no_wrap=True, overflow="ellipsis")
        watches = list(doctor.watches.values())
        if watches:
            watch.append("Progress", style="bold")
            for item in sorted(watches, key=lambda w: not w.hung):
                watch.append("\n")
                watch.append_text(watch_line(item))
        else:
            watch.append("No running job to watch.", style="dim")
        self.query_one("#doctor-watch", Static).update(watch)

        summary = Text(no_wrap=True, overflow="ellipsis")
        report = self.shown_report()
        if doctor.taking:
            summary.append_text(
                plain(f"taking the stacks of {doctor.taking_what}: {doctor.progress}", "yellow")
            )
        elif report is not None:
            count = len(report.groups)
            summary.append_text(plain(f"stacks of {doctor.what}", "bold"))
            summary.append(
                f" · {report.processes} processes in {count} group{'s' if count != 1 else ''}"
                f" · taken {duration(now - doctor.taken_at)} ago"
            )
        else:
            job = self.chosen_job()
            summary.append("No stacks taken yet. ", style="bold")
            summary.append_text(
                plain(
                    f"s: the stacks of job {job}" if job else "a: the stacks of every worker of the cluster"
                )
            )
        if report is not None:
            if report.missing_nodes:
                summary.append_text(
                    plain(f"\nno answer yet from: {', '.join(report.missing_nodes)}", "yellow")
                )
            for line in merge_failures(report.failures)[:2]:
                summary.append_text(plain(f"\nnot taken: {line}", "yellow"))
            for note in report.notes[1:2]:
                summary.append_text(plain(f"\n{note}", "dim"))
        if doctor.error:
            summary.append_text(plain(f"\n{doctor.error}", "red"))
        self.query_one("#doctor-summary", Static).update(summary)

        table = self.query_one("#stack-groups", KeyedTable)
        selected = self.selected()
        groups = self.groups()
        width = max(24, self.size.width - 40)
        keys = group_keys(groups)
        with self.app.batch_update():
            table.show_rows((key, group_cells(group, width)) for key, group in zip(keys, groups, strict=True))
            self._drawn = dict(zip(keys, groups, strict=True))
            if report is not self._drawn_report:
                # A new take (or the next part of one): the odd one out is at the top, where the
                # cursor goes; the user's choice is kept while the same report is redrawn.
                self._drawn_report = report
                if groups:
                    table.move_cursor(row=0, animate=False)
            elif selected is not None and table.current_key() not in self._drawn:
                # Its first member gone: the group in the same place (same label, idle or not).
                places = [(g.label, g.idle) for g in groups]
                if (selected.label, selected.idle) in places:
                    table.move_cursor(row=places.index((selected.label, selected.idle)), animate=False)
        table.display = not self.expanded
        self._show_details()
        self.query_one("#doctor-hint", KeyHints).show(self.query_one("#doctor-hint", KeyHints).keys_text())

    def selected(self) -> StackGroup | None:
        """The group under the cursor, as drawn (the state's report may be newer than the table)."""
        key = self.query_one("#stack-groups", KeyedTable).current_key()
        return self._drawn.get(key) if key is not None else None

    @on(DataTable.RowHighlighted, "#stack-groups")
    def _row_highlighted(self) -> None:
        self._show_details()

    @on(DataTable.RowSelected, "#stack-groups")
    def _row_selected(self) -> None:
        self.action_expand()

    def _show_details(self) -> None:
        group = self.selected()
        details = self.query_one("#stack-details", Static)
        details.update(group_details(group) if group is not None else "")

    # -- actions -------------------------------------------------------------------------------

    def _feed_take(self, job: str) -> None:
        take = getattr(self.app, "take_stacks", None)
        if take is None:
            return
        if not take(job, self.state.doctor.native):
            self.notify("stacks are being taken already", severity="warning")

    def action_take(self) -> None:
        job = self.chosen_job()
        if not job:
            self.notify(
                "no running job: a takes the stacks of every worker of the cluster", severity="warning"
            )
            return
        self._feed_take(job)

    def action_take_all(self) -> None:
        self._feed_take("")

    def action_next_job(self) -> None:
        running = self.running_jobs()
        if not running:
            self.notify("no running job", severity="warning")
            return
        doctor = self.state.doctor
        at = running.index(doctor.job) if doctor.job in running else -1
        doctor.job = running[(at + 1) % len(running)]
        self.notify(clean(f"s takes the stacks of {doctor.job}"), timeout=3, markup=False)
        self._feed_take(doctor.job)

    def action_native(self) -> None:
        doctor = self.state.doctor
        doctor.native = not doctor.native
        self.notify(f"native frames {'on' if doctor.native else 'off'}: s takes the stacks again", timeout=4)

    def action_expand(self) -> None:
        self.expanded = not self.expanded
        self.query_one("#stack-groups", KeyedTable).display = not self.expanded
        if self.expanded:
            self.query_one("#stack-details-scroll", VerticalScroll).focus()
        else:
            self.query_one("#stack-groups", KeyedTable).focus()
