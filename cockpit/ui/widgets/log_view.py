"""Provides `LogView`, the log pane: a Line-API view of a `LineBuffer` that follows the tail, filters,
searches, wraps and jumps between errors, rendering only the rows on screen.

`append` costs O(lines in the batch) on the UI thread and renders nothing: the buffer classifies each
line once, `LogRows` measures it and tries the filter on it, then the view sets `virtual_size` and asks
for a refresh, which Textual coalesces into the next frame. `render_line` draws visible rows through two
LRU caches: whole lines by (number, ANSI, search term, current match), and screen rows by that plus
(wrapped sub-row, width, wrap, horizontal scroll, tag column).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from cockpit.core.logs.buffer import LineBuffer, LogLine
from cockpit.core.text import strip_ansi
from cockpit.ui.widgets.log_rows import LogRows
from cockpit.ui.widgets.log_text import line_text
from cockpit.ui.widgets.safe_text import clean

CONTEXT_ROWS = 2
"""Rows left above an error when jumping to it, so the line before a traceback shows too."""


class LogView(ScrollView, can_focus=True):
    """Lines of one or more sources; follows the tail until the user scrolls up.

    Rows of the view are the buffer's lines, or only those the filter matches. The "cursor" is the line
    the user last went to (a match, an error): `n`, `N`, `e`, `E` continue from it.
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "log-view--error",
        "log-view--warning",
        "log-view--traceback",
        "log-view--match",
        "log-view--current-match",
        "log-view--source",
    }
    DEFAULT_CSS = """
    LogView {
        background: $surface;
        color: $foreground;
        overflow-y: scroll;
        overflow-x: auto;
        &:focus { background-tint: $foreground 5%; }
    }
    LogView > .log-view--error { color: $error; }
    LogView > .log-view--warning { color: $warning; }
    LogView > .log-view--traceback { background: $boost; }
    LogView > .log-view--match { background: $accent 40%; }
    LogView > .log-view--current-match { background: $accent; text-style: bold; }
    LogView > .log-view--source { text-style: dim; }
    """
    # Not in the footer (the screen's hint line and `?` list them): at 80 columns the footer keeps
    # the navigation keys, `?` and `q`.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f", "toggle_follow", "Follow", id="logs.follow", show=False),
        Binding("n", "next_match", "Next match", id="logs.next_match", show=False),
        Binding("N,shift+n", "prev_match", "Prev match", id="logs.prev_match", show=False),
        Binding("e", "next_error", "Next error", id="logs.next_error", show=False),
        Binding("E,shift+e", "prev_error", "Prev error", id="logs.prev_error", show=False),
        Binding("w", "toggle_wrap", "Wrap", id="logs.wrap", show=False),
        Binding("a", "toggle_ansi", "Colours", id="logs.ansi", show=False),
    ]

    follow: reactive[bool] = reactive(True, init=False)
    """Keep the newest line in view as lines arrive; scrolling up pauses it, scrolling to the end resumes."""
    wrap: reactive[bool] = reactive(False, init=False)
    """Cut long lines into rows of the pane's width instead of scrolling sideways."""
    show_ansi: reactive[bool] = reactive(True, init=False)
    """Render the colours in the text (`Text.from_ansi`); off shows the text plain."""

    @dataclass
    class FollowChanged(Message):
        """Follow mode went on or off: `f`, scrolling away from the tail or back to it, or a jump."""

        log_view: LogView
        follow: bool

        @property
        def control(self) -> LogView:
            return self.log_view

    @dataclass
    class FirstError(Message):
        """The first error arrived (once, until `clear`): a screen can show a banner that jumps to it."""

        log_view: LogView
        index: int
        """Where it is in the buffer when posted (`LineBuffer` index; `line.number` does not shift)."""
        line: LogLine

        @property
        def control(self) -> LogView:
            return self.log_view

    def __init__(
        self,
        max_lines: int = 200_000,
        *,
        name: str | None = None,
        id: str | None = None,  # noqa: A002 - the keyword every Textual widget takes
        classes: str | None = None,
        disabled: bool = False,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes, disabled=disabled)
        self.buffer = LineBuffer(max_lines)
        """Every line kept; feed it through `append` so the view keeps up."""
        self.rows = LogRows(self.buffer)
        """Which lines are rows (the filter) and where each starts (wrapping)."""
        self._search: re.Pattern[str] | None = None
        self._search_term = ""
        self._cursor: int | None = None
        self._line_strips: LRUCache[tuple[object, ...], tuple[Strip, Style]] = LRUCache(1024)
        self._row_strips: LRUCache[tuple[object, ...], Strip] = LRUCache(1024)
        self._tags: dict[str, list[Segment]] = {}
        self._styles: dict[str, Style] | None = None
        self._first_error_posted = False
        self._scrolling_myself = False

    # -- feeding --------------------------------------------------------------------------------------

    def append(self, source: str, data: str | bytes) -> int:
        """Feed a raw chunk of SOURCE's output (see `LineBuffer.feed`); returns the complete lines added."""
        start = self.buffer.end_number
        added = self.buffer.feed(source, data)
        if added:
            self._lines_added(start)
        return added

    def flush(self, source: str) -> int:
        """Show SOURCE's pending partial line (the stream ended or went quiet)."""
        start = self.buffer.end_number
        added = self.buffer.flush(source)
        if added:
            self._lines_added(start)
        return added

    def clear(self) -> None:
        """Forget every line; the next error posts `FirstError` again."""
        self.buffer.clear()
        regex = self.rows.filter
        self.rows = LogRows(self.buffer)
        self.rows.set_filter(regex)
        self._cursor = None
        self._first_error_posted = False
        self._clear_caches()
        self._geometry_changed(None)

    def _lines_added(self, start_number: int) -> None:
        if self.rows.lines_added(start_number):
            self._tags.clear()
        buffer = self.buffer
        if self._cursor is not None and self._cursor < buffer.first_number:
            self._cursor = None
        self._sync_size()
        if self.follow:
            self._scroll_to_end()
        self.refresh()
        if not self._first_error_posted and (index := buffer.first_error()) is not None:
            self._first_error_posted = True
            self.post_message(self.FirstError(self, index, buffer[index]))

    # -- geometry -------------------------------------------------------------------------------------

    @property
    def line_count(self) -> int:
        """Lines in view: all of the buffer's, or those the filter matches."""
        return self.rows.count

    @property
    def dropped(self) -> int:
        """Lines evicted from the buffer since it was created (for "older lines dropped")."""
        return self.buffer.dropped

    def _sync_size(self) -> None:
        """Set `virtual_size` from the rows in view (the only layout work an update causes)."""
        rows = self.rows
        width = self.scrollable_content_region.width
        rows.wrap_to(max(1, width - rows.tag_width) if self.wrap and width > 0 else None)
        if rows.wrapped:
            self.virtual_size = Size(width, rows.height)
        else:
            self.virtual_size = Size(rows.tag_width + rows.max_width, rows.height)

    def _top_row(self) -> int:
        located = self.rows.locate(round(self.scroll_y))
        return located[0] if located is not None else 0

    def _bottom_row(self) -> int:
        located = self.rows.locate(round(self.scroll_y) + self.scrollable_content_region.height - 1)
        return located[0] if located is not None else self.rows.count - 1

    def _anchor_number(self) -> int | None:
        """The line to keep in view across a change of filter, wrap or size: the cursor, else the top."""
        if self._cursor is not None and self.rows.row_of(self._cursor) is not None:
            return self._cursor
        located = self.rows.locate(round(self.scroll_y))
        return self.rows.number_at(located[0]) if located is not None else None

    def _geometry_changed(self, anchor: int | None) -> None:
        self._sync_size()
        if self.follow:
            self._scroll_to_end()
        elif anchor is not None and self.rows.count:
            self._scroll_quietly(self.rows.y_of(self.rows.row_at_or_after(anchor)))
        self.refresh()

    def on_resize(self, event: events.Resize) -> None:
        self._geometry_changed(self._anchor_number())

    # -- scrolling and follow -------------------------------------------------------------------------

    def _scroll_quietly(self, y: float) -> None:
        """Scroll without the move counting as the user's (which would switch follow)."""
        if not self.is_mounted:
            return
        self._scrolling_myself = True
        try:
            self.scroll_to(y=y, animate=False)
        finally:
            self._scrolling_myself = False

    def _scroll_to_end(self) -> None:
        self._scroll_quietly(self.max_scroll_y)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if self._scrolling_myself:
            return
        at_end = new_value >= self.max_scroll_y
        if self.follow and not at_end and new_value < old_value:
            self.follow = False
        elif not self.follow and at_end and new_value > old_value:
            self.follow = True

    def watch_follow(self, follow: bool) -> None:
        self.post_message(self.FollowChanged(self, follow))
        # Not when the user's own scroll reached the end: stopping the scroll animation from inside its
        # last step breaks Textual's animator (KeyError).
        if follow and self.scroll_y < self.max_scroll_y:
            self._scroll_to_end()

    def watch_wrap(self) -> None:
        self._geometry_changed(self._anchor_number())

    def watch_show_ansi(self) -> None:
        self.refresh()

    def action_toggle_follow(self) -> None:
        self.follow = not self.follow

    def action_toggle_wrap(self) -> None:
        self.wrap = not self.wrap

    def action_toggle_ansi(self) -> None:
        self.show_ansi = not self.show_ansi

    # -- filter, search, errors -----------------------------------------------------------------------

    @property
    def filter_pattern(self) -> str | None:
        return self.rows.filter.pattern if self.rows.filter is not None else None

    @property
    def search_term(self) -> str:
        return self._search_term

    @property
    def cursor(self) -> LogLine | None:
        """The line last gone to (a match, an error), while it is kept."""
        return None if self._cursor is None else self.buffer.by_number(self._cursor)

    def set_filter(self, regex: str | None, *, ignore_case: bool = True) -> int:
        """Show only the lines REGEX finds something in (None or "" shows all); returns the lines shown.

        Raises `re.error` for a bad REGEX, leaving the view as it was. Costs one pass over the buffer
        (about 0.2 s for 200,000 lines); lines that arrive later are tested as they come.
        """
        compiled = re.compile(regex, re.IGNORECASE if ignore_case else 0) if regex else None
        anchor = self._anchor_number()
        self.rows.set_filter(compiled)
        self._geometry_changed(anchor)
        return self.rows.count

    def search(self, term: str) -> LogLine | None:
        """Highlight TERM (literal, any case) and go to a match: when following, the newest; else the first
        at or below the top of the view. Returns the line gone to, or None ("" clears the search)."""
        self._search = re.compile(re.escape(term), re.IGNORECASE) if term else None
        self._search_term = term
        self.refresh()
        if self._search is None:
            return None
        if self.follow:
            number = self.rows.find(self._search, self.rows.count, backwards=True)
        else:
            number = self.rows.find(self._search, self._top_row() - 1)
        return self._go_to_number(number, top=False)

    def _start_row(self, backwards: bool) -> int:
        """Where `n`/`e` search from: the cursor, else just above the top row (below the bottom one)."""
        if self._cursor is not None and (row := self.rows.row_of(self._cursor)) is not None:
            return row
        return self._bottom_row() + 1 if backwards else self._top_row() - 1

    def _step_match(self, backwards: bool) -> None:
        if self._search is not None:
            number = self.rows.find(self._search, self._start_row(backwards), backwards)
            self._go_to_number(number, top=False)

    def action_next_match(self) -> None:
        self._step_match(backwards=False)

    def action_prev_match(self) -> None:
        self._step_match(backwards=True)

    def action_next_error(self) -> None:
        self._go_to_number(self.rows.find_error(self._start_row(False)), top=True)

    def action_prev_error(self) -> None:
        self._go_to_number(self.rows.find_error(self._start_row(True), backwards=True), top=True)

    def first_error_index(self) -> int | None:
        """The buffer index of the oldest error kept (a traceback counts at its first line), or None."""
        return self.buffer.first_error()

    def go_to(self, index: int) -> bool:
        """Bring the line at buffer INDEX to the top of the view (pausing follow), e.g. from an error
        banner; False when the filter hides it."""
        return self._go_to_number(self.buffer[index].number, top=True) is not None

    def _go_to_number(self, number: int | None, *, top: bool) -> LogLine | None:
        """Make NUMBER the cursor and scroll to it: to near the top (errors), or only if off screen."""
        line = None if number is None else self.buffer.by_number(number)
        row = None if line is None else self.rows.row_of(line.number)
        if line is None or row is None:
            return None
        self._cursor = line.number
        self.follow = False
        y = self.rows.y_of(row)
        height = self.scrollable_content_region.height
        if top:
            self._scroll_quietly(max(0, y - CONTEXT_ROWS))
        elif not self.scroll_y <= y < self.scroll_y + height:
            self._scroll_quietly(max(0, y - height // 2))
        self.refresh()
        return line

    # -- saving ---------------------------------------------------------------------------------------

    def save(self, path: str | os.PathLike[str]) -> int:
        """Write the lines in view (the filter applied) to PATH, a new file only its owner can read (a log
        may hold what a careless script printed of its secrets; the login node is shared), as plain text,
        with their source tag when the view shows one; returns the number of lines written.

        Raises:
            FileExistsError: PATH is there already (it is never written over); OSError: it cannot be made.
        """
        tagged = self.rows.tag_width > 0
        count = 0
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with open(fd, "w", encoding="utf-8", errors="replace") as out:
            for line in self.rows.lines():
                plain = strip_ansi(line.text)
                out.write(f"[{line.source}] {plain}\n" if tagged else f"{plain}\n")
                count += 1
        return count

    # -- rendering ------------------------------------------------------------------------------------

    def _clear_caches(self) -> None:
        self._styles = None
        self._tags.clear()
        self._line_strips.clear()
        self._row_strips.clear()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._clear_caches()

    def _part_styles(self) -> dict[str, Style]:
        """Each component's own attributes, its colours blended over the widget's background as CSS says,
        and the widget's own style as "base" (`rich_style` walks the DOM: 13 us a call)."""
        if self._styles is None:
            styles = {"base": self.rich_style}
            for name in self.COMPONENT_CLASSES:
                full = self.get_component_rich_style(name)
                partial = self.get_component_rich_style(name, partial=True)
                colours = Style(
                    color=full.color if partial.color is not None else None,
                    bgcolor=full.bgcolor if partial.bgcolor is not None else None,
                )
                styles[name.removeprefix("log-view--")] = colours + partial.without_color
            self._styles = styles
        return self._styles

    def _styled_text(self, line: LogLine, current: bool) -> tuple[Text, Style]:
        """The line's `Text` with its search highlights, and the style that goes under all of it."""
        styles = self._part_styles()
        style = styles["base"]
        if line.in_traceback:
            style += styles["traceback"]
        if line.level == "error":
            style += styles["error"]
        elif line.level == "warning":
            style += styles["warning"]
        text = line_text(line.text, self.show_ansi)
        if self._search is not None:
            text.highlight_regex(self._search, styles["current-match" if current else "match"])
        return text, style

    def _line_strip(self, line: LogLine, current: bool) -> tuple[Strip, Style]:
        """The whole line, uncropped, for wrapped or side-scrolled rows, and the style to pad it with."""
        search = self._search
        key = (line.number, self.show_ansi, search.pattern if search else None, current)
        cached = self._line_strips.get(key)
        if cached is None:
            text, style = self._styled_text(line, current)
            # `Text.render` drops the text's own style: the line's style goes under every segment here.
            cached = (Strip(Segment.apply_style(text.render(self.app.console), style)), style)
            self._line_strips[key] = cached
        return cached

    def _tag_segments(self, source: str, width: int) -> list[Segment]:
        segments = self._tags.get(source)
        if segments is None:
            label = f"[{clean(source)}]"  # an actor's name or a file name: the cluster chose it
            if len(label) >= width:
                label = f"{label[: max(width - 3, 0)]}…]"
            styles = self._part_styles()
            style = styles["base"] + styles["source"]
            text = Text(label, end="")
            text.truncate(width, pad=True)
            segments = self._tags[source] = list(Segment.apply_style(text.render(self.app.console), style))
        return segments

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        located = self.rows.locate(scroll_y + y)
        if located is None:
            return Strip.blank(width, self._part_styles()["base"])
        row, sub = located
        number = self.rows.number_at(row)
        wrapping = self.rows.wrapped
        current = number == self._cursor and self._search is not None
        key = (
            number,
            sub,
            width,
            wrapping,
            0 if wrapping else scroll_x,
            self.rows.tag_width,
            self._search.pattern if self._search else None,
            current,
            self.show_ansi,
        )
        strip = self._row_strips.get(key)
        if strip is None:
            strip = self._render_row(number, sub, width, 0 if wrapping else scroll_x, wrapping, current)
            self._row_strips[key] = strip
        return strip

    def _render_row(
        self, number: int, sub: int, width: int, scroll_x: int, wrap: bool, current: bool
    ) -> Strip:
        """One screen row, built as one `Strip` (each costs ~8 us: it sets up seven caches of its own)."""
        base = self._part_styles()["base"]
        line = self.buffer.by_number(number)
        if line is None or width <= 0:
            return Strip.blank(width, base)
        tag = self.rows.tag_width if self.rows.tag_width < width else 0
        columns = width - tag
        body: list[Segment]
        if wrap or scroll_x:
            whole, style = self._line_strip(line, current)
            start = sub * columns if wrap else scroll_x
            body = list(whole.crop_extend(start, start + columns, style))
        else:  # the common row, and every new row while following: no whole-line strip
            text, style = self._styled_text(line, current)
            text.truncate(columns, pad=True)
            body = list(Segment.apply_style(text.render(self.app.console), style))
        if not tag:
            return Strip(body, width)
        label = self._tag_segments(line.source, tag) if sub == 0 else [Segment(" " * tag, base)]
        return Strip([*label, *body], width)
