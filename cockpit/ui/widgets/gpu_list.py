"""Provides `GpuList`, the per-GPU view: one row per GPU, grouped under its node or sorted flat.

A Line-API view: `show` only lays out which row goes where (O(GPUs), no rendering); `render_line` draws
the rows on screen, so a refresh of 8,192 GPUs costs the ~40 visible rows. Row 0 is the column header and
stays put while the rows scroll under it. Host names, death causes, GPU models and actor names go into
`Segment`s, which the terminal is sent as they are: each is `clean`ed first.
"""

from __future__ import annotations

import time
from bisect import bisect_right
from collections.abc import Sequence
from itertools import accumulate
from typing import ClassVar, Literal, NamedTuple

from rich.segment import Segment
from textual.geometry import Size
from textual.strip import Strip

from cockpit.core.gpu.board import ActorRef, GpuFleet, GpuRow, SortKey, is_stale
from cockpit.core.gpu.history import UtilHistory
from cockpit.core.snapshots import NA, NodeSnapshot
from cockpit.core.text import cut
from cockpit.ui.widgets import gpu_cells as cells
from cockpit.ui.widgets.line_view import LineView
from cockpit.ui.widgets.safe_text import clean


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


class GpuList(LineView, can_focus=True):
    """Every GPU of a `GpuFleet`; dead nodes red, idle GPUs (while a job runs) and stale readings marked."""

    STYLE_PREFIX = "gpu-list"
    STRIP_CACHE = 512
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
        self._order: Sequence[int] = ()
        """Row indices in display order (the fleet's own order object: no copy)."""
        self._spans_: list[tuple[int, int, int]] = []
        """Grouped by node: (begin, end, node group) runs of `_order`, one per node."""
        self._starts: list[int] = [0]
        """Line where each span's header is; then its rows, then its holders."""
        self._holders: dict[int, tuple[ActorRef, ...]] = {}
        """Per span of a node without telemetry: the actors holding its GPUs."""
        self._body = 0
        self._tail: list[_Line] = []
        self._version = 0
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
        order = fleet.order(sort, node_filter)
        # Nothing per GPU is built here: a line is made from (span, offset) only when it is on screen.
        self._order = order
        if sort == "node":
            groups = fleet.groups
            if isinstance(order, range):
                spans = list(zip(groups[:-1], groups[1:], range(len(groups) - 1), strict=True))
            else:
                spans = self._spans(order, fleet)
            holders = self._holders = {
                k: fleet.gpu_actors.get(fleet.rows[order[begin]].node.node_id, ())
                for k, (begin, _end, group) in enumerate(spans)
                if not fleet.models[group] and fleet.rows[order[begin]].node.alive
            }
            sizes = [end - begin + 1 for begin, end, _group in spans]
            for k, actors in holders.items():
                sizes[k] += len(actors)
            self._spans_ = spans
            self._starts = [0, *accumulate(sizes)]
            body = self._starts[-1]
        else:
            self._spans_, self._starts, self._holders = [], [0], {}
            body = len(order)
        tail: list[_Line] = []
        if not node_filter:
            gpu_less = [n for n in fleet.nodes if n.alive and n.logical_gpus <= 0 and not n.gpus]
            if gpu_less:
                names = ", ".join(clean(n.hostname or n.ip) for n in gpu_less[:8])
                more = f" and {len(gpu_less) - 8} more" if len(gpu_less) > 8 else ""
                tail.append(_Line("note", None, None, f"{len(gpu_less)} node(s) without GPUs: {names}{more}"))
        if not body and not tail:
            text = f"no GPU matches {node_filter!r}" if node_filter else "no GPUs in this cluster"
            tail.append(_Line("note", None, None, text))
        self._body, self._tail = body, tail
        self._version += 1
        self._now = fleet.now() if now is None else now
        self.virtual_size = Size(self.size.width, self.line_count + 1)
        self.refresh()

    @staticmethod
    def _spans(order: Sequence[int], fleet: GpuFleet) -> list[tuple[int, int, int]]:
        """(begin, end, node group) runs of a filtered `order` (which keeps node order)."""
        groups = fleet.groups
        rows = fleet.rows
        spans: list[tuple[int, int, int]] = []
        begin = 0
        for position in range(1, len(order) + 1):
            if position == len(order) or rows[order[position]].node is not rows[order[begin]].node:
                spans.append((begin, position, bisect_right(groups, order[begin]) - 1))
                begin = position
        return spans

    def _line(self, position: int) -> _Line:
        fleet = self.fleet
        assert fleet is not None
        if position >= self._body:
            return self._tail[position - self._body]
        if self.sort != "node":
            row = fleet.rows[self._order[position]]
            return _Line("gpu", row.node, row)
        k = bisect_right(self._starts, position) - 1
        begin, end, group = self._spans_[k]
        offset = position - self._starts[k]
        if offset == 0:
            first = fleet.rows[self._order[begin]]
            return _Line("node", first.node, None, self._summary(fleet, group, first))
        if offset <= end - begin:
            row = fleet.rows[self._order[begin + offset - 1]]
            return _Line("gpu", row.node, row)
        actor = self._holders[k][offset - (end - begin) - 1]
        pid = f" · pid {actor.pid}" if actor.pid else ""
        return _Line("holder", None, None, f"↳ {clean(actor.label)} holds {actor.gpus:g} GPU{pid}")

    @staticmethod
    def _summary(fleet: GpuFleet, group: int, first: GpuRow) -> str:
        model = fleet.models[group]
        failed = fleet.agent_failed.get(first.node.node_id)
        agent = f" · agent: {clean(failed)}" if failed else ""
        if not model:
            return f"{first.node.logical_gpus:g} logical GPU(s), no GPU telemetry{agent}"
        source = " · high-resolution agent" if first.source == "agent" else agent
        return f"{fleet.groups[group + 1] - fleet.groups[group]} x {clean(model)}{source}"

    @property
    def line_count(self) -> int:
        return self._body + len(self._tail)

    def text_lines(self) -> list[str]:
        """Every line as plain text, header first (for tests and copy-out)."""
        width = max(self.size.width, 80)
        lines = [self._line(position) for position in range(self.line_count)]
        return [self._draw(None, width).text] + [self._draw(line, width).text for line in lines]

    # -- rendering ---------------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y == 0:
            key: tuple[object, ...] = ("header", width, self.sort)
        else:
            index = y - 1 + self.scroll_offset.y
            if index >= self.line_count:
                return Strip.blank(width, self._plain)
            key = (index, self._version, width)
        strip = self._strips.get(key)
        if strip is None:
            line = None if y == 0 else self._line(y - 1 + self.scroll_offset.y)
            strip = self._draw(line, width).crop_extend(0, width, self._plain)
            self._strips[key] = strip
        return strip

    def _draw(self, line: _Line | None, width: int) -> Strip:
        flat = self.sort != "node"
        cols = columns_for(width, flat)
        if line is None:
            return Strip([Segment(_header(cols), self._style("header"))])
        if line.kind == "note":
            return Strip([Segment("  " + line.text, self._style("muted"))])
        if line.kind == "holder":
            return Strip([Segment("      " + line.text, self._plain)])
        if line.kind == "node":
            assert line.node is not None
            return Strip(self._node_segments(line.node, line.text))
        assert line.row is not None
        return Strip(self._gpu_segments(line.row, cols, width))

    def _node_segments(self, node: NodeSnapshot, summary: str) -> list[Segment]:
        base = self._style("node" if node.alive else "dead")
        head = " ★ head" if node.is_head else ""
        # The cluster's names cut, so that what follows them (DEAD: and why) stays in sight.
        parts = [f"▾ {cut(node.hostname or '?', 40)} · {cut(node.ip, 39)}{head} · {clean(node.node_id)[:8]}"]
        why = cut(node.state_message, 200) or "no reason given"
        parts.append(f"DEAD: {why}" if not node.alive else summary)
        return [Segment(clean(" · ".join(parts)), base)]

    def _gpu_segments(self, row: GpuRow, cols: _Columns, width: int) -> list[Segment]:
        fleet = self.fleet
        assert fleet is not None
        plain = self._plain
        segments: list[Segment] = [Segment("  ", plain)]
        if cols.node:
            name = clean(row.node.hostname or row.node.ip)
            segments.append(Segment(_fit(name, cols.node - 1) + " ", plain))
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
        # Each process with the GPU memory it has allocated (NVML/amdsmi: memory, not utilization); the
        # actors when any process is one, else every pid.
        named = [(fleet.actors_by_pid.get((row.node.ip, p.pid)), p) for p in gpu.processes]
        if any(actor for actor, _p in named):
            text = ", ".join(clean(a.label) + cells.allocated(p.memory_mib) for a, p in named if a)
        else:
            text = ", ".join(f"pid {p.pid}{cells.allocated(p.memory_mib)}" for _a, p in named)
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
        self.virtual_size = Size(self.size.width, self.line_count + 1)
        self._strips.clear()

    def action_page_down(self) -> None:
        """A page is the rows under the header: none is skipped."""
        self.scroll_to(y=self.scroll_y + max(1, self.scrollable_content_region.height - 1), animate=False)

    def action_page_up(self) -> None:
        self.scroll_to(y=self.scroll_y - max(1, self.scrollable_content_region.height - 1), animate=False)

    def tick(self) -> None:
        """Ages move on between polls: re-render the visible rows once (called at most every second)."""
        if self.fleet is not None:
            self._now = time.time()
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
    parts.append("Actors (by pid on the GPU) and the GPU memory each allocated")
    return "".join(parts)


def _fit(text: str, width: int) -> str:
    return text.ljust(width) if len(text) <= width else text[: width - 1] + "…"
