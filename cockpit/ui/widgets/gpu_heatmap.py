"""Provides `GpuHeatmap`: one cell per GPU, coloured by utilization, 1,024 nodes x 8 GPUs on one screen.

Each node is a run of cells (its GPUs) and two node rows share one terminal row through the half block
"▀" (upper cell in the foreground colour, lower cell in the background colour), so a 200x50 terminal
holds 21 nodes x 8 GPUs per row and 1,024 nodes in 25 rows. `show` reduces every GPU to a colour class
(one byte) in one pass; `render_line` draws the visible rows from those bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
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

from cockpit.core.gpu.board import IDLE_BELOW, GpuFleet, GpuRow
from cockpit.core.snapshots import NodeSnapshot
from cockpit.ui.widgets.gpu_cells import age, celsius, gpu_label, memory, util_text, watts
from cockpit.ui.widgets.safe_text import clean

CLASSES = (  # in the order of the fleet's state codes (cockpit.core.gpu.board: DEAD ... U0 + 5)
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
"""Colour classes, by state code; a cell's byte is its state (EMPTY for padding)."""
EMPTY = 255
CURSOR = 254
"""The cell under the cursor (drawn in the cursor colour)."""
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
        Binding("left", "move(0, -1)", "Previous GPU", id="heatmap.left", show=False),
        Binding("right", "move(0, 1)", "Next GPU", id="heatmap.right", show=False),
        Binding("up", "move(-1, 0)", "Node row up", id="heatmap.up", show=False),
        Binding("down", "move(1, 0)", "Node row down", id="heatmap.down", show=False),
        Binding("pageup", "move(-20, 0)", "Page up", id="heatmap.page_up", show=False),
        Binding("pagedown", "move(20, 0)", "Page down", id="heatmap.page_down", show=False),
        Binding("home", "jump(0)", "First GPU", id="heatmap.first", show=False),
        Binding("end", "jump(-1)", "Last GPU", id="heatmap.last", show=False),
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
        self._members: list[Sequence[int]] = []
        """Per node in the map, the indices of its rows in the fleet."""
        self._cells: list[bytes] = []
        """Per node in the map, the state of each of its GPUs (the fleet's state codes)."""
        self._per_node = 1
        """GPU cells per node: the most GPUs any node has."""
        self.cursor = (0, 0)
        """(node number, GPU number) in the map."""
        self._cursor_key: tuple[str, int] | None = None
        """The cursor's GPU as (node id, GPU index), once the user moved it."""
        self._version = 0
        self._strips: LRUCache[tuple[object, ...], Strip] = LRUCache(256)
        self._pairs: list[Style | None] = [None] * 65536
        """Half-block styles by (upper state << 8) | lower state, made on first use."""
        self._named: dict[str, Style] = {}
        self._plain_style: Style | None = None

    # -- data --------------------------------------------------------------------------------------

    def show(self, fleet: GpuFleet, node_filter: str = "") -> None:
        """Take each GPU's state from `fleet` (computed with it, off the UI thread): O(nodes) here."""
        self.fleet = fleet
        states, groups = fleet.states, fleet.groups
        members: list[Sequence[int]]
        if node_filter.strip():
            order = fleet.order("node", node_filter)
            runs: list[list[int]] = []
            rows = fleet.rows
            for index in order:
                if runs and rows[runs[-1][0]].node is rows[index].node:
                    runs[-1].append(index)
                else:
                    runs.append([index])
            members = list(runs)
            cells = [bytes(states[i] for i in indices) for indices in runs]
        else:
            members = [range(groups[g], groups[g + 1]) for g in range(len(groups) - 1)]
            cells = [states[groups[g] : groups[g + 1]] for g in range(len(groups) - 1)]
        self._members, self._cells = members, cells
        self._per_node = max((len(c) for c in cells), default=1)
        self.cursor = self._find_cursor(fleet)
        self._version += 1
        self._sync_size()
        self.refresh()
        self.post_message(self.CursorMoved(self, self.cursor_row))

    def _find_cursor(self, fleet: GpuFleet) -> tuple[int, int]:
        """The cursor stays on its GPU (node id, GPU number) when nodes come, go or are filtered out."""
        if not self._cells:
            return (0, 0)
        if self._cursor_key is not None:
            node_id, gpu_index = self._cursor_key
            for node, members in enumerate(self._members):
                if fleet.rows[members[0]].node.node_id == node_id:
                    for gpu, index in enumerate(members):
                        if fleet.rows[index].gpu_index == gpu_index:
                            return (node, gpu)
                    return (node, 0)
        node, gpu = self.cursor
        node = min(node, len(self._cells) - 1)
        return (node, min(gpu, len(self._cells[node]) - 1))

    @property
    def nodes_per_line(self) -> int:
        return max(1, (self.size.width - LABEL_WIDTH) // (self._per_node + 1))

    @property
    def text_rows(self) -> int:
        node_rows = -(-len(self._cells) // self.nodes_per_line)
        return (node_rows + 1) // 2

    @property
    def cursor_row(self) -> GpuRow | None:
        node, gpu = self.cursor
        if self.fleet is None or node >= len(self._members) or gpu >= len(self._members[node]):
            return None
        row: GpuRow = self.fleet.rows[self._members[node][gpu]]
        return row

    def _sync_size(self) -> None:
        self.virtual_size = Size(self.size.width, self.text_rows)

    def on_resize(self, _event: events.Resize) -> None:
        self._strips.clear()
        self._sync_size()

    # -- keys --------------------------------------------------------------------------------------

    def action_move(self, node_rows: int, gpus: int) -> None:
        if not self._cells:
            return
        node, gpu = self.cursor
        if gpus > 0:  # next GPU, else the first of the next node
            if gpu + 1 < len(self._cells[node]):
                gpu += 1
            elif node + 1 < len(self._cells):
                node, gpu = node + 1, 0
        elif gpus < 0:  # previous GPU, else the last of the previous node
            if gpu > 0:
                gpu -= 1
            elif node > 0:
                node -= 1
                gpu = len(self._cells[node]) - 1
        if node_rows:
            node = max(0, min(len(self._cells) - 1, node + node_rows * self.nodes_per_line))
        gpu = min(gpu, max(0, len(self._cells[node]) - 1))
        self._set_cursor(node, gpu)

    def action_jump(self, where: int) -> None:
        if self._cells:
            node = 0 if where == 0 else len(self._cells) - 1
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
        # A terminal row holds two node rows; a second click on the cell picks the lower one.
        upper = (y * 2) * self.nodes_per_line + column
        lower = upper + self.nodes_per_line
        short = upper < len(self._cells) and gpu >= len(self._cells[upper])  # only the lower node is there
        node = lower if short or self.cursor == (upper, gpu) else upper
        if node < len(self._cells) and gpu < len(self._cells[node]):
            self._set_cursor(node, gpu)

    def _set_cursor(self, node: int, gpu: int) -> None:
        if (node, gpu) == self.cursor:
            return
        self.cursor = (node, gpu)
        row = self.cursor_row
        self._cursor_key = (row.node.node_id, row.gpu_index) if row is not None else None
        self._version += 1
        self.refresh()
        line = (node // self.nodes_per_line) // 2
        self.scroll_to_region(Region(0, line, 1, 1), animate=False, immediate=True)
        self.post_message(self.CursorMoved(self, self.cursor_row))

    # -- rendering ---------------------------------------------------------------------------------

    @property
    def _plain(self) -> Style:
        """The widget's own style (`rich_style` walks the ancestors on every access: cached here)."""
        if self._plain_style is None:
            self._plain_style = self.rich_style
        return self._plain_style

    def _class_style(self, index: int) -> Style:
        if index == EMPTY:
            return self._plain
        name = "cursor" if index == CURSOR else CLASSES[index]
        return self._class_style_named(name)

    def _pair(self, key: int) -> Style:
        """The style of a half-block cell: `key` is (upper state << 8) | lower state."""
        style = self._pairs[key]
        if style is None:
            top, bottom = key >> 8, key & 0xFF
            upper = self._class_style(top).color if top != EMPTY else self._plain.bgcolor
            lower = self._class_style(bottom).color if bottom != EMPTY else self._plain.bgcolor
            style = self._pairs[key] = Style(color=upper, bgcolor=lower)
        return style

    def notify_style_update(self) -> None:
        """Theme, focus or CSS changed: colours and rendered rows are stale."""
        super().notify_style_update()
        self._plain_style = None
        self._named.clear()
        self._pairs = [None] * 65536
        self._strips.clear()

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        line = y + self.scroll_offset.y
        key = (line, width, self._version)
        strip = self._strips.get(key)
        if strip is None:
            strip = self._render_row(line, width).crop_extend(0, width, self._plain)
            self._strips[key] = strip
        return strip

    def _render_row(self, line: int, width: int) -> Strip:
        per_line = self.nodes_per_line
        top_first = line * 2 * per_line
        if top_first >= len(self._cells):
            return Strip.blank(width, self._plain)
        label_style = self._plain + self._class_style_named("label")
        segments = [Segment(f"{top_first:>{LABEL_WIDTH - 1}} ", label_style)]
        cursor_node, cursor_gpu = self.cursor
        gap = Segment(" ", self._plain)
        per_node = self._per_node
        cells = self._cells
        pad = bytes([EMPTY]) * per_node
        pair = self._pair
        for column in range(per_line):
            top_node = top_first + column
            if top_node >= len(cells):
                break
            bottom_node = top_node + per_line
            top = (cells[top_node] + pad)[:per_node]
            bottom = (cells[bottom_node] + pad)[:per_node] if bottom_node < len(cells) else pad
            keys = [(upper << 8) | lower for upper, lower in zip(top, bottom, strict=True)]
            if top_node == cursor_node and cursor_gpu < per_node:
                keys[cursor_gpu] = (CURSOR << 8) | bottom[cursor_gpu]
            elif bottom_node == cursor_node and cursor_gpu < per_node:
                keys[cursor_gpu] = (top[cursor_gpu] << 8) | CURSOR
            # One segment per run of equal cells: fewer segments for Textual's per-segment filters.
            run_key, run = keys[0], 1
            for key in keys[1:]:
                if key == run_key:
                    run += 1
                    continue
                segments.append(Segment("▀" * run, pair(run_key)))
                run_key, run = key, 1
            segments.append(Segment("▀" * run, pair(run_key)))
            segments.append(gap)
        return Strip(segments)

    def _class_style_named(self, name: str) -> Style:
        style = self._named.get(name)
        if style is None:
            style = self._named[name] = self.get_component_rich_style(f"gpu-heatmap--{name}", partial=True)
        return style

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


def cursor_detail(fleet: GpuFleet, row: GpuRow) -> Text:
    """The line under the legend for the GPU under the cursor: where it is and its latest reading. Host
    names, death causes and actor names are the cluster's: shown as plain text."""
    text = Text()
    node = row.node
    where = f"{node.hostname or node.ip} ({node.ip}) GPU {gpu_label(row.gpu_index)}: "
    text.append(clean(where), style="bold")
    gpu = row.gpu
    if not node.alive:
        text.append(clean(f"node dead: {node.state_message or 'no reason given'}"), style="red")
    elif gpu is None:
        text.append("no GPU telemetry (logical GPU)")
    else:
        used = memory(gpu.memory_used_mib, gpu.memory_total_mib)
        text.append(
            f"{util_text(gpu.utilization)} · {used} · {watts(gpu.power_w)}"
            f" · {celsius(gpu.temperature_c)} · {age(fleet.age(row, fleet.now()))} ago"
        )
        actors = fleet.actors_on(row)
        if actors:
            text.append(" · " + ", ".join(clean(a.label) for a in actors))
        text.append(" · Enter opens the node", style="dim")
    failed = fleet.agent_failed.get(node.node_id)
    if failed and node.alive:
        text.append(clean(f" · agent: {failed}"), style="yellow")
    return text
