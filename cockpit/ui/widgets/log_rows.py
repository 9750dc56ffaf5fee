"""Provides the log pane's geometry: which buffered lines are rows of the view, and where each row starts.

Kept apart from the widget so the bookkeeping that must stay in step with the ring buffer (evictions,
filter matches, wrapped heights) is plain Python. Every update costs O(lines in the batch): the filter
is tried on new lines only, and evicted rows are cut off the front of the index lists. Wrapping cuts at
the cell (like `less`), so a line's height is `ceil(width / columns)` and the row index is a list of
cumulative heights, rebuilt only when the columns, the filter or the tag column change (about 30 ms for
200,000 lines).
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator
from itertools import accumulate

from cockpit.core.logs.buffer import LineBuffer, LogLine, wrapped_order
from cockpit.core.text import strip_ansi
from cockpit.ui.widgets.log_text import display_width

TAG_MAX = 24
"""The widest the source column gets ("[RolloutWorker_12] "); longer names are cut with an ellipsis."""


def _height(width: int, columns: int) -> int:
    return (width + columns - 1) // columns or 1


class LogRows:
    """The rows of a log view over BUFFER: all its lines, or those the filter matches.

    Call `lines_added` after every feed of the buffer. Rows count from 0 at the oldest row kept; a row's
    line is `number_at(row)`, a `LogLine.number`, which does not shift when older lines are evicted.
    """

    def __init__(self, buffer: LineBuffer) -> None:
        self.buffer = buffer
        self.filter: re.Pattern[str] | None = None
        self.tag_width = 0
        """Cells of the source column: 0 while the buffer has one source."""
        self.max_width = 0
        """The widest line seen (not lowered on eviction: the scrollbar does not shrink under the user)."""
        self._filtered: list[int] = []
        """Numbers of the lines the filter matches, ascending: the rows while a filter is set."""
        self._widths = array("l")
        """Display width of every buffered line; `_widths[i]` is line number `_widths_base + i`."""
        self._widths_base = buffer.first_number
        self._first = buffer.first_number
        """`buffer.first_number` at the last update, to count the rows evicted since."""
        self._sources_seen = 0
        self._ends: list[int] | None = None
        """While wrapping: the cumulative height at the end of each row, offset by `_ends_base`."""
        self._ends_base = 0
        self._columns = 0

    # -- keeping in step with the buffer --------------------------------------------------------------

    def lines_added(self, start_number: int) -> bool:
        """Take in the lines numbered from START_NUMBER on (those still kept) and the evictions they
        caused; True when the source column changed width (cached tags are stale)."""
        buffer = self.buffer
        first = buffer.first_number
        new_from = max(start_number, first)
        new_texts = list(buffer.texts(new_from - first))
        tags_changed = self._check_sources()
        evicted = first - self._widths_base
        if evicted >= len(self._widths):
            self._widths = array("l")
        elif evicted > 0:
            del self._widths[:evicted]
        self._widths_base = first
        widths = [display_width(text) for text in new_texts]
        self._widths.extend(widths)
        if widths:
            self.max_width = max(self.max_width, max(widths))
        if self.filter is None:
            gone = first - self._first
            shown_widths = widths
        else:
            gone = bisect_left(self._filtered, first)
            del self._filtered[:gone]
            search = self.filter.search
            shown = [i for i, text in enumerate(new_texts) if search(strip_ansi(text))]
            self._filtered.extend(new_from + i for i in shown)
            shown_widths = [widths[i] for i in shown]
        self._first = first
        if self._ends is not None:
            self._extend_wrap_index(gone, shown_widths)
        return tags_changed

    def _check_sources(self) -> bool:
        sources = self.buffer.sources
        if len(sources) == self._sources_seen:
            return False
        self._sources_seen = len(sources)
        width = 0 if len(sources) < 2 else min(TAG_MAX, max(len(s) for s in sources) + 3)
        if width == self.tag_width:
            return False
        self.tag_width = width
        self._ends = None  # the text column narrowed: every wrapped height changes
        return True

    def set_filter(self, regex: re.Pattern[str] | None) -> None:
        """Keep only the lines REGEX finds something in (one pass over the buffer, about 1 us a line);
        None keeps all."""
        self.filter = regex
        first = self.buffer.first_number
        self._filtered = [first + i for i in self.buffer.matching(regex)] if regex else []
        self._ends = None

    # -- rows -----------------------------------------------------------------------------------------

    @property
    def count(self) -> int:
        return len(self._filtered) if self.filter is not None else len(self.buffer)

    def number_at(self, row: int) -> int:
        return self._filtered[row] if self.filter is not None else self.buffer.first_number + row

    def row_of(self, number: int) -> int | None:
        """The row showing line NUMBER, or None when it is filtered out or gone."""
        if self.filter is None:
            row = number - self.buffer.first_number
            return row if 0 <= row < len(self.buffer) else None
        row = bisect_left(self._filtered, number)
        return row if row < len(self._filtered) and self._filtered[row] == number else None

    def row_at_or_after(self, number: int) -> int:
        """The first row whose line is NUMBER or newer (the last row when none is)."""
        if self.filter is None:
            row = number - self.buffer.first_number
        else:
            row = bisect_left(self._filtered, number)
        return min(max(row, 0), max(self.count - 1, 0))

    def lines(self) -> Iterator[LogLine]:
        """The lines of every row, oldest first."""
        if self.filter is None:
            return self.buffer.lines()
        by_number = self.buffer.by_number
        return (line for n in self._filtered if (line := by_number(n)) is not None)

    # -- wrapping -------------------------------------------------------------------------------------

    @property
    def wrapped(self) -> bool:
        return self._ends is not None

    def wrap_to(self, columns: int | None) -> None:
        """Wrap lines at COLUMNS cells of text (None: do not wrap); rebuilds the index when it changed."""
        if columns is None:
            self._ends = None
        elif self._ends is None or self._columns != columns:
            widths, base = self._widths, self._widths_base
            rows: Iterable[int] = (
                widths if self.filter is None else (widths[n - base] for n in self._filtered)
            )
            self._ends = list(accumulate(_height(width, columns) for width in rows))
            self._ends_base = 0
            self._columns = columns

    def _extend_wrap_index(self, gone: int, widths: list[int]) -> None:
        ends = self._ends
        assert ends is not None
        gone = min(gone, len(ends))
        if gone > 0:
            self._ends_base = ends[gone - 1]
            del ends[:gone]
        total = ends[-1] if ends else self._ends_base
        columns = self._columns
        for width in widths:
            total += _height(width, columns)
            ends.append(total)

    @property
    def height(self) -> int:
        """Screen rows of the whole view."""
        if self._ends is None:
            return self.count
        return self._ends[-1] - self._ends_base if self._ends else 0

    def locate(self, y: int) -> tuple[int, int] | None:
        """The row at screen row Y of the whole view, and which of its wrapped rows; None past the end."""
        if self._ends is None:
            return (y, 0) if 0 <= y < self.count else None
        ends, base = self._ends, self._ends_base
        row = bisect_right(ends, y + base)
        if y < 0 or row >= len(ends):
            return None
        return row, y + base - (ends[row - 1] if row else base)

    def y_of(self, row: int) -> int:
        """The screen row of the whole view where ROW starts."""
        if self._ends is None or row <= 0:
            return max(row, 0)
        return self._ends[row - 1] - self._ends_base

    # -- search ---------------------------------------------------------------------------------------

    def find(self, regex: re.Pattern[str], start_row: int, backwards: bool = False) -> int | None:
        """The number of the line in the next row after START_ROW (before it when BACKWARDS) that REGEX
        finds something in, wrapping around; None when no row matches."""
        buffer = self.buffer
        if self.filter is None:
            index = buffer.search(regex, start_row, backwards)
            return None if index is None else buffer.first_number + index
        search, first = regex.search, buffer.first_number
        for row in wrapped_order(len(self._filtered), start_row, backwards):
            number = self._filtered[row]
            if search(strip_ansi(buffer.text(number - first))):
                return number
        return None

    def find_error(self, start_row: int, backwards: bool = False) -> int | None:
        """The number of the next error (a traceback counts at its first line) in a row after START_ROW
        (before it when BACKWARDS), wrapping around; None when no row shows one."""
        buffer = self.buffer
        first = buffer.first_number
        if self.filter is None:
            index = buffer.next_error(start_row, backwards)
            return None if index is None else first + index
        rows = [row for i in buffer.error_indexes() if (row := self.row_of(first + i)) is not None]
        if not rows:
            return None
        if backwards:
            at = bisect_left(rows, start_row)
            row = rows[at - 1] if at > 0 else rows[-1]
        else:
            at = bisect_right(rows, start_row)
            row = rows[at] if at < len(rows) else rows[0]
        return self._filtered[row]
