"""Provides the log pane's engine: a bounded ring of classified lines fed with raw, unaligned chunks.

Bytes arrive from Ray's log streams in whatever pieces the network delivers: a chunk can end in the middle
of a line or of a UTF-8 character. `LineBuffer.feed` keeps a partial-line remainder and an incremental
UTF-8 decoder per source, so the lines it produces are the same however the text was cut. Each line is
classified once, at ingest (error / warning / normal, and whether it belongs to a Python traceback), so
the view's render path and the error navigation never re-scan text. Ingest costs about 1 us a 100-byte
line, decoding included: a boundary-free regex rules out most lines before the exact word-boundary
patterns run (those alone would cost 5 to 9 us a line). Line numbers count from 0.

Python tracebacks are tracked per source and per Ray worker prefix ("(RolloutWorker pid=123) "), so
two workers' tracebacks interleaved in the driver's stream, or a traceback interleaved with another
source's lines, are each grouped correctly.
"""

from __future__ import annotations

import codecs
import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import chain, islice
from typing import Literal, TypeVar

from cockpit.core.logs.column import TextColumn, lines_found, literal_in_a_line
from cockpit.core.text import ANSI as _ANSI
from cockpit.core.text import strip_ansi

_T = TypeVar("_T")

Level = Literal["error", "warning", "normal"]

MAX_LINE_CHARS = 1 << 20
"""A source that sends this many characters without a newline has them cut into a line of their own, so
one runaway writer (a progress bar without newlines, a binary blob) cannot grow memory without bound."""


# The error and warning markers. Word boundaries at the start of a pattern defeat the regex engine's
# literal prefix scan (9 us a line instead of 0.4 us), so a boundary-free pattern finds candidates and
# the exact pattern confirms them, on the few lines that have a candidate at all.
_ERROR_HINT = re.compile(
    r"Traceback \(most recent call last\)|ERROR|Error:|Exception|NCCL (?:WARN|ERROR|error)"
    r"|out of memory|OutOfMemoryError|OOM|Killed|FATAL|CRITICAL"
)
_ERROR = re.compile(
    r"Traceback \(most recent call last\)|\bERROR\b|Error:|Exception\b|NCCL (?:WARN|ERROR|error)"
    r"|(?:CUDA|CPU|[Hh]ost) out of memory|OutOfMemoryError|\bOOM\b|\bKilled\b|\bFATAL\b|\bCRITICAL\b"
)
_WARNING_HINT = re.compile(r"WARN|Warning:")
_WARNING = re.compile(r"\bWARN(?:ING)?\b|\w+Warning:")
_ANY_HINT = re.compile(f"{_ERROR_HINT.pattern}|{_WARNING_HINT.pattern}")
"""One scan that rules out most lines (0.3 us for a 100-byte line)."""

RAY_PREFIX = re.compile(r"\((?:[^()]*\bpid=\d+[^()]*|raylet[^()]*|autoscaler[^()]*)\) ?")
"""What Ray puts before each line a worker prints: "(RolloutWorker pid=123) ", "(pid=9, ip=10.0.0.2) "."""

_TRACEBACK_START = "Traceback (most recent call last):"
_EXCEPTION_LINE = re.compile(r"[A-Za-z_][\w.]*(?:\([\w.]*\))?(?::|$)")
"""The line that closes a traceback: "ValueError: bad", "ray.exceptions.RayTaskError(ValueError): ...",
"KeyboardInterrupt"."""


_LEVELS: tuple[Level, ...] = ("normal", "warning", "error")
_LEVEL_BITS: dict[Level, int] = {"normal": 0, "warning": 1, "error": 2}
_LEVEL_MASK = 3
_ERROR_BIT = 2
_IN_TRACEBACK = 4
_TRACEBACK_START_BIT = 8


def classify(plain: str) -> Level:
    """The level of one line of text (ANSI escapes already removed)."""
    if _ERROR_HINT.search(plain) and _ERROR.search(plain):
        return "error"
    if _WARNING_HINT.search(plain) and _WARNING.search(plain):
        return "warning"
    return "normal"


def _as_terminal_shows(text: str) -> str:
    """What a terminal leaves on screen of a line redrawn with carriage returns (tqdm, pip progress)."""
    text = text.rstrip("\r")
    return text.rsplit("\r", 1)[-1]


def wrapped_order(size: int, start: int, backwards: bool = False) -> Iterator[int]:
    """Every index of a sequence of SIZE once, beginning after START (before it when BACKWARDS) and
    wrapping around the end, so START itself comes last. START may be -1 or SIZE."""
    if size <= 0:
        return iter(())
    start = min(max(start, -1), size)
    if backwards:
        first = start - 1 if start > 0 else size - 1
        return chain(range(first, -1, -1), range(size - 1, first, -1))
    first = start + 1 if start < size - 1 else 0
    return chain(range(first, size), range(0, first))


@dataclass(frozen=True, slots=True)
class LogLine:
    """One complete line of one source, classified once when it arrived."""

    number: int
    """Position in everything the buffer was ever fed, from 0; never reused, so it survives eviction."""
    source: str
    """Where the line came from: "driver", "RolloutWorker_0", a file name."""
    text: str
    """The line without its newline, ANSI escapes kept as received."""
    level: Level
    in_traceback: bool = False
    """The line is part of a Python traceback: from "Traceback (most recent call last):" through the frame
    lines to the closing "SomeError: message" line."""
    traceback_start: bool = False
    """The line is the "Traceback (most recent call last):" that opens a block."""

    @property
    def plain(self) -> str:
        """The text without ANSI escapes: what the user reads, searches and saves."""
        return strip_ansi(self.text)

    @property
    def starts_error(self) -> bool:
        """An error the user navigates to: an error line outside tracebacks, or a traceback's first line."""
        return self.level == "error" and (self.traceback_start or not self.in_traceback)


class LineBuffer:
    """The last `max_lines` lines of any number of sources, in arrival order.

    Indexes (`buffer[i]`, `find`, `matching`) count from the oldest line still kept, so they shift when
    lines are evicted; `LogLine.number` does not (`index == number - first_number`).
    """

    def __init__(self, max_lines: int = 200_000) -> None:
        if max_lines < 1:
            raise ValueError(f"max_lines must be at least 1, not {max_lines}")
        self.max_lines = max_lines
        self.dropped = 0
        """Lines evicted since the buffer was created, so the UI can say "older lines dropped"."""
        self.version = 0
        """Bumped on every change to the lines kept; caches keyed on it are valid while it stands."""
        # The lines, column by column: a `LogLine` object per kept line would be 200,000 objects the
        # cyclic GC walks on every full collection (measured: 48 ms stalls). The sources and flags are
        # a ring (a list of shared str and a bytearray); the texts are sealed in batches.
        self._texts = TextColumn()
        self._line_sources: list[str] = []
        self._flags = bytearray()
        """Per line: the level (bits 0-1: `_LEVELS`), in a traceback (4), starts a traceback (8)."""
        self._head = 0
        """Where the oldest line sits in the columns once they are full (O(1) index and eviction)."""
        self._next_number = 0
        self._pending: dict[str, str] = {}
        self._decoders: dict[str, codecs.IncrementalDecoder] = {}
        self._sources: dict[str, str] = {}
        """Sources seen, in order; the value is the one string object all of that source's lines share."""
        self._open_tracebacks: set[tuple[str, str]] = set()
        """(source, Ray prefix) pairs inside a traceback right now."""
        self._error_numbers: list[int] = []
        """Numbers of the lines that start an error (`LogLine.starts_error`), ascending; evicted ones are
        trimmed lazily."""

    # -- ingest ---------------------------------------------------------------------------------------

    def feed(self, source: str, data: str | bytes) -> int:
        """Append a raw chunk of SOURCE's output, cut anywhere; returns the number of complete lines added.

        Bytes are decoded as UTF-8 (undecodable bytes become U+FFFD), a character split across chunks
        included. What follows the chunk's last newline waits for the next chunk, or for `flush`.
        """
        if isinstance(data, bytes):
            decoder = self._decoders.get(source)
            if decoder is None:
                decoder = self._decoders[source] = codecs.getincrementaldecoder("utf-8")(errors="replace")
            text = decoder.decode(data)
        else:
            text = self._decoder_leftover(source) + data
        pending = self._pending.pop(source, "")
        if pending:
            text = pending + text
        if "\n" not in text:
            if len(text) >= MAX_LINE_CHARS:
                return self._add(source, [text])
            if text:
                self._pending[source] = text
            return 0
        parts = text.split("\n")
        rest = parts.pop()
        if len(rest) >= MAX_LINE_CHARS:
            parts.append(rest)
        elif rest:
            self._pending[source] = rest
        return self._add(source, parts)

    def flush(self, source: str) -> int:
        """Emit SOURCE's pending partial line, if any (the stream ended, or went quiet); returns 0 or 1."""
        text = self._pending.pop(source, "") + self._decoder_leftover(source)
        return self._add(source, [text]) if text else 0

    def pending(self, source: str) -> str:
        """SOURCE's partial line, waiting for its newline."""
        return self._pending.get(source, "")

    def clear(self) -> None:
        """Forget every line, partial line and source; numbers keep counting up (the cleared lines count
        as dropped)."""
        self.dropped += len(self._flags)
        self._texts.clear(self._next_number)
        self._line_sources, self._flags = [], bytearray()
        self._head = 0
        self._pending.clear()
        self._decoders.clear()
        self._open_tracebacks.clear()
        self._error_numbers.clear()
        self._sources.clear()
        self.version += 1

    def _decoder_leftover(self, source: str) -> str:
        decoder = self._decoders.get(source)
        if decoder is None or not decoder.getstate()[0]:
            return ""
        return decoder.decode(b"", final=True)  # an incomplete character: U+FFFD

    def _add(self, source: str, raws: list[str]) -> int:
        source = self._sources.setdefault(source, source)
        first_new = number = self._next_number
        open_tracebacks = self._open_tracebacks
        errors = self._error_numbers
        prefix_match = RAY_PREFIX.match
        hint = _ANY_HINT.search
        texts: list[str] = []
        flags = bytearray()
        for raw in raws:
            if "\r" in raw:
                raw = _as_terminal_shows(raw)
            plain = _ANSI.sub("", raw) if "\x1b" in raw else raw
            level = classify(plain) if hint(plain) else "normal"
            flag = _LEVEL_BITS[level]
            if open_tracebacks or _TRACEBACK_START in plain:  # most lines skip the prefix parsing
                body, key = plain, (source, "")
                if plain.startswith("(") and (prefix := prefix_match(plain)):
                    body, key = plain[prefix.end() :], (source, prefix.group())
                if body.startswith(_TRACEBACK_START):
                    open_tracebacks.add(key)
                    flag |= _IN_TRACEBACK | _TRACEBACK_START_BIT
                elif key in open_tracebacks:
                    if body.startswith((" ", "\t")):
                        flag |= _IN_TRACEBACK  # a frame, a source line, a ^^^^ marker
                    else:
                        open_tracebacks.discard(key)
                        if _EXCEPTION_LINE.match(body):
                            flag |= _IN_TRACEBACK
            if flag & _ERROR_BIT and (flag & _TRACEBACK_START_BIT or not flag & _IN_TRACEBACK):
                errors.append(number)
            texts.append(raw)
            flags.append(flag)
            number += 1
        self._next_number = number
        if texts:
            self._store(source, texts, flags)
            self.version += 1
            if errors and errors[0] < self.first_number:
                del errors[: bisect_left(errors, self.first_number)]
        return number - first_new

    def _store(self, source: str, texts: list[str], flags: bytearray) -> None:
        """Append a batch to the columns, overwriting the oldest lines once they hold `max_lines`."""
        cap = self.max_lines
        self._texts.append(texts, self._next_number - min(cap, len(self._flags) + len(texts)))
        if len(flags) > cap:
            self.dropped += len(flags) - cap
            flags = flags[-cap:]
        room = cap - len(self._flags)
        if room > 0:  # still filling up: the oldest line is at 0
            self._line_sources += [source] * min(room, len(flags))
            self._flags += flags[:room]
            flags = flags[room:]
        while flags:
            head = self._head
            count = min(len(flags), cap - head)
            self._line_sources[head : head + count] = [source] * count
            self._flags[head : head + count] = flags[:count]
            self.dropped += count
            self._head = (head + count) % cap
            flags = flags[count:]

    # -- reading --------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._flags)

    def _position(self, index: int) -> int:
        size = len(self._flags)
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError(f"line index {index} out of range (0..{size - 1})")
        return (self._head + index) % self.max_lines

    def __getitem__(self, index: int) -> LogLine:
        at = self._position(index)
        flag = self._flags[at]
        number = self.first_number + (index if index >= 0 else index + len(self._flags))
        return LogLine(
            number,
            self._line_sources[at],
            self._texts.get(number),
            _LEVELS[flag & _LEVEL_MASK],
            bool(flag & _IN_TRACEBACK),
            bool(flag & _TRACEBACK_START_BIT),
        )

    def text(self, index: int) -> str:
        """The raw text of the line at INDEX, without building its `LogLine`."""
        self._position(index)  # the range check
        return self._texts.get(self.first_number + (index if index >= 0 else index + len(self._flags)))

    def __iter__(self) -> Iterator[LogLine]:
        return self.lines()

    def _column(self, column: Sequence[_T], start: int) -> Iterator[_T]:
        head, size = self._head, len(self._flags)
        start = max(0, start)
        if head == 0:
            return islice(column, start, None)
        older = size - head
        if start >= older:
            return islice(column, start - older, head)
        return chain(islice(column, head + start, None), islice(column, 0, head))

    def texts(self, start: int = 0) -> Iterator[str]:
        """The raw texts from index START to the newest, oldest first (no `LogLine` built)."""
        return self._texts.iter_from(self.first_number + max(0, start))

    def lines(self, start: int = 0) -> Iterator[LogLine]:
        """The lines from index START to the newest, oldest first: those there when the first is read."""
        start = max(0, start)
        count = max(0, len(self._flags) - start)
        columns = zip(
            islice(self._column(self._line_sources, start), count),
            self._texts.iter_from(self.first_number + start),
            islice(self._column(self._flags, start), count),
            strict=True,
        )
        for number, (source, text, flag) in enumerate(columns, self.first_number + start):
            yield LogLine(
                number,
                source,
                text,
                _LEVELS[flag & _LEVEL_MASK],
                bool(flag & _IN_TRACEBACK),
                bool(flag & _TRACEBACK_START_BIT),
            )

    @property
    def first_number(self) -> int:
        """The number of the oldest line kept (equals `end_number` when the buffer is empty)."""
        return self._next_number - len(self._flags)

    @property
    def end_number(self) -> int:
        """The number the next complete line will get."""
        return self._next_number

    @property
    def sources(self) -> tuple[str, ...]:
        """Every source fed so far, in the order they first appeared."""
        return tuple(self._sources)

    def by_number(self, number: int) -> LogLine | None:
        """The line numbered NUMBER, or None when it was evicted or has not arrived."""
        index = number - self.first_number
        return self[index] if 0 <= index < len(self._flags) else None

    # -- search ---------------------------------------------------------------------------------------

    def find(
        self,
        pattern: str,
        start: int,
        backwards: bool = False,
        regex: bool = False,
        ignore_case: bool = True,
    ) -> int | None:
        """The index of the next line after START (before it when BACKWARDS) whose plain text contains
        PATTERN, wrapping around the ends; START itself is tried last. None when no line matches.

        START may be -1 (search from the oldest line) or `len(buffer)` (backwards from the newest).
        Raises `re.error` for a bad REGEX.
        """
        if not pattern:
            return None
        compiled = re.compile(pattern if regex else re.escape(pattern), re.IGNORECASE if ignore_case else 0)
        return self.search(compiled, start, backwards)

    def search(self, regex: re.Pattern[str], start: int, backwards: bool = False) -> int | None:
        """`find` with a compiled REGEX: the index of the next line after START (before it when
        BACKWARDS) whose plain text REGEX finds something in, wrapping around; None when none does.
        Plain text (a pattern as `re.escape` writes it) is looked for in a batch of lines at a time
        (`column.lines_found`: about 0.5 us a line with Ray's coloured prefixes to strip, 0.15 without);
        any other pattern line by line (about 1 us a line: one copy of the column, then list indexing)."""
        literal = literal_in_a_line(regex)
        if literal is not None:
            return self._search_pieces(regex, literal, start, backwards)
        texts = list(self.texts())
        search = regex.search
        for index in wrapped_order(len(texts), start, backwards):
            text = texts[index]
            if search(_ANSI.sub("", text) if "\x1b" in text else text):
                return index
        return None

    def _search_pieces(self, regex: re.Pattern[str], literal: str, start: int, backwards: bool) -> int | None:
        """`search` a batch of lines at a time, for a `literal_in_a_line` REGEX: the same index."""
        size = len(self._flags)
        if size <= 0:
            return None
        start = min(max(start, -1), size)
        first = self.first_number
        if backwards:  # the order `wrapped_order` gives, as two ranges of indexes each read backwards
            after = start if start > 0 else size
            ranges = ((0, after), (after, size))
        else:
            after = start + 1 if start < size - 1 else 0
            ranges = ((after, size), (0, after))
        for low, high in ranges:
            for number, text in self._texts.pieces(first + low, first + high, backwards):
                for line in lines_found(regex, literal, text, last=backwards):
                    return number + line - first
        return None

    def matching(self, regex: re.Pattern[str], start: int = 0) -> list[int]:
        """The indexes, from START on, of the lines whose plain text REGEX finds something in."""
        literal = literal_in_a_line(regex)
        if literal is not None:
            first = self.first_number
            return [
                number + line - first
                for number, text in self._texts.pieces(first + max(0, start), self.end_number)
                for line in lines_found(regex, literal, text)
            ]
        search = regex.search
        return [
            index for index, text in enumerate(self.texts(start), max(0, start)) if search(strip_ansi(text))
        ]

    def error_indexes(self) -> list[int]:
        """The indexes of the lines that start an error (`LogLine.starts_error`), oldest first."""
        first = self.first_number
        errors = self._error_numbers
        return [number - first for number in errors[bisect_left(errors, first) :]]

    def next_error(self, start: int, backwards: bool = False) -> int | None:
        """The index of the next error after START (before it when BACKWARDS), wrapping around; None when
        there is none. A traceback counts once, at its "Traceback (most recent call last):" line."""
        first = self.first_number
        errors = self._error_numbers
        low = bisect_left(errors, first)
        if low == len(errors):
            return None
        target = first + start
        if backwards:
            at = bisect_left(errors, target, low)
            number = errors[at - 1] if at > low else errors[-1]
        else:
            at = bisect_right(errors, target, low)
            number = errors[at] if at < len(errors) else errors[low]
        return number - first

    def first_error(self) -> int | None:
        """The index of the oldest error still kept, or None."""
        first = self.first_number
        errors = self._error_numbers
        low = bisect_left(errors, first)
        return errors[low] - first if low < len(errors) else None
