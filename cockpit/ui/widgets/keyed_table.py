"""Provides the keyed table: a small `DataTable` whose rows are keyed by a stable id and updated in place.

A screen hands `show_rows` every row it wants, in the order it wants them, each as its key (a job id, a
worker's key, a node id) and its cells by column key. Rows with a new key are added, rows whose key is
gone are removed, rows that moved are put in their place, and in the rows that stay only the cells that
changed are written: a refresh that changes one age rewrites one cell, and one that changes nothing
rewrites nothing (no clear, no re-measuring of every row, no jump of the scroll position). A row given
as `None` instead of its cells stays as shown, not even compared: a screen that knows which of 2,000
rows changed builds and compares those alone. A column widens for a wider cell and never narrows
(narrowing would measure the whole column for each cell). The cursor stays on its row's key when rows
come, go or move.

Every cell is a `Text`. A `str` cell is made one by `plain` (cleaned of escapes and control characters,
never read as markup), since a `DataTable` reads a `str` as markup and every cluster string is hostile.
Cells are compared by their text and their styles: `Text.__eq__` ignores the base style, so a cell that
only turned red (or bold, as a metric key when chosen) would otherwise not be redrawn.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

from rich.text import Text
from textual._two_way_dict import TwoWayDict
from textual.cache import LRUCache
from textual.geometry import Region
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowKey

from cockpit.ui.widgets.safe_text import plain

K = TypeVar("K")
V = TypeVar("V")

Cell = Text | str
"""What a row's cell may be given as: a `str` is shown as `plain(str)`."""


def as_cell(value: Cell) -> Text:
    return value if isinstance(value, Text) else plain(value)


def same_cell(old: Text, new: Text) -> bool:
    """Whether NEW draws exactly as OLD: the same characters in the same styles and layout."""
    return old is new or (
        old.plain == new.plain
        and old.style == new.style
        and old.spans == new.spans
        and (old.justify, old.overflow, old.no_wrap) == (new.justify, new.overflow, new.no_wrap)
    )


def drop(cache: LRUCache[K, V], gone: Callable[[K], bool]) -> None:
    """Drop from CACHE every entry whose key is GONE."""
    keys = cache.keys()  # a view: LRUCache is not iterable itself
    for key in [key for key in keys if gone(key)]:
        cache.discard(key)


class KeyedTable(DataTable[Text]):
    """Rows keyed by a stable id, in the order `show_rows` gives them; a refresh writes changed cells only."""

    def __init__(
        self,
        columns: Sequence[tuple[str, str]],
        *,
        id: str | None = None,  # noqa: A002 - the keyword every Textual widget takes
        classes: str | None = None,
    ) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, id=id, classes=classes)
        self.column_spec = tuple(columns)
        """(column key, label) pairs, left to right."""
        self.column_keys = tuple(key for key, _label in columns)
        self._cells: dict[str, dict[str, Text]] = {}
        """The cells shown, by row key then column key, in the order shown."""
        self._all_columns = frozenset(self.column_keys)

    def on_mount(self) -> None:
        self._add_columns()

    def _add_columns(self) -> None:
        # On mount, or on the first `show_rows` if that comes first (adding a column measures its label, which
        # needs the app's console).
        if not self.columns:
            for key, label in self.column_spec:
                self.add_column(Text(label), key=key)

    @property
    def keys(self) -> tuple[str, ...]:
        """The rows' keys, top to bottom."""
        return tuple(self._cells)

    def shown_cells(self, key: str) -> Mapping[str, Text] | None:
        """The cells row KEY shows, by column key (to be read, not changed); None if it is not listed."""
        return self._cells.get(key)

    def show_rows(self, rows: Iterable[tuple[str, Mapping[str, Cell] | None]]) -> None:
        """Show ROWS, (key, cells by column key) pairs in the order to show them; a column a row has no
        cell for is empty, and a row whose cells are None stays as shown. Raises ValueError for a key
        given twice, a column the table does not have, or None for a row not shown."""
        wanted: dict[str, dict[str, Text]] = {}
        kept: set[str] = set()
        for key, cells in rows:
            if key in wanted:
                raise ValueError(f"row key {key!r} given twice")
            if cells is None:
                shown = self._cells.get(key)
                if shown is None:
                    raise ValueError(f"row key {key!r} is not shown: it needs its cells")
                wanted[key] = shown
                kept.add(key)
                continue
            if not cells.keys() <= self._all_columns:
                unknown = cells.keys() - self._all_columns
                raise ValueError(f"no column {sorted(unknown)!r} in this table")
            wanted[key] = {column: as_cell(cells.get(column, "")) for column in self.column_keys}
        self._add_columns()
        cursor_key = self.current_key()
        written: dict[tuple[str, str], Text] = {}
        with self.app.batch_update():
            gone = [key for key in self._cells if key not in wanted]
            for key in gone:
                self.remove_row(key)
                del self._cells[key]
            # The order the table has once new rows are added at its end: compared with the order wanted
            # below instead of reading the table's rows back.
            placed = [*self._cells, *(key for key in wanted if key not in self._cells)]
            for key, cells in wanted.items():
                if key in kept:
                    continue
                old = self._cells.get(key)
                if old is None:
                    self.add_row(*(cells[column] for column in self.column_keys), key=key)
                    continue
                for column in self.column_keys:
                    new = cells[column]
                    if same_cell(old[column], new):
                        continue
                    # Only a cell wider than its column has it measured again: for a narrower one
                    # DataTable measures the whole column again (every row, for every changed cell:
                    # seconds a poll at 2,000 nodes), so a column grows to fit and never shrinks.
                    if new.cell_len > self.columns[ColumnKey(column)].content_width:
                        self.update_cell(key, column, new, update_width=True)
                    else:
                        written[key, column] = new
            self.write_cells(written)
            order = list(wanted)
            if placed != order:
                # Rows moved: put them in order as `DataTable.sort` does, by their places (the rows, their
                # cells and their measured heights stay as they are).
                self._row_locations = TwoWayDict({RowKey(key): index for index, key in enumerate(order)})
                self._update_count += 1
                self.refresh()
            self._cells = wanted
            if cursor_key in wanted and self.cursor_row != order.index(cursor_key):
                self.move_cursor(row=order.index(cursor_key), animate=False)

    def write_cells(self, cells: Mapping[tuple[str, str], Text]) -> None:
        """Write CELLS, by (row key, column key), in rows shown, each no wider than its column: only
        what was rendered from those cells is dropped, and only their rows are repainted.

        `DataTable.update_cell` bumps the table's update count, which is part of every render cache's
        key: one changed CPU % rendered every visible cell and the header again, and repainted the whole
        table (the most of what the idle Cluster screen cost, one poll every 5 s). Here the count stays,
        the entries rendered from the changed cells (the cell, its row's renderables, its row's lines,
        its screen lines) are dropped, and the region of their rows is refreshed. Rows are one line high
        (`add_row`'s default, the only height this table uses)."""
        if not cells:
            return
        data = self._data
        rows: set[RowKey] = set()
        places: set[int] = set()
        for (key, column), value in cells.items():
            row = RowKey(key)
            data[row][ColumnKey(column)] = value
            rows.add(row)
            place = self._row_locations.get(row)
            assert place is not None, f"row {key!r} is not shown"
            places.add(place)
        changed = {(RowKey(key), ColumnKey(column)) for key, column in cells}
        lines = {place + (self.header_height if self.show_header else 0) for place in places}
        drop(self._cell_render_cache, lambda k: (k[0], k[1]) in changed)
        drop(self._row_render_cache, lambda k: k[0] in rows)
        drop(self._row_renderable_cache, lambda k: k[1] in places)
        drop(self._line_cache, lambda k: k[0] in lines)
        top = min(lines)
        width = max(self.size.width, self.virtual_size.width)
        self._refresh_region(Region(0, top, width, max(lines) - top + 1))

    def current_key(self) -> str | None:
        """The key of the row under the cursor; None when the table is empty."""
        if not self._cells or not 0 <= self.cursor_row < len(self._cells):
            return None
        # By its place, not `ordered_rows`: that list is built again after every written cell.
        key = self._row_locations.get_key(self.cursor_row)
        return None if key is None else key.value

    def select(self, key: str, focus: bool = False) -> bool:
        """Put the cursor on KEY's row (and FOCUS the table); False if no row has that key."""
        if key not in self._cells:
            return False
        self.move_cursor(row=self.get_row_index(key), animate=False)
        if focus:
            self.focus()
        return True
