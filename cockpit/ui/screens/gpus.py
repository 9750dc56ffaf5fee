"""Provides the GPU screen (key 2): every GPU of every node, with history and the actors on it.

Two views of one `GpuFleet`: the list (a row per GPU, grouped by node or sorted by utilization or memory)
and the heatmap (a cell per GPU; 1,024 nodes x 8 GPUs on one 200x50 screen). Large clusters open on the
heatmap. `h` starts the high-resolution agent on the nodes (1 Hz readings through the SSH link); if it
cannot start, the view stays on the dashboard's readings and says why in one line.
"""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.timer import Timer
from textual.widgets import Input

from cockpit.core.gpu.board import SORT_KEYS, GpuFleet, SortKey
from cockpit.ui.messages import HighResToggled
from cockpit.ui.screens.base import CockpitScreen, type_into
from cockpit.ui.state import Topic
from cockpit.ui.widgets import gpu_cells as cells
from cockpit.ui.widgets.gpu_heatmap import GpuHeatmap, cursor_detail
from cockpit.ui.widgets.gpu_list import GpuList
from cockpit.ui.widgets.key_hints import KeyHints
from cockpit.ui.widgets.safe_text import clean
from cockpit.ui.widgets.text_line import TextLine

HEATMAP_FROM = 256
"""GPUs from which the screen opens on the heatmap (a list of more rows no longer shows the picture)."""
TICK_SECONDS = 2.0
"""How often ages move on between polls while the screen is shown."""
SORT_NAMES = {"node": "by node", "util": "by utilization (lowest first)", "memory": "by memory used"}


class GpuScreen(CockpitScreen):
    TITLE = "2 GPUs"
    NEEDS = frozenset({"nodes", "gpus", "actors"})
    SHOWS = frozenset({"gpus"})
    AUTO_FOCUS = "#gpu-list"
    BINDINGS = [
        Binding("s", "cycle_sort", "Sort", id="gpus.sort", show=False),
        Binding("v", "toggle_view", "Heatmap / list", id="gpus.view", show=False),
        Binding("slash", "filter", "Filter", key_display="/", id="gpus.filter", show=False, priority=True),
        Binding("escape", "clear_filter", "Clear the filter", id="gpus.clear", show=False),
        Binding("h", "toggle_high_res", "1 Hz agent (high resolution)", id="gpus.high_res", show=False),
    ]
    DEFAULT_CSS = """
    GpuScreen #gpu-totals { height: 1; background: $boost; padding: 0 1; }
    GpuScreen #gpu-notice { height: 1; padding: 0 1; display: none; }
    GpuScreen #gpu-notice.shown { display: block; }
    GpuScreen #gpu-notice.error { background: $error 25%; }
    GpuScreen GpuList, GpuScreen GpuHeatmap { height: 1fr; }
    GpuScreen GpuHeatmap { display: none; }
    GpuScreen.heatmap GpuHeatmap { display: block; }
    GpuScreen.heatmap GpuList { display: none; }
    GpuScreen #gpu-legend { height: 3; padding: 0 1; display: none; }
    GpuScreen.heatmap #gpu-legend { display: block; }
    GpuScreen #gpu-filter { display: none; }
    GpuScreen #gpu-filter.shown { display: block; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.sort: SortKey = "node"
        self.node_filter = ""
        self.view: str | None = None
        """"list" or "heatmap" once chosen (by size at first data, then by the user)."""
        self._tick: Timer | None = None
        self._cursor_text = Text()

    def compose_body(self) -> ComposeResult:
        yield TextLine("waiting for the first reading of the cluster…", id="gpu-totals")
        yield TextLine("", id="gpu-notice")
        yield GpuList(id="gpu-list")
        yield GpuHeatmap(id="gpu-heatmap")
        yield Input(id="gpu-filter", compact=True, placeholder="node name, IP, node id, actor or role")
        yield TextLine("", id="gpu-legend")
        yield KeyHints(self, GpuHeatmap, id="gpu-hint")

    def on_screen_resume(self) -> None:
        super().on_screen_resume()
        if self._tick is None:
            self._tick = self.set_interval(TICK_SECONDS, self._age_tick, name="gpu-ages")
        else:
            self._tick.resume()

    def on_screen_suspend(self) -> None:
        if self._tick is not None:
            self._tick.pause()

    def _age_tick(self) -> None:
        fleet = self.state.gpu_fleet
        if self.view == "list" and fleet is not None and fleet.totals.with_telemetry:  # ages on screen
            self.query_one(GpuList).tick()

    # -- data --------------------------------------------------------------------------------------

    def state_changed(self, topics: frozenset[Topic]) -> None:
        super().state_changed(topics)
        if "gpu_notice" in topics:
            self.show_notice()

    def refresh_view(self) -> None:
        requested = self.state.requested_gpu_filter
        if requested is not None:  # `g` on the Actors screen: that actor's node, in the list
            self.state.requested_gpu_filter = None
            self.node_filter = requested
            self.sort = "node"
            self._set_view("list")
        fleet = self.state.gpu_fleet
        if fleet is None:
            return
        if self.view is None:
            self._set_view("heatmap" if len(fleet.rows) >= HEATMAP_FROM else "list")
        self.query_one("#gpu-totals", TextLine).show(self._totals_text(fleet))
        if self.view == "heatmap":
            heatmap = self.query_one(GpuHeatmap)
            heatmap.show(fleet, self.node_filter)
            self.query_one(GpuList).fleet = None
        else:
            self.query_one(GpuList).show(fleet, self.sort, self.node_filter, self.state.gpu_board.history)
        self.show_notice()

    def _totals_text(self, fleet: GpuFleet) -> Text:
        totals = fleet.totals
        text = Text(no_wrap=True, overflow="ellipsis")
        if not totals.gpus:
            text.append("no GPUs in this cluster", style="bold")
            if totals.nodes_without_gpus:
                text.append(f" · {totals.nodes_without_gpus} node(s) without GPUs")
            return text
        text.append(f"{totals.gpus} GPUs", style="bold")
        text.append(f" on {totals.nodes_with_gpus} nodes")
        if totals.with_telemetry:
            text.append(" · util ")
            text.append(cells.util_text(totals.mean_utilization), style="bold")
            text.append(" mean · mem ")
            text.append(f"{cells.memory(totals.memory_used_mib, totals.memory_total_mib)}", style="bold")
            idle_style = "bold yellow" if fleet.job_running and totals.idle else ""
            text.append(" · ")
            text.append(f"{totals.idle} idle", style=idle_style)
        if totals.stale:
            text.append(" · ")
            text.append(f"{totals.stale} stale", style="bold red")
        if totals.no_telemetry:
            text.append(f" · {totals.no_telemetry} without telemetry", style="dim")
        if totals.nodes_without_gpus:
            text.append(f" · {totals.nodes_without_gpus} node(s) without GPUs", style="dim")
        text.append(f" · {SORT_NAMES[self.sort] if self.view == 'list' else 'heatmap'}", style="dim")
        if self.node_filter:
            text.append(f" · filter {self.node_filter!r}", style="italic")
        if fleet.job_running:
            text.append(" · job running", style="dim")
        return text

    def show_notice(self) -> None:
        notice = self.query_one("#gpu-notice", TextLine)
        news = self.state.high_res
        notice.show(Text(clean(news.text), no_wrap=True, overflow="ellipsis"))  # an agent's error text
        notice.set_class(bool(news.text), "shown")
        notice.set_class(news.error, "error")

    # -- actions -----------------------------------------------------------------------------------

    def action_cycle_sort(self) -> None:
        self.sort = SORT_KEYS[(SORT_KEYS.index(self.sort) + 1) % len(SORT_KEYS)]
        if self.view != "list":
            self._set_view("list")
        self.refresh_view()

    def action_toggle_view(self) -> None:
        self._set_view("list" if self.view == "heatmap" else "heatmap")
        self.refresh_view()

    def _set_view(self, view: str) -> None:
        self.view = view
        self.set_class(view == "heatmap", "heatmap")
        (self.query_one(GpuHeatmap) if view == "heatmap" else self.query_one(GpuList)).focus()

    def action_filter(self) -> None:
        """A priority binding (see `ActorsScreen.action_filter`): keys typed right behind `/` go to the
        filter, not to the list's `s`, `v` and `h`; a `/` typed in the filter is a `/`."""
        field = self.query_one("#gpu-filter", Input)
        if field.has_focus:
            type_into(field, "slash", "/")
            return
        field.value = self.node_filter
        field.add_class("shown")
        self.set_focus(field)

    @on(Input.Changed, "#gpu-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.node_filter = event.value.strip()
        self.refresh_view()

    @on(Input.Submitted, "#gpu-filter")
    def _filter_done(self) -> None:
        self.query_one("#gpu-filter", Input).remove_class("shown")
        (self.query_one(GpuHeatmap) if self.view == "heatmap" else self.query_one(GpuList)).focus()

    def action_clear_filter(self) -> None:
        field = self.query_one("#gpu-filter", Input)
        field.remove_class("shown")
        if self.node_filter:
            self.node_filter = ""
            field.value = ""
            self.refresh_view()
        (self.query_one(GpuHeatmap) if self.view == "heatmap" else self.query_one(GpuList)).focus()

    def action_toggle_high_res(self) -> None:
        fleet = self.state.gpu_fleet
        preferred: set[str] = set()
        if fleet is not None and self.node_filter:  # with more nodes than agents, the filtered come first
            preferred = {fleet.rows[i].node.node_id for i in fleet.order("node", self.node_filter)}
        self.post_message(HighResToggled(frozenset(preferred)))

    @on(GpuHeatmap.NodeChosen)
    def _node_chosen(self, event: GpuHeatmap.NodeChosen) -> None:
        """Enter on a cell: the list, filtered to that node."""
        self.node_filter = event.node.node_id[:12]
        self.sort = "node"
        self._set_view("list")
        self.refresh_view()

    @on(GpuHeatmap.CursorMoved)
    def _cursor_moved(self, event: GpuHeatmap.CursorMoved) -> None:
        heatmap = event.heatmap
        legend = heatmap.legend()
        if event.row is not None and heatmap.fleet is not None:
            legend.append("\n")
            legend.append_text(cursor_detail(heatmap.fleet, event.row))
        self.query_one("#gpu-legend", TextLine).show(legend)
