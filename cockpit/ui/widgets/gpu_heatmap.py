"""Provides `GpuHeatmap`: one cell per GPU, coloured by utilization, 1,024 nodes x 8 GPUs on one screen.

Each node is a run of cells (its GPUs) and two node rows share one terminal row through the half block
"▀" (upper cell in the foreground colour, lower cell in the background colour), so a 200x50 terminal
holds 21 nodes x 8 GPUs per row and 1,024 nodes in 25 rows. `show` reduces every GPU to a colour class
(one byte) in one pass; `render_line` draws the visible rows from those bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from cockpit.core.gpu_board import IDLE_BELOW, GpuFleet, GpuRow, is_stale
from cockpit.core.snapshots import NA, NodeSnapshot

CLASSES = (
    "dead",
    "none",
    "stale",
    "na",
    "idle-job",
    "u0",
    "u1",
    "u2",
    "u3",
    "u4",
    "u5",
)
"""Colour classes, by index; a cell's byte is its index here (EMPTY for padding)."""
DEAD, NONE, STALE, NA_CLASS, IDLE_JOB, U0 = range(6)
EMPTY = 255
LEGEND = (
    ("u5", "≥90%"),
    ("u4", "75-90"),
    ("u3", "50-75"),
    ("u2", "25-50"),
    ("u1", f"{IDLE_BELOW:.0f}-25"),
    ("u0", f"<{IDLE_BELOW:.0f}%"),
    ("idle-job", "idle while a job runs"),
    ("na", "N/A"),
    ("stale", "stale"),
    ("none", "no telemetry"),
    ("dead", "dead node"),
)
LABEL_WIDTH = 6
"""The node number at the start of each row ("  1024 ")."""


def util_class(utilization: float) -> int:
    if utilization < IDLE_BELOW:
        return U0
    if utilization < 25:
        return U0 + 1
    if utilization < 50:
        return U0 + 2
    if utilization < 75:
        return U0 + 3
    if utilization < 90:
        return U0 + 4
    return U0 + 5


def cell_class(fleet: GpuFleet, row: GpuRow, now: float) -> int:
    if not row.node.alive:
        return DEAD
    gpu = row.gpu
    if gpu is None:
        return NONE
    if is_stale(row, now):
        return STALE
    if gpu.utilization is NA:
        return NA_CLASS
    util = float(gpu.utilization)
    if util < IDLE_BELOW and fleet.job_running:
        return IDLE_JOB
    return util_class(util)


class GpuHeatmap(ScrollView, can_focus=True):
    """The whole fleet as coloured cells; a cursor picks a GPU, Enter opens its node in the list."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {f"gpu-heatmap--{name}" for name in CLASSES} | {
        "gpu-heatmap--cursor",
        "gpu-heatmap--label",
    }
    DEFAULT_CSS = """
    GpuHeatmap {
        background: $surface;
        overflow-y: auto;
        overflow-x: hidden;
        &:focus { background-tint: $foreground 5%; }
    }
    GpuHeatmap > .gpu-heatmap--u5 { color: $success-lighten-2; }
    GpuHeatmap > .gpu-heatmap--u4 { color: $success; }
    GpuHeatmap > .gpu-heatmap--u3 { color: $success-darken-2; }
    GpuHeatmap > .gpu-heatmap--u2 { color: $primary-lighten-1; }
    GpuHeatmap > .gpu-heatmap--u1 { color: $primary-darken-2; }
    GpuHeatmap > .gpu-heatmap--u0 { color: $secondary-darken-2; }
    GpuHeatmap > .gpu-heatmap--idle-job { color: $warning; }
    GpuHeatmap > .gpu-heatmap--na { color: $foreground-darken-3; }
    GpuHeatmap > .gpu-heatmap--stale { color: $error-lighten-1; }
    GpuHeatmap > .gpu-heatmap--none { color: $panel-lighten-2; }
    GpuHeatmap > .gpu-heatmap--dead { color: $error-darken-3; }
    GpuHeatmap > .gpu-heatmap--cursor { color: $foreground; }
    GpuHeatmap > .gpu-heatmap--label { color: $text-muted; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left", "move(0, -1)", "Previous GPU", show=False),
        Binding("right", "move(0, 1)", "Next GPU", show=False),
        Binding("up", "move(-1, 0)", "Node row up", show=False),
        Binding("down", "move(1, 0)", "Node row down", show=False),
        Binding("pageup", "move(-20, 0)", "Page up", show=False),
        Binding("pagedown", "move(20, 0)", "Page down", show=False),
        Binding("home", "jump(0)", "First GPU", show=False),
        Binding("end", "jump(-1)", "Last GPU", show=False),
        Binding("enter", "choose", "Open node", id="gpus.open_node", show=False),
    ]

    @dataclass
    class CursorMoved(Message):
        heatmap: GpuHeatmap
        row: GpuRow | None

        @property
        def control(self) -> GpuHeatmap:
            return self.heatmap

    @dataclass
    class NodeChosen(Message):
        heatmap: GpuHeatmap
        node: NodeSnapshot

        @property
        def control(self) -> GpuHeatmap:
            return self.heatmap

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id, classes=classes)
        self.fleet: GpuFleet | None = None
        self._map_nodes: list[NodeSnapshot] = []
        self._rows: list[list[GpuRow]] = []
        self._cells: list[bytes] = []
        self._per_node = 1
        """GPU cells per node: the most GPUs any node has."""
        self.cursor = (0, 0)
        """(node number, GPU number) in the map."""
        self._version = 0
        self._strips: LRUCache[tuple[object, ...], Strip] = LRUCache(256)
        self._pairs: dict[tuple[int, int], Style] = {}

    # -- data --------------------------------------------------------------------------------------

    def show(self, fleet: GpuFleet, node_filter: str = "", now: float | None = None) -> None:
        """Colour every GPU of `fleet` (one pass); `now` on the cluster's clock, for a fixed picture."""
        self.fleet = fleet
        now = fleet.now() if now is None else now
        nodes: list[NodeSnapshot] = []
        rows: list[list[GpuRow]] = []
        cells: list[bytes] = []
        current: NodeSnapshot | None = None
        group: list[GpuRow] = []
        classes: list[int] = []
        for row in fleet.ordered("node", node_filter):
            if row.node is not current:
                if current is not None:
                    nodes.append(current)
                    rows.append(group)
                    cells.append(bytes(classes))
                current, group, classes = row.node, [], []
            group.append(row)
            classes.append(cell_class(fleet, row, now))
        if current is not None:
            nodes.append(current)
            rows.append(group)
            cells.append(bytes(classes))
        self._map_nodes, self._rows, self._cells = nodes, rows, cells
        self._per_node = max((len(c) for c in cells), default=1)
        node, gpu = self.cursor
        self.cursor = (min(node, max(0, len(nodes) - 1)), gpu)
        self._version += 1
        self._sync_size()
        self.refresh()
        self.post_message(self.CursorMoved(self, self.cursor_row))

    @property
    def nodes_per_line(self) -> int:
        return max(1, (self.size.width - LABEL_WIDTH) // (self._per_node + 1))

    @property
    def text_rows(self) -> int:
        node_rows = -(-len(self._map_nodes) // self.nodes_per_line)
        return (node_rows + 1) // 2

    @property
    def cursor_row(self) -> GpuRow | None:
        node, gpu = self.cursor
        if node >= len(self._rows) or gpu >= len(self._rows[node]):
            return None
        return self._rows[node][gpu]

    def _sync_size(self) -> None:
        self.virtual_size = Size(self.size.width, self.text_rows)

    def on_resize(self, _event: events.Resize) -> None:
        self._strips.clear()
        self._sync_size()

    # -- keys --------------------------------------------------------------------------------------

    def action_move(self, node_rows: int, gpus: int) -> None:
        if not self._map_nodes:
            return
        node, gpu = self.cursor
        if gpus:
            flat = node * self._per_node + gpu + gpus
            node, gpu = divmod(max(0, min(flat, len(self._map_nodes) * self._per_node - 1)), self._per_node)
        if node_rows:
            node = max(0, min(len(self._map_nodes) - 1, node + node_rows * self.nodes_per_line))
        gpu = min(gpu, max(0, len(self._cells[node]) - 1))
        self._set_cursor(node, gpu)

    def action_jump(self, where: int) -> None:
        if self._map_nodes:
            node = 0 if where == 0 else len(self._map_nodes) - 1
            self._set_cursor(node, 0 if where == 0 else len(self._cells[node]) - 1)

    def action_choose(self) -> None:
        row = self.cursor_row
        if row is not None:
            self.post_message(self.NodeChosen(self, row.node))

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        x, y = offset.x - LABEL_WIDTH, offset.y + self.scroll_offset.y
        if x < 0:
            return
        column, gpu = divmod(x, self._per_node + 1)
        if column >= self.nodes_per_line or gpu >= self._per_node:
            return
        node = (y * 2) * self.nodes_per_line + column
        if node < len(self._map_nodes) and gpu < len(self._cells[node]):
            self._set_cursor(node, gpu)

    def _set_cursor(self, node: int, gpu: int) -> None:
        if (node, gpu) == self.cursor:
            return
        self.cursor = (node, gpu)
        self._version += 1
        self.refresh()
        line = (node // self.nodes_per_line) // 2
        self.scroll_to_region(Region(0, line, 1, 1), animate=False, immediate=True)
        self.post_message(self.CursorMoved(self, self.cursor_row))

    # -- rendering ---------------------------------------------------------------------------------

    def _class_style(self, index: int) -> Style:
        if index == EMPTY:
            return self.rich_style
        name = "cursor" if index == -1 else CLASSES[index]
        return self.get_component_rich_style(f"gpu-heatmap--{name}", partial=True)

    def _pair(self, top: int, bottom: int) -> Style:
        style = self._pairs.get((top, bottom))
        if style is None:
            upper = self._class_style(top).color if top != EMPTY else self.rich_style.bgcolor
            lower = self._class_style(bottom).color if bottom != EMPTY else self.rich_style.bgcolor
            style = Style(color=upper, bgcolor=lower)
            self._pairs[(top, bottom)] = style
        return style

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._pairs.clear()
        self._strips.clear()

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        line = y + self.scroll_offset.y
        key = (line, width, self._version)
        strip = self._strips.get(key)
        if strip is None:
            strip = self._render_row(line, width).crop_extend(0, width, self.rich_style)
            self._strips[key] = strip
        return strip

    def _render_row(self, line: int, width: int) -> Strip:
        per_line = self.nodes_per_line
        top_first = line * 2 * per_line
        if top_first >= len(self._map_nodes):
            return Strip.blank(width, self.rich_style)
        label_style = self.rich_style + self._class_style_named("label")
        segments = [Segment(f"{top_first:>{LABEL_WIDTH - 1}} ", label_style)]
        cursor_node, cursor_gpu = self.cursor
        gap = Segment(" ", self.rich_style)
        empty = bytes([EMPTY]) * self._per_node
        for column in range(per_line):
            top_node = top_first + column
            if top_node >= len(self._cells):
                break
            bottom_node = top_node + per_line
            top = self._cells[top_node] if top_node < len(self._cells) else empty
            bottom = self._cells[bottom_node] if bottom_node < len(self._cells) else empty
            for gpu in range(self._per_node):
                upper = top[gpu] if gpu < len(top) else EMPTY
                lower = bottom[gpu] if gpu < len(bottom) else EMPTY
                if gpu == cursor_gpu:
                    if top_node == cursor_node:
                        upper = -1
                    elif bottom_node == cursor_node:
                        lower = -1
                segments.append(Segment("▀", self._pair(upper, lower)))
            segments.append(gap)
        return Strip(segments)

    def _class_style_named(self, name: str) -> Style:
        return self.get_component_rich_style(f"gpu-heatmap--{name}", partial=True)

    def legend(self) -> Text:
        """The colour key, in the map's own colours."""
        text = Text()
        for name, label in LEGEND:
            text.append("■ ", self._class_style_named(name))
            text.append(f"{label}  ")
        return text

    def text_grid(self) -> list[str]:
        """The map as one character per cell (class initial), node rows unfolded: for snapshot tests."""
        marks = "xnsaIo12345"
        per_line = self.nodes_per_line
        out = []
        for first in range(0, len(self._cells), per_line):
            parts = [f"{first:>{LABEL_WIDTH - 1}} "]
            for cells in self._cells[first : first + per_line]:
                parts.append("".join(marks[c] for c in cells).ljust(self._per_node) + " ")
            out.append("".join(parts).rstrip())
        return out
