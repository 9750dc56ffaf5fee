"""Provides `GpuList`, the per-GPU view: one row per GPU, grouped under its node or sorted flat.

A Line-API view: `show` only lays out which row goes where (O(GPUs), no rendering); `render_line` draws
the rows on screen, so a refresh of 8,192 GPUs costs the ~40 visible rows. Row 0 is the column header and
stays put while the rows scroll under it.
"""

from __future__ import annotations

import time
from typing import ClassVar, Literal, NamedTuple

from rich.segment import Segment
from rich.style import Style
from textual.cache import LRUCache
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from cockpit.core.gpu_board import GpuFleet, GpuRow, SortKey, is_stale
from cockpit.core.gpu_history import UtilHistory
from cockpit.core.snapshots import NA, NodeSnapshot
from cockpit.ui.widgets import gpu_cells as cells


class _Line(NamedTuple):
    kind: Literal["node", "gpu", "holder", "note"]
    node: NodeSnapshot | None
    row: GpuRow | None
    text: str = ""


class _Columns(NamedTuple):
    node: int
    util_bar: int
    mem_bar: int
    spark: int


def columns_for(width: int, flat: bool) -> _Columns:
    """Which columns fit: bars and the sparkline shrink, then go, as the terminal narrows."""
    return _Columns(
        node=14 if flat else 0,
        util_bar=10 if width >= 120 else 5,
        mem_bar=6 if width >= 120 else 0,
        spark=30 if width >= 170 else 20 if width >= 120 else 10 if width >= (100 if flat else 80) else 0,
    )


class GpuList(ScrollView, can_focus=True):
    """Every GPU of a `GpuFleet`; dead nodes red, idle GPUs (while a job runs) and stale readings marked."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "gpu-list--header",
        "gpu-list--node",
        "gpu-list--dead",
        "gpu-list--idle",
        "gpu-list--stale",
        "gpu-list--muted",
        "gpu-list--bar",
        "gpu-list--bar-full",
        "gpu-list--spark",
    }
    DEFAULT_CSS = """
    GpuList {
        background: $surface;
        color: $foreground;
        overflow-y: scroll;
        overflow-x: hidden;
        &:focus { background-tint: $foreground 5%; }
    }
    GpuList > .gpu-list--header { color: $text-muted; text-style: bold; }
    GpuList > .gpu-list--node { color: $accent; text-style: bold; }
    GpuList > .gpu-list--dead { color: $error; }
    GpuList > .gpu-list--idle { color: $warning; text-style: bold; }
    GpuList > .gpu-list--stale { color: $error; text-style: bold; }
    GpuList > .gpu-list--muted { color: $text-muted; }
    GpuList > .gpu-list--bar { color: $success; }
    GpuList > .gpu-list--bar-full { color: $warning; }
    GpuList > .gpu-list--spark { color: $primary; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id, classes=classes)
        self.fleet: GpuFleet | None = None
        self.history: UtilHistory | None = None
        self.sort: SortKey = "node"
        self._lines: list[_Line] = []
        self._version = 0
        self._strips: LRUCache[tuple[object, ...], Strip] = LRUCache(512)
        self._now = 0.0

    # -- data --------------------------------------------------------------------------------------

    def show(
        self,
        fleet: GpuFleet,
        sort: SortKey = "node",
        node_filter: str = "",
        history: UtilHistory | None = None,
        now: float | None = None,
    ) -> None:
        """Lay out `fleet`'s rows (cheap); the visible ones are drawn at the next frame."""
        self.fleet = fleet
        self.history = history
        self.sort = sort
        rows = fleet.ordered(sort, node_filter)
        lines: list[_Line] = []
        if sort == "node":
            group: list[GpuRow] = []
            for row in rows:
                if group and row.node is not group[0].node:
                    self._add_group(lines, group, fleet)
                    group = []
                group.append(row)
            if group:
                self._add_group(lines, group, fleet)
        else:
            lines = [_Line("gpu", row.node, row) for row in rows]
        if not node_filter:
            gpu_less = [n for n in fleet.nodes if n.alive and n.logical_gpus <= 0 and not n.gpus]
            if gpu_less:
                names = ", ".join(n.hostname or n.ip for n in gpu_less[:8])
                more = f" and {len(gpu_less) - 8} more" if len(gpu_less) > 8 else ""
                note = f"{len(gpu_less)} node(s) without GPUs: {names}{more}"
                lines.append(_Line("note", None, None, note))
        if not lines:
            text = f"no GPU matches {node_filter!r}" if node_filter else "no GPUs in this cluster"
            lines.append(_Line("note", None, None, text))
        self._lines = lines
        self._version += 1
        self._now = fleet.now() if now is None else now
        self.virtual_size = Size(self.size.width, len(lines) + 1)
        self.refresh()

    @staticmethod
    def _add_group(lines: list[_Line], group: list[GpuRow], fleet: GpuFleet) -> None:
        """A node's header, its GPU rows and, without GPU telemetry, the actors holding its GPUs (no one
        knows which slot each has)."""
        node = group[0].node
        names = {row.gpu.name for row in group if row.gpu is not None}
        telemetry = bool(names)
        if telemetry:
            model = names.pop() if len(names) == 1 else "mixed GPUs"
            source = " · high-resolution agent" if group[0].source == "agent" else ""
            summary = f"{len(group)} x {model}{source}"
        else:
            summary = f"{node.logical_gpus:g} logical GPU(s), no GPU telemetry"
        lines.append(_Line("node", node, None, summary))
        lines.extend(_Line("gpu", node, row) for row in group)
        if telemetry or not node.alive:
            return
        for actor in fleet.gpu_actors.get(node.node_id, ()):
            pid = f" · pid {actor.pid}" if actor.pid else ""
            lines.append(_Line("holder", node, None, f"↳ {actor.label} holds {actor.gpus:g} GPU{pid}"))

    @property
    def line_count(self) -> int:
        return len(self._lines)

    def text_lines(self) -> list[str]:
        """Every line as plain text, header first (for tests and copy-out)."""
        width = max(self.size.width, 80)
        return [self._draw(None, width).text] + [self._draw(line, width).text for line in self._lines]

    # -- rendering ---------------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y == 0:
            key: tuple[object, ...] = ("header", width, self.sort)
        else:
            index = y - 1 + self.scroll_offset.y
            if index >= len(self._lines):
                return Strip.blank(width, self.rich_style)
            key = (index, self._version, width)
        strip = self._strips.get(key)
        if strip is None:
            line = None if y == 0 else self._lines[y - 1 + self.scroll_offset.y]
            strip = self._draw(line, width).crop_extend(0, width, self.rich_style)
            self._strips[key] = strip
        return strip

    def _style(self, name: str) -> Style:
        return self.rich_style + self.get_component_rich_style(f"gpu-list--{name}", partial=True)

    def _draw(self, line: _Line | None, width: int) -> Strip:
        flat = self.sort != "node"
        cols = columns_for(width, flat)
        if line is None:
            return Strip([Segment(_header(cols), self._style("header"))])
        if line.kind == "note":
            return Strip([Segment("  " + line.text, self._style("muted"))])
        if line.kind == "holder":
            return Strip([Segment("      " + line.text, self.rich_style)])
        if line.kind == "node":
            assert line.node is not None
            return Strip(self._node_segments(line.node, line.text))
        assert line.row is not None
        return Strip(self._gpu_segments(line.row, cols, width))

    def _node_segments(self, node: NodeSnapshot, summary: str) -> list[Segment]:
        base = self._style("node" if node.alive else "dead")
        head = " ★ head" if node.is_head else ""
        parts = [f"▾ {node.hostname or '?'} · {node.ip}{head} · {node.node_id[:8]}"]
        parts.append(f"DEAD: {node.state_message or 'no reason given'}" if not node.alive else summary)
        return [Segment(" · ".join(parts), base)]

    def _gpu_segments(self, row: GpuRow, cols: _Columns, width: int) -> list[Segment]:
        fleet = self.fleet
        assert fleet is not None
        plain = self.rich_style
        segments: list[Segment] = [Segment("  ", plain)]
        if cols.node:
            segments.append(Segment(_fit(row.node.hostname or row.node.ip, cols.node - 1) + " ", plain))
        segments.append(Segment(f"{cells.gpu_label(row.gpu_index):>3} ", plain))
        gpu = row.gpu
        if gpu is None:
            text = "no GPU telemetry (logical GPU"
            text += ": Ray schedules on it, no vendor library reports on it)" if width >= 120 else ")"
            segments.append(Segment(text, self._style("muted")))
            return segments
        if not row.node.alive:
            segments.append(Segment("node dead; last reading:", self._style("dead")))
            segments.append(Segment(" ", plain))
        idle = fleet.job_running and fleet.idle(row) and row.node.alive
        util = gpu.utilization
        filled, empty = cells.bar(0.0 if util is NA else float(util) / 100, cols.util_bar)
        segments.append(Segment(filled, self._style("idle" if idle else "bar")))
        segments.append(Segment(empty + " ", plain))
        segments.append(Segment(f"{cells.util_text(util):>4} ", self._style("idle") if idle else plain))
        used, total = gpu.memory_used_mib, gpu.memory_total_mib
        if cols.mem_bar:
            fraction = 0.0 if used is NA or total is NA or not total else float(used) / float(total)
            filled, empty = cells.bar(fraction, cols.mem_bar)
            segments.append(Segment(filled, self._style("bar-full" if fraction > 0.95 else "bar")))
            segments.append(Segment(empty + " ", plain))
        segments.append(Segment(f"{cells.memory(used, total):>15} ", plain))
        segments.append(Segment(f"{cells.watts(gpu.power_w):>5} ", plain))
        segments.append(Segment(f"{cells.celsius(gpu.temperature_c):>5} ", plain))
        age = fleet.age(row, self._now)
        stale = is_stale(row, self._now)
        segments.append(Segment(f"{cells.age(age):>4}", self._style("stale") if stale else plain))
        segments.append(Segment("! " if stale else "  ", self._style("stale")))
        if cols.spark:
            series = self._series(row, cols.spark)
            segments.append(Segment(cells.sparkline(series) + " ", self._style("spark")))
        actors = fleet.actors_on(row)
        if actors:
            text = ", ".join(a.label for a in actors)
        elif gpu.processes:
            text = ", ".join(f"pid {p.pid}" for p in gpu.processes)
        else:
            text = ""
        if idle:
            text = "IDLE while a job runs" + (f" · {text}" if text else "")
        if text:
            segments.append(Segment(text, self._style("idle") if idle else plain))
        return segments

    def _series(self, row: GpuRow, buckets: int) -> list[int | None]:
        if self.history is None:
            return [None] * buckets
        return self.history.series(row.key, self._now, buckets)

    def on_resize(self) -> None:
        self.virtual_size = Size(self.size.width, len(self._lines) + 1)
        self._strips.clear()

    def tick(self) -> None:
        """Ages move on between polls: re-render the visible rows once (called at most every second)."""
        if self.fleet is not None:
            self._now = self.fleet.now(time.time())
            self._version += 1
            self.refresh()


def _header(cols: _Columns) -> str:
    parts = ["  "]
    if cols.node:
        parts.append(f"{'Node':<{cols.node}}")
    parts.append("GPU ")
    parts.append(f"{'Util':<{cols.util_bar + 6}}")
    if cols.mem_bar:
        parts.append(" " * (cols.mem_bar + 1))
    parts.append(f"{'Memory':>15} ")
    parts.append("Power  Temp  Age  ")
    if cols.spark:
        label = "Util, last 10 min" if cols.spark >= 20 else "10 min"
        parts.append(f"{label:<{cols.spark + 1}}")
    parts.append("Actors (by pid on the GPU)")
    return "".join(parts)


def _fit(text: str, width: int) -> str:
    return text.ljust(width) if len(text) <= width else text[: width - 1] + "…"
