"""Provides the cockpit screen (key 0): several screens' panes at once, arranged by the layout.

Each pane is the widget of its own screen (join progress, node table, GPU heatmap or list, jobs strip,
log view, paused-worker table, metric chart) drawn from the same state; `tab` moves between panes and
Enter opens the pane's own screen. The screen needs what its panes need (the union), so the feeds fetch
for every pane shown. The driver-log pane follows the newest running job's driver log (the job the
training curves and the hang watch follow: `cockpit.core.snapshots.job_to_show`), read from the shared
driver-log feed (one stream per job, whoever reads it) while the screen is shown.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widget import Widget

from cockpit.core.snapshots import JobRow, job_to_show
from cockpit.ui.feeds.driver_logs import LogPosition, LogReader, driver_logs_of
from cockpit.ui.screens.base import CockpitScreen
from cockpit.ui.screens.debugger import COLUMNS as PAUSED_COLUMNS
from cockpit.ui.screens.debugger import paused_rows
from cockpit.ui.screens.metrics import draw_chart
from cockpit.ui.state import CockpitState, Need, Topic
from cockpit.ui.widgets.gpu_heatmap import GpuHeatmap
from cockpit.ui.widgets.gpu_list import GpuList
from cockpit.ui.widgets.jobs_strip import JobsStrip
from cockpit.ui.widgets.join_progress import JoinPanel
from cockpit.ui.widgets.key_hints import KeyHints
from cockpit.ui.widgets.keyed_table import KeyedTable
from cockpit.ui.widgets.log_view import LogView
from cockpit.ui.widgets.metric_chart import MetricChart
from cockpit.ui.widgets.node_table import NodeTable
from cockpit.ui.widgets.safe_text import clean

LOG_LINES = 200
"""Lines of the driver log read back when the pane starts following a job."""


@dataclass(frozen=True)
class PaneKind:
    title: str
    mode: str
    """The screen Enter opens."""
    needs: frozenset[Need]
    topics: frozenset[Topic]
    make: Callable[[CockpitState], Widget]
    show: Callable[[Any, CockpitState], None]
    auto: bool = False
    """As tall as its content (a row of such panes is too), instead of sharing the height."""


def followed_job(state: CockpitState) -> JobRow | None:
    """The job the driver-log pane follows: the newest running one, else the newest with a driver log."""
    return job_to_show(state.snapshot.jobs) if state.snapshot is not None else None


def _show_join(panel: JoinPanel, state: CockpitState) -> None:
    progress = state.join_progress()
    if progress is not None:
        panel.show(progress)


def _show_nodes(table: NodeTable, state: CockpitState) -> None:
    table.set_class(state.connection.stale, "stale")
    if state.snapshot is not None:
        table.show(state.snapshot.nodes, state.snapshot.silent, memory=state.memory.by_node)


def _show_heatmap(heatmap: GpuHeatmap, state: CockpitState) -> None:
    if state.gpu_fleet is not None:
        heatmap.show(state.gpu_fleet)


def _show_gpu_list(gpus: GpuList, state: CockpitState) -> None:
    if state.gpu_fleet is not None:
        gpus.show(state.gpu_fleet, history=state.gpu_board.history)


def _show_jobs(strip: JobsStrip, state: CockpitState) -> None:
    if state.snapshot is not None:
        strip.show(state.snapshot.jobs)


def _show_paused(table: KeyedTable, state: CockpitState) -> None:
    box = table.parent
    if isinstance(box, Widget):
        total = sum(len(g.members) for g in state.paused.groups)
        box.border_subtitle = f"{total} paused" if total else "none paused"
    table.show_rows(paused_rows(state.paused.groups, time.time(), max(24, table.size.width - 75)))


def _show_metrics(chart: MetricChart, state: CockpitState) -> None:
    draw_chart(chart, state.metrics)


def _paused_table(_state: CockpitState) -> KeyedTable:
    return KeyedTable(PAUSED_COLUMNS)


PANES: dict[str, PaneKind] = {
    "join": PaneKind(
        "Join progress",
        "cluster",
        frozenset({"nodes"}),
        frozenset({"snapshot"}),
        lambda s: JoinPanel(s.expect_nodes, s.expect_gpus),
        _show_join,
        auto=True,
    ),
    "nodes": PaneKind(
        "Nodes",
        "cluster",
        frozenset({"nodes"}),
        frozenset({"snapshot", "connection"}),
        lambda s: NodeTable(),
        _show_nodes,
    ),
    "gpu_heatmap": PaneKind(
        "GPUs",
        "gpus",
        frozenset({"nodes", "gpus"}),
        frozenset({"gpus"}),
        lambda s: GpuHeatmap(),
        _show_heatmap,
    ),
    "gpu_list": PaneKind(
        "GPUs",
        "gpus",
        frozenset({"nodes", "gpus", "actors"}),
        frozenset({"gpus"}),
        lambda s: GpuList(),
        _show_gpu_list,
    ),
    "jobs": PaneKind(
        "Jobs",
        "jobs",
        frozenset({"nodes", "jobs"}),
        frozenset({"snapshot"}),
        lambda s: JobsStrip(),
        _show_jobs,
        auto=True,
    ),
    "driver_log": PaneKind(
        "Driver log",
        "logs",
        frozenset({"nodes", "jobs"}),
        frozenset(),
        lambda s: LogView(max_lines=20_000),
        lambda view, state: None,  # fed by the screen's stream
    ),
    "paused": PaneKind(
        "Paused workers",
        "debugger",
        frozenset({"nodes", "paused"}),
        frozenset({"paused"}),
        _paused_table,
        _show_paused,
        auto=True,
    ),
    "metrics": PaneKind(
        "Training curves",
        "metrics",
        frozenset({"nodes", "jobs"}),
        frozenset({"metrics"}),
        lambda s: MetricChart(),
        _show_metrics,
    ),
}


class PaneBox(Vertical, can_focus=True):
    """One pane: its title on the border, the widget of its own screen inside; Enter opens that screen."""

    BINDINGS = [Binding("enter", "open", "Open its screen", id="cockpit.open", show=False)]
    DEFAULT_CSS = """
    PaneBox { width: 1fr; height: 1fr; border: round $panel-lighten-2; }
    PaneBox.-auto { height: auto; max-height: 12; }
    PaneBox:focus { border: round $accent; }
    PaneBox > JoinPanel, PaneBox > JoinPanel.ready, PaneBox > JobsStrip {
        border: none; padding: 0 1; height: auto;
    }
    PaneBox > DataTable { height: auto; max-height: 10; }
    PaneBox > NodeTable, PaneBox > GpuHeatmap, PaneBox > GpuList, PaneBox > LogView, PaneBox > MetricChart {
        height: 1fr;
    }
    /* A pane is a glance (Enter opens the screen, which scrolls sideways): no line for a sideways bar,
       which at 80x24 hid the third node and a line of the log. */
    PaneBox > DataTable, PaneBox > LogView { scrollbar-size-horizontal: 0; }
    """

    def __init__(self, name: str, kind: PaneKind, widget: Widget) -> None:
        super().__init__(id=f"pane-{name}", classes="-auto" if kind.auto else "")
        self.pane = name
        self.kind = kind
        self.widget = widget
        self.border_title = kind.title
        widget.can_focus = False  # the pane takes the focus: tab moves pane to pane

    def compose(self) -> ComposeResult:
        yield self.widget

    async def action_open(self) -> None:
        await self.app.switch_mode(self.kind.mode)


class CockpitLayoutScreen(CockpitScreen):
    TITLE = "0 Cockpit"
    BINDINGS = [
        Binding("tab", "app.focus_next", "Next pane", id="cockpit.next_pane", show=False),
        Binding("shift+tab", "app.focus_previous", "Previous pane", id="cockpit.previous_pane", show=False),
    ]
    DEFAULT_CSS = """
    CockpitLayoutScreen .cockpit-row { height: 1fr; }
    CockpitLayoutScreen .cockpit-row.-auto { height: auto; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.job: JobRow | None = None
        """The job whose driver log the driver-log pane follows."""
        self.reader: LogReader | None = None
        """The pane among the readers of that log, while the screen is shown."""
        self.position: LogPosition | None = None
        """Where the pane's lines end: shown again, it goes on from there (no line lost or repeated)."""

    @property
    def boxes(self) -> list[PaneBox]:
        return list(self.query(PaneBox))

    @property
    def needs(self) -> frozenset[Need]:
        needs: set[Need] = {"nodes"}
        for pane in self.state.layout.panes:
            needs |= PANES[pane].needs
        return frozenset(needs)

    def compose_body(self) -> ComposeResult:
        state = self.state
        for number, row in enumerate(state.layout.cockpit, 1):
            auto = all(PANES[p].auto for p in row)
            with Horizontal(id=f"row-{number}", classes="cockpit-row -auto" if auto else "cockpit-row"):
                for name in row:
                    kind = PANES[name]
                    yield PaneBox(name, kind, kind.make(state))
        yield KeyHints(self, PaneBox, id="cockpit-hint")

    def on_mount(self) -> None:
        boxes = self.boxes
        if boxes:
            boxes[0].focus()

    def state_changed(self, topics: frozenset[Topic]) -> None:
        super().state_changed(topics)
        for box in self.boxes:
            if topics & box.kind.topics:
                box.kind.show(box.widget, self.state)
        if "snapshot" in topics:
            self._follow_newest()

    def refresh_view(self) -> None:
        for box in self.boxes:
            box.kind.show(box.widget, self.state)
        self._follow_newest()

    # -- the driver-log pane's stream --------------------------------------------------------------

    def on_screen_suspend(self) -> None:
        self._stop()

    def _stop(self) -> None:
        if self.reader is not None:
            self.position = self.reader.position or self.position
            self.reader.leave()
            self.reader = None

    def _follow_newest(self) -> None:
        boxes = [box for box in self.boxes if box.pane == "driver_log"]
        if not boxes:
            return
        box = boxes[0]
        job = followed_job(self.state)
        if job is None:
            box.border_subtitle = "no job with a driver log yet"
            return
        box.border_subtitle = clean(f"{job.key} · {job.status.lower()}")
        view = box.widget
        assert isinstance(view, LogView)
        if self.job is None or job.key != self.job.key:
            self._stop()
            view.clear()
            self.job, self.position = job, None
        if self.reader is not None and self.reader.left:  # it could not read what it missed: again
            self._stop()
        if self.is_current and self.reader is None and not getattr(self.app, "offline", False):
            label = "driver"

            def took(chunk: bytes, _history: bool) -> None:
                view.append(label, chunk)

            def said(message: str, failed: bool) -> None:
                if failed:
                    view.append(label, f"cockpit: {clean(message)}\n")

            self.reader = driver_logs_of(self.app).join(
                job, took, lines=LOG_LINES, since=self.position, said=said
            )
