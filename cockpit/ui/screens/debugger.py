"""Provides the Debugger screen (key 6): workers paused in the post-mortem debugger, grouped by error.

One row per paused worker, workers that raised the same error next to each other under their group's
count. Enter attaches (the session screen: exception, stack, source, variables, an expression prompt);
`R` releases every worker of the selected row's group after a confirmation (their tasks then fail with
the original error, as they would have without the debugger).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Iterator

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Static

from cockpit.core.debug.paused import PausedGroup, PausedWorker, describe_age
from cockpit.core.errors import CockpitError
from cockpit.core.text import cut
from cockpit.ui.messages import RefreshRequested
from cockpit.ui.screens.base import CockpitScreen
from cockpit.ui.screens.confirm import ConfirmScreen
from cockpit.ui.widgets.key_hints import KeyHints
from cockpit.ui.widgets.keyed_table import KeyedTable
from cockpit.ui.widgets.safe_text import clean, plain

COLUMNS = (
    ("group", "Group"),
    ("exception", "Exception"),
    ("where", "Where"),
    ("task", "Actor / task"),
    ("job", "Job"),
    ("node", "Node"),
    ("since", "Paused"),
)


def worker_cells(
    group: PausedGroup, index: int, worker: PausedWorker, now: float, width: int = 90
) -> dict[str, Text]:
    """One row's cells: all `Text` (every string but the age came from the cluster or the worker);
    the exception cut to WIDTH cells (the details line under the table has it whole)."""
    exc = worker.exception or group.exception
    if index == 0:
        count = plain(f"{len(group.members)}x" if len(group.members) > 1 else "1", "bold")
    else:
        count = plain("  └", "dim")
    if exc is not None:
        # `cut` cleans, then shortens: shortened first, an escape cut in half showed as `�` and its tail.
        exception = plain(cut(exc.one_line(), width), "bold red" if index == 0 else "red")
    elif worker.note:
        exception = plain(cut(worker.note, width), "yellow")
    else:
        exception = plain("(attach to see)" if worker.mode == "legacy" else "(looking…)", "dim")
    mode = " [pdb]" if worker.mode == "legacy" else ""
    return {
        "group": count,
        "exception": exception,
        "where": plain(exc.where if exc else "", "cyan"),
        "task": plain(worker.label() + mode),
        "job": plain(worker.job_id),
        "node": plain(worker.ip),
        "since": Text(describe_age(worker.since, now)),
    }


def paused_rows(
    groups: Iterable[PausedGroup], now: float, width: int = 90
) -> Iterator[tuple[str, dict[str, Text]]]:
    """The table's rows, keyed by worker: each group's members in turn, under its count."""
    for group in groups:
        for index, worker in enumerate(group.members):
            yield worker.key, worker_cells(group, index, worker, now, width)


DETAIL_CHARS = 500
"""The most of an exception's line the details under the table show (attached, `e` shows all of it): a
10,000-character message filled the screen and hid the table."""


def worker_details(worker: PausedWorker) -> Text:
    """Everything known about one paused worker, for the line under the table."""
    exc = worker.exception
    text = Text()
    if exc is not None:
        text.append_text(plain(cut(exc.one_line(), DETAIL_CHARS), "bold red"))
        if exc.where:
            text.append_text(plain(f"  at {cut(exc.where, DETAIL_CHARS)}", "cyan"))
    elif worker.note:
        text.append_text(plain(cut(worker.note, DETAIL_CHARS), "yellow"))
    text.append("\n")
    mode = "legacy pdb" if worker.mode == "legacy" else "debugpy"
    text.append_text(
        plain(
            f"{worker.label()} · job {worker.job_id} · node {worker.ip} · {mode} at {worker.address}"
            + (f" · actor {worker.actor_id[:12]}" if worker.actor_id else ""),
            "dim",
        )
    )
    return text


class DebuggerScreen(CockpitScreen):
    TITLE = "6 Debugger"
    NEEDS = frozenset({"nodes", "jobs", "paused"})
    SHOWS = frozenset({"paused", "connection"})
    BINDINGS = [
        Binding("enter", "attach", "Attach", id="debugger.attach", show=False),
        Binding("R", "release_group", "Release group", id="debugger.release_group", show=False),
        Binding("x", "close_forwards", "Close VS Code ports", id="debugger.close_forwards", show=False),
    ]
    releasing = False

    def compose_body(self) -> ComposeResult:
        yield Static(id="debugger-summary")
        yield KeyedTable(COLUMNS, id="paused-table")
        yield Static(id="debugger-details")
        yield KeyHints(self, id="debugger-hint")

    def rows(self) -> list[tuple[PausedGroup, int, PausedWorker]]:
        return [(g, i, w) for g in self.state.paused.groups for i, w in enumerate(g.members)]

    def refresh_view(self) -> None:
        paused = self.state.paused
        table = self.query_one("#paused-table", KeyedTable)
        summary = self.query_one("#debugger-summary", Static)
        hint = self.query_one("#debugger-hint", KeyHints)
        now = time.time()
        rows = self.rows()
        table.show_rows(paused_rows(paused.groups, now, max(24, self.size.width - 75)))
        line = Text()
        if rows:
            groups = len(paused.groups)
            line.append(f"{len(rows)} paused worker{'s' if len(rows) != 1 else ''}", style="bold magenta")
            line.append(f" in {groups} group{'s' if groups != 1 else ''} (same error, same place)")
            if paused.total > len(rows):
                line.append(f" · showing {len(rows)} of {paused.total}", style="yellow")
        else:
            line.append("No worker is paused in the post-mortem debugger.", style="bold")
            line.append(
                "\nA job whose profile says `debug: post_mortem` (RAY_DEBUG_POST_MORTEM=1) pauses its "
                "workers here when they raise, instead of failing. Try: cockpit demo --profile demo-crash"
            )
        if paused.checked_at:
            line.append(f" · checked {describe_age(paused.checked_at, now)} ago", style="dim")
        if paused.error:
            line.append(f"\n{clean(paused.error)}", style="red")
        for label, port, _close in paused.forwards:
            line.append_text(
                plain(
                    f"\nVS Code port 127.0.0.1:{port} open for {label} (any user here can use it; x: close)",
                    "yellow",
                )
            )
        summary.update(line)
        self._show_details()
        hint.show(hint.keys_text())

    def selected(self) -> PausedWorker | None:
        key = self.query_one("#paused-table", KeyedTable).current_key()
        if key is None:
            return None
        return next((w for _g, _i, w in self.rows() if w.key == key), None)

    def selected_group(self) -> PausedGroup | None:
        worker = self.selected()
        if worker is None:
            return None
        return next((g for g in self.state.paused.groups if worker in g.members), None)

    @on(DataTable.RowHighlighted, "#paused-table")
    def _row_highlighted(self) -> None:
        self._show_details()

    def _show_details(self) -> None:
        worker = self.selected()
        details = self.query_one("#debugger-details", Static)
        details.update(worker_details(worker) if worker is not None else "")

    @on(DataTable.RowSelected, "#paused-table")
    def _row_selected(self) -> None:
        self.action_attach()

    def action_attach(self) -> None:
        if self.app.screen is not self:  # an Enter queued behind the one that attached: one session
            return
        worker = self.selected()
        if worker is None:
            self.notify("no paused worker selected", severity="warning")
            return
        from cockpit.ui.screens.debug_session import DebugSessionScreen, LegacyConsoleScreen

        if worker.mode == "legacy":
            self.app.push_screen(LegacyConsoleScreen(worker))
        else:
            self.app.push_screen(DebugSessionScreen(worker))

    def action_close_forwards(self) -> None:
        forwards = self.state.paused.forwards
        for _label, _port, close in forwards:
            close()
        if forwards:
            self.notify(f"closed {len(forwards)} VS Code port(s)")
        forwards.clear()
        self.refresh_view()

    def action_release_group(self) -> None:
        if self.releasing:
            self.notify("a release is under way", severity="warning")
            return
        group = self.selected_group()
        if group is None:
            self.notify("no paused worker selected", severity="warning")
            return
        legacy = [w for w in group.members if w.mode == "legacy"]
        if legacy:
            self.notify(
                "legacy pdb sessions are released from their console (Enter, then c)", severity="warning"
            )
            return
        what = group.exception.one_line() if group.exception else "an error not known yet"
        question = Text.assemble(
            ("Release ", "bold"),
            (f"{len(group.members)} paused worker{'s' if len(group.members) != 1 else ''}", "bold"),
            "?\n\n",
            plain(what[:200], "red"),
            "\n\nEach goes on and its task fails with this error, as it would have without the debugger.",
        )

        def answered(yes: bool | None) -> None:
            if yes and not self.releasing:
                self.releasing = True
                self._release(group.members)

        self.app.push_screen(ConfirmScreen(question, yes_label="Release"), answered)

    @work(group="debug-release", exclusive=True, description="Releasing paused workers")
    async def _release(self, workers: tuple[PausedWorker, ...]) -> None:
        from cockpit.core.debug.session import DebugSession

        connection = await self.host.connection()
        limit = asyncio.Semaphore(4)
        failures: list[str] = []

        async def release(worker: PausedWorker) -> None:
            async with limit:
                try:
                    session = await DebugSession.attach(connection, worker)
                    await session.release()
                except CockpitError as exc:
                    failures.append(f"{worker.label()}: {exc}")
                else:
                    self.state.paused.cache.known.pop(worker.key, None)  # it may pause again, anew

        self.notify(f"releasing {len(workers)} worker(s) …", timeout=3)
        try:
            await asyncio.gather(*(release(w) for w in workers))
        finally:
            self.releasing = False
        done = len(workers) - len(failures)
        if failures:
            self.notify(
                clean(f"released {done}; {len(failures)} failed: {failures[0]}"),
                severity="error",
                markup=False,
            )
        else:
            self.notify(f"released {done} worker(s): their tasks fail with the original error")
        self.post_message(RefreshRequested())
