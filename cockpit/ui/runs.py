"""Provides the runs overview screen (`cockpit runs`): every target of the user on one screen, each with
its state, nodes, newest running job and what is wrong now; Enter opens the cockpit on the chosen one,
and quitting the cockpit comes back here.

A small app of its own: it looks at the targets when it starts and every `REFRESH_S` seconds while it is
shown (one look each: the jobs and the node table, `cockpit.core.runs.overview`), and ends with the
target chosen (`RunsApp.run()` returns it) or None. `rows` given (a test, a fixture) are shown as they
are and nothing is looked at.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import Static

from cockpit.core.runs.overview import RunRow
from cockpit.core.units import duration
from cockpit.ui.widgets.keyed_table import KeyedTable
from cockpit.ui.widgets.safe_text import clean

REFRESH_S = 30.0
"""Seconds between looks while the list is shown (each look asks every target twice)."""
COLUMNS = (
    ("target", "TARGET"),
    ("state", "STATE"),
    ("alerts", "ALERTS"),
    ("nodes", "NODES"),
    ("gpus", "GPUS"),
    ("left", "LEFT"),
    ("age", "FOR"),
    ("step", "STEP"),
    ("job", "RUNNING JOB"),
)
"""The short columns first: at 80 columns the job's name is what gets cut (the line under the table
gives the cursor's row in full, its alerts too)."""
JOB_CHARS = 40
STATE_STYLES = {
    "running": "green",
    "idle": "",
    "queued": "yellow",
    "starting": "yellow",
    "ended": "dim",
    "unreachable": "red",
}


def row_cells(row: RunRow) -> dict[str, Text | str]:
    nodes = (
        ""
        if row.nodes_alive is None
        else f"{row.nodes_alive}" + (f" +{row.nodes_dead}✖" if row.nodes_dead else "")
    )
    alerts = Text(f"✖ {len(row.alerts)}" if row.alerts else "", style="bold red")
    job = row.job or (row.detail if row.state != "running" else "")
    return {
        "target": row.target,
        "state": Text(row.state, style=STATE_STYLES.get(row.state, "")),
        "nodes": nodes,
        "gpus": "" if row.gpus is None else f"{row.gpus:g}",
        "job": job if len(job) <= JOB_CHARS else job[: JOB_CHARS - 1] + "…",
        "age": duration(row.job_age) if row.job_age is not None else "",
        "step": "" if row.step is None else str(row.step),
        "left": duration(row.time_left) if row.time_left is not None else "",
        "alerts": alerts,
    }


class RunsApp(App[str | None]):
    """The list of targets (see the module's docstring)."""

    TITLE = "ray-cockpit · runs"
    CSS = """
    #runs-head { height: 1; padding: 0 1; background: $panel; }
    #runs-table { height: 1fr; }
    #runs-detail { height: auto; max-height: 6; padding: 0 1; }
    #runs-keys { height: 1; padding: 0 1; background: $panel; color: $text-muted; }
    """
    BINDINGS = [
        Binding("enter", "open", "open", show=False),
        Binding("r", "refresh", "look again", show=False),
        Binding("q,escape,ctrl+c", "quit_list", "quit", show=False, priority=True),
    ]

    def __init__(
        self,
        load: Callable[[], Awaitable[Sequence[RunRow]]] | None = None,
        rows: Sequence[RunRow] | None = None,
        theme: str = "textual-dark",
    ) -> None:
        super().__init__()
        self._load = load
        self.rows: list[RunRow] = list(rows or ())
        self._theme_name = theme
        self.looked_at: float | None = time.time() if rows is not None else None
        self.looking = False

    def compose(self) -> ComposeResult:
        yield Static(id="runs-head")
        yield KeyedTable(COLUMNS, id="runs-table")
        yield Static(id="runs-detail")
        yield Static("Enter open the cockpit (q there comes back) · r look again · q quit", id="runs-keys")

    def on_mount(self) -> None:
        self.theme = self._theme_name
        self.query_one(KeyedTable).focus()
        self._show()
        if self._load is not None:
            self.action_refresh()
            self.set_interval(REFRESH_S, self.action_refresh, name="runs-refresh")

    def action_refresh(self) -> None:
        if self._load is None or self.looking:
            return
        self.looking = True
        self._show()
        self.run_worker(self._look(), group="runs", exclusive=True, exit_on_error=False)

    async def _look(self) -> None:
        assert self._load is not None
        try:
            self.rows = list(await self._load())
            self.looked_at = time.time()
        finally:
            self.looking = False
            self._show()

    def action_open(self) -> None:
        key = self.query_one(KeyedTable).current_key()
        if key is not None:
            self.exit(key)

    def on_data_table_row_selected(self, _event: Any) -> None:
        """Enter on a row (the table takes the key itself)."""
        self.action_open()

    def action_quit_list(self) -> None:
        self.exit(None)

    def on_data_table_row_highlighted(self, _event: Any) -> None:
        self._show_detail()

    def _show(self) -> None:
        table = self.query_one(KeyedTable)
        table.show_rows((row.target, row_cells(row)) for row in self.rows)
        running = sum(1 for r in self.rows if r.state == "running")
        wrong = sum(1 for r in self.rows if r.alerts or r.state == "unreachable")
        if self.looking and not self.rows:
            head = "looking at your targets…"
        elif not self.rows:
            head = "no targets: `cockpit local up`, `cockpit slurm up`, or `runs.hosts` in the config"
        else:
            count = f"{len(self.rows)} target" + ("s" if len(self.rows) != 1 else "")
            head = f"{count} · {running} running · {wrong} need a look"
            head += " · looking again…" if self.looking else ""
        self.query_one("#runs-head", Static).update(Text(head))
        self._show_detail()

    def _show_detail(self) -> None:
        key = self.query_one(KeyedTable).current_key()
        row = next((r for r in self.rows if r.target == key), None)
        lines: list[str] = []
        if row is not None:
            lines.append(
                f"{row.target} ({row.source}): {row.state}" + (f" · {row.detail}" if row.detail else "")
            )
            lines.extend(f"✖ {alert}" for alert in row.alerts[:4])
        self.query_one("#runs-detail", Static).update(Text("\n".join(clean(line) for line in lines)))
