"""Provides `ActorTableView`, the Actors screen's table: one row per actor, 100,000 of them included.

A Line-API view like the GPU list: `show` takes an `ActorIndex` and the order of the rows to show (a
filter and a sort already applied, no row formatted); `render_line` formats only the rows on screen.
Row 0 is the column header and stays put. The cursor follows its actor (by id) across refreshes, and
stays at its position when that actor is gone. Class names, actor names, hosts and death causes are the
cluster's text: each is `clean`ed before it goes into a `Segment`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.strip import Strip

from cockpit.core.actors.listing import ActorView
from cockpit.core.actors.table import ActorIndex
from cockpit.core.snapshots import NA
from cockpit.core.units import duration, human_bytes
from cockpit.ui.widgets.line_view import LineView
from cockpit.ui.widgets.safe_text import clean

GpuMap = Mapping[tuple[str, int], Sequence[tuple[int, float | None]]]
"""(node IP, pid) -> the GPUs that process holds: (index, utilization % or None)."""

SHORT_STATES = {"PENDING_CREATION": "PENDING", "DEPENDENCIES_UNREADY": "DEPS_UNREADY"}


class Column(NamedTuple):
    key: str
    label: str
    width: int
    """0: takes what is left of the line."""
    right: bool = False


def columns_for(width: int) -> tuple[Column, ...]:
    """Which columns fit WIDTH: id, class, role, state, node, GPUs, restarts and age always (80 columns);
    then the death cause, the name, the pid, the job, and wider cells as the terminal widens."""
    wide = width >= 120
    cols = [
        Column("id", "Actor", 8),
        Column("class", "Class", 22 if width >= 160 else 18 if wide else 14),
    ]
    if wide:
        cols.append(Column("name", "Name", 22 if width >= 160 else 16))
    cols += [
        Column("role", "Role", 9),
        Column("state", "State", 20 if width >= 160 else 12),
        Column("node", "Node", 16 if wide else 10),
    ]
    if wide:
        cols.append(Column("pid", "PID", 7, right=True))
        cols.append(Column("memory", "RSS", 9, right=True))
    cols += [
        Column("gpus", "GPUs", 18 if width >= 160 else 7),
        Column("restarts", "Rst", 3, right=True),
    ]
    if width >= 140:
        cols.append(Column("job", "Job", 8))
    cols.append(Column("age", "Age", 6, right=True))
    used = sum(c.width + 1 for c in cols) + 1
    if width - used >= 12:
        cols.append(Column("death", "Death cause", 0))
    return tuple(cols)


def gpu_cell(view: ActorView, gpus: GpuMap, ip_of: Mapping[str, str], width: int) -> str:
    """The GPUs an actor holds: each index with its live utilization where the GPU board saw the
    actor's pid on it ("0:87% 1:90%"); else how many it asked Ray for ("1", "0.5"); "" for none."""
    actor = view.actor
    held = gpus.get((ip_of.get(actor.node_id, ""), actor.pid or -1), ()) if actor.pid else ()
    if held:
        parts = [f"{index}:{'?' if util is None else f'{util:.0f}%'}" for index, util in held]
        text = " ".join(parts)
        return text if len(text) <= width else f"{parts[0]} +{len(parts) - 1}"
    return f"{actor.gpus:g}" if actor.gpus else ""


def age_cell(view: ActorView, now: float) -> str:
    started = view.started or view.actor.start_time
    return duration(now - started) if started else ""


def fit(text: str, width: int, right: bool = False) -> str:
    """TEXT in exactly WIDTH terminal cells (wide characters count two), cut with "…" when longer."""
    cells = cell_len(text)
    if cells > width:
        return set_cell_size(text, max(0, width - 1)) + "…" if width else ""
    pad = " " * (width - cells)
    return pad + text if right else text + pad


def shown(value: str, width: int) -> str:
    """Cluster text for a cell of WIDTH: cut first (a 7 MB death cause is not cleaned whole on every
    redraw), then cleaned (no escape or control character reaches the terminal)."""
    return clean(value[: width + 64])


class ActorTableView(LineView, can_focus=True):
    """The actors of an `ActorIndex` in a given order; Enter posts `Chosen` for the row under the cursor."""

    STYLE_PREFIX = "actor-table"
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "actor-table--header",
        "actor-table--cursor",
        "actor-table--dead",
        "actor-table--pending",
        "actor-table--alive",
        "actor-table--muted",
    }
    DEFAULT_CSS = """
    ActorTableView {
        background: $surface;
        color: $foreground;
        overflow-y: scroll;
        overflow-x: hidden;
        &:focus { background-tint: $foreground 5%; }
    }
    ActorTableView > .actor-table--header { color: $text-muted; text-style: bold; }
    ActorTableView > .actor-table--cursor { background: $accent 35%; text-style: bold; }
    ActorTableView > .actor-table--dead { color: $error; }
    ActorTableView > .actor-table--pending { color: $warning; text-style: bold; }
    ActorTableView > .actor-table--alive { color: $success; }
    ActorTableView > .actor-table--muted { color: $text-muted; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "move(-1)", "Up", id="actor_table.up", show=False),
        Binding("down", "move(1)", "Down", id="actor_table.down", show=False),
        Binding("pageup", "page(-1)", "Page up", id="actor_table.page_up", show=False),
        Binding("pagedown", "page(1)", "Page down", id="actor_table.page_down", show=False),
        Binding("home", "jump(0)", "First actor", id="actor_table.first", show=False),
        Binding("end", "jump(-1)", "Last actor", id="actor_table.last", show=False),
        Binding("enter", "choose", "Details", id="actors.details", show=False),
    ]

    @dataclass
    class CursorMoved(Message):
        table: ActorTableView
        view: ActorView | None

        @property
        def control(self) -> ActorTableView:
            return self.table

    @dataclass
    class Chosen(Message):
        table: ActorTableView
        view: ActorView

        @property
        def control(self) -> ActorTableView:
            return self.table

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id, classes=classes)
        self.index: ActorIndex | None = None
        self.order: Sequence[int] = ()
        self.cursor = 0
        self.selected: str | None = None
        """The actor id under the cursor: where the cursor goes after a refresh."""
        self.empty_text = "no actors"
        self._gpus: GpuMap = {}
        self._ip_of: Mapping[str, str] = {}
        self._now = 0.0
        self._version = 0

    # -- data --------------------------------------------------------------------------------------

    def show(
        self,
        index: ActorIndex,
        order: Sequence[int],
        gpus: GpuMap | None = None,
        ip_of: Mapping[str, str] | None = None,
        now: float | None = None,
        empty_text: str = "no actors",
    ) -> None:
        """Show ORDER's rows of INDEX (cheap: nothing is formatted until drawn)."""
        self.index = index
        self.order = order
        self._gpus = gpus if gpus is not None else self._gpus
        self._ip_of = ip_of if ip_of is not None else self._ip_of
        self._now = time.time() if now is None else now
        self.empty_text = empty_text
        before = self.cursor
        position = index.position_of(self.selected, order) if self.selected else None
        self.cursor = position if position is not None else min(self.cursor, max(0, len(order) - 1))
        self._version += 1
        self.virtual_size = Size(self.size.width, len(order) + 1)
        self._cursor_changed(scroll=self.cursor != before)
        self.refresh()

    def current(self) -> ActorView | None:
        if self.index is None or not self.order or self.cursor >= len(self.order):
            return None
        return self.index.rows[self.order[self.cursor]]

    def text_lines(self) -> list[str]:
        """Every line as plain text, header first (for tests and copy-out)."""
        width = max(self.size.width, 80)
        cols = columns_for(width)
        lines = [self._draw(None, cols, width, False).crop_extend(0, width, None).text]
        if self.index is not None:
            lines += [
                self._draw(p, cols, width, False).crop_extend(0, width, None).text
                for p in range(len(self.order))
            ]
        if not self.order:
            lines.append("  " + self.empty_text)
        return lines

    def tick(self) -> None:
        """Ages move on between fetches: redraw the visible rows."""
        if self.index is not None:
            self._now = time.time()
            self._version += 1
            self.refresh()

    # -- cursor ------------------------------------------------------------------------------------

    def _cursor_changed(self, scroll: bool = True, chosen: bool = False) -> None:
        """The cursor moved. CHOSEN: by the user, so its actor is the one to follow from now on; a
        refresh or a filter that hides the actor moves the cursor but keeps following it, so it comes
        back to it when it is shown again (a character typed and deleted, a poll that missed it)."""
        view = self.current()
        if chosen or self.selected is None:
            self.selected = view.actor.actor_id if view is not None else None
        if scroll:
            self._scroll_to_cursor()
        self.post_message(self.CursorMoved(self, view))

    def _scroll_to_cursor(self) -> None:
        height = max(1, self.scrollable_content_region.height - 1)
        top = self.scroll_offset.y
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False)
        elif self.cursor >= top + height:
            self.scroll_to(y=self.cursor - height + 1, animate=False)

    def _move_to(self, position: int) -> None:
        if not self.order:
            return
        self.cursor = max(0, min(position, len(self.order) - 1))
        self._cursor_changed(chosen=True)
        self.refresh()

    def action_move(self, delta: int) -> None:
        self._move_to(self.cursor + delta)

    def action_page(self, pages: int) -> None:
        self._move_to(self.cursor + pages * max(1, self.scrollable_content_region.height - 1))

    def action_jump(self, where: int) -> None:
        self._move_to(where if where >= 0 else len(self.order) - 1)

    def action_choose(self) -> None:
        view = self.current()
        if view is not None:
            self.post_message(self.Chosen(self, view))

    # -- rendering ---------------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        cols = columns_for(width)
        if y == 0:
            key: tuple[object, ...] = ("header", width)
            position = None
        else:
            position = y - 1 + self.scroll_offset.y
            if position >= len(self.order):
                if position == 0 and self.index is not None:
                    return Strip([Segment("  " + clean(self.empty_text), self._style("muted"))]).crop_extend(
                        0, width, self._plain
                    )
                return Strip.blank(width, self._plain)
            key = (position, self._version, width, position == self.cursor)
        strip = self._strips.get(key)
        if strip is None:
            on_cursor = position is not None and position == self.cursor
            strip = self._draw(position, cols, width, on_cursor).crop_extend(0, width, self._plain)
            if on_cursor:
                strip = strip.apply_style(self._style("cursor"))
            self._strips[key] = strip
        return strip

    def on_resize(self) -> None:
        self.virtual_size = Size(self.size.width, len(self.order) + 1)
        self._strips.clear()

    def _draw(self, position: int | None, cols: tuple[Column, ...], width: int, on_cursor: bool) -> Strip:
        if position is None:
            header = " " + " ".join(
                fit(c.label, c.width or max(0, width - _fixed(cols)), c.right) for c in cols
            )
            return Strip([Segment(header, self._style("header"))])
        assert self.index is not None
        view = self.index.rows[self.order[position]]
        actor = view.actor
        plain = self._plain
        state_style = self._state_style(actor.state)
        segments = [Segment(" ", plain)]
        for col in cols:
            w = col.width or max(0, width - _fixed(cols))
            style = plain
            if col.key == "id":
                text = shown(actor.actor_id[:8], w)
            elif col.key == "class":
                text = shown(actor.class_name[-(w + 64) :].rsplit(".", 1)[-1], w)
            elif col.key == "name":
                text = shown(actor.name or actor.repr_name, w)
            elif col.key == "role":
                text = shown(view.role, w) if view.role else "-"
                style = plain if view.role else self._style("muted")
            elif col.key == "state":
                text = actor.state if col.width >= 20 else SHORT_STATES.get(actor.state, actor.state)
                text = shown(text, w)
                style = state_style
            elif col.key == "node":
                text = shown(view.host, w) if view.host else (shown(actor.node_id[:8], w) or "-")
            elif col.key == "pid":
                text = str(actor.pid) if actor.pid else ""
            elif col.key == "memory":
                text = human_bytes(view.rss_bytes) if view.rss_bytes is not NA else ""
            elif col.key == "gpus":
                text = gpu_cell(view, self._gpus, self._ip_of, w)
            elif col.key == "restarts":
                text = str(actor.num_restarts) if actor.num_restarts else ""
                style = self._style("pending") if actor.num_restarts else plain
            elif col.key == "job":
                text = shown(actor.job_id, w)
            elif col.key == "age":
                text = age_cell(view, self._now)
            else:  # death cause
                text = shown(actor.death_cause, w) if actor.state == "DEAD" else ""
                style = self._style("dead")
            segments.append(Segment(fit(text, w, col.right), style))
            segments.append(Segment(" ", plain))
        return Strip(segments)

    def _state_style(self, state: str) -> Style:
        if state == "ALIVE":
            return self._style("alive")
        if state == "DEAD":
            return self._style("dead")
        return self._style("pending")


def _fixed(cols: tuple[Column, ...]) -> int:
    """Cells the fixed-width columns take, with their separators and the leading space."""
    return 1 + sum(c.width + 1 for c in cols if c.width)
