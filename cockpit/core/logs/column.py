"""Provides the log ring's column of texts: the newest lines as `str`, older ones sealed in batches of
UTF-8 bytes, and how plain text is looked for in them a batch at a time.

`TextColumn` keeps the texts `LineBuffer` numbers (its other columns, sources and flags, stay a ring
there). `literal_in_a_line` tells a search pattern that finds only its own text and no newline: in lines
joined by newlines every match of it lies within one line, so `lines_found` scans a decoded batch (and,
ignoring case, lowered ASCII text with `str.find`) instead of one line at a time.
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from itertools import accumulate, islice

_ANSI_IN_LINES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI
    r"|\x1b\][^\x07\x1b\n]*(?:\x07|\x1b\\)"  # OSC, never across a newline
    r"|\x1b[@-Z\\-_]"  # other two-byte escapes
)
"""`cockpit.core.text.ANSI` for lines joined by newlines: as a line has no newline, stripping the joined
text with it strips each line as `ANSI` strips it alone (`ANSI`'s OSC could run from one line into the
next)."""
_ESCAPED = re.compile(r"\\(.)", re.DOTALL)


def literal_in_a_line(regex: re.Pattern[str]) -> str | None:
    """The text REGEX finds when it finds only its pattern's own text (a pattern as `re.escape` writes
    it, not empty) and no newline; else None. In lines joined by newlines, every match of such a pattern
    lies within one line, and every line it finds something in has a match there: lines can be searched
    a batch at a time."""
    pattern = regex.pattern
    if not isinstance(pattern, str) or not pattern or "\n" in pattern or regex.flags & re.VERBOSE:
        return None
    text = _ESCAPED.sub(r"\1", pattern)
    return text if re.escape(text) == pattern else None


def lines_found(regex: re.Pattern[str], literal: str, text: str, last: bool = False) -> Iterator[int]:
    """The lines of TEXT (lines joined by newlines, counted from 0) that REGEX finds something in, in
    order, each once; with LAST only the last of them (if any). REGEX finds LITERAL (`literal_in_a_line`):
    it is looked for with `str.find` (in lowered text where case is ignored and both are ASCII: several
    times faster than the regex engine ignoring case); else REGEX scans."""
    if "\x1b" in text:
        text = _ANSI_IN_LINES.sub("", text)
    starts: Iterable[int]
    if regex.flags & re.IGNORECASE and not (literal.isascii() and text.isascii()):
        matches = regex.finditer(text)
        if last:
            final = None
            for final in matches:  # noqa: B007 - the last one is wanted
                pass
            starts = () if final is None else (final.start(),)
        else:
            starts = (match.start() for match in matches)
    else:
        if regex.flags & re.IGNORECASE:
            text, literal = text.lower(), literal.lower()
        starts = (text.rfind(literal),) if last else _found(text, literal)
    line, counted = -1, 0
    for at in starts:
        if at < 0:
            return
        here = max(line, 0) + text.count("\n", counted, at)
        counted = at
        if here != line:
            line = here
            yield here


def _found(text: str, literal: str) -> Iterator[int]:
    """Where LITERAL first occurs in each line of TEXT that holds it, in order."""
    at = text.find(literal)
    while at >= 0:
        yield at
        after = text.find("\n", at + len(literal))  # the next one is looked for from the next line
        if after < 0:
            return
        at = text.find(literal, after)


_SEAL_LINES = 1024
_SEAL_CHARS = 64 * 1024
"""The newest lines stay `str` objects until there are this many of them, or this many characters."""


class TextColumn:
    """The lines' texts, numbered as the buffer numbers them: the newest few as `str` objects (the open
    batch), the older ones sealed in batches of about 1,000 lines, each batch one UTF-8 `bytes` object
    with the byte offset where each of its lines ends.

    200,000 lines kept as one `str` each are 200,000 small objects in pymalloc's arenas, interleaved
    with everything else the app allocates while a stream pours in; an arena goes back to the system
    only when it is wholly free, so after a burst the arenas they pin stay. Sealed, the same lines are
    a few hundred blocks of glibc's heap, whose free pages are given back (`core/heap.py`), and 50 bytes
    a line less. A line is decoded again when read: about 0.3 us one, 0.1 us a line in order.
    """

    __slots__ = ("_data", "_ends", "_starts", "_tail", "_tail_chars", "_tail_start")

    def __init__(self, first: int = 0) -> None:
        self._starts: list[int] = []
        """The number of each sealed batch's first line, ascending."""
        self._data: list[bytes] = []
        self._ends: list[array[int]] = []
        """Per sealed batch: where each line ends in its bytes (the newline that joins it to the next)."""
        self._tail: list[str] = []
        self._tail_start = first
        """The number of the open batch's first line."""
        self._tail_chars = 0

    def append(self, texts: list[str], first_kept: int) -> None:
        """Add the next lines (no newline in any); lines numbered below FIRST_KEPT are forgotten."""
        self._tail += texts
        self._tail_chars += sum(map(len, texts))
        if len(self._tail) >= _SEAL_LINES or self._tail_chars >= _SEAL_CHARS:
            self._seal(first_kept)
        self._evict(first_kept)

    def _seal(self, first_kept: int) -> None:
        skip = max(0, first_kept - self._tail_start)
        lines = self._tail[skip:]
        start = self._tail_start + skip
        self._tail_start += len(self._tail)
        self._tail, self._tail_chars = [], 0
        if not lines:
            return
        joined = "\n".join(lines)
        if joined.isascii():
            sizes = [len(line) + 1 for line in lines]
        else:
            sizes = [len(line.encode("utf-8", "surrogatepass")) + 1 for line in lines]
        self._starts.append(start)
        self._data.append(joined.encode("utf-8", "surrogatepass"))
        self._ends.append(array("I", (end - 1 for end in accumulate(sizes))))

    def _evict(self, first_kept: int) -> None:
        starts = self._starts
        gone = bisect_right(starts, first_kept) - 1  # batches wholly before the one holding FIRST_KEPT
        if starts and self._tail_start <= first_kept:
            gone = len(starts)
        if gone > 0:
            del starts[:gone], self._data[:gone], self._ends[:gone]

    def clear(self, first: int) -> None:
        """Forget every line; the next one appended is numbered FIRST."""
        self._starts, self._data, self._ends = [], [], []
        self._tail, self._tail_start, self._tail_chars = [], first, 0

    def get(self, number: int) -> str:
        """The text of line NUMBER (kept: the caller checks)."""
        if number >= self._tail_start:
            return self._tail[number - self._tail_start]
        k = bisect_right(self._starts, number) - 1
        i = number - self._starts[k]
        ends = self._ends[k]
        return self._data[k][ends[i - 1] + 1 if i else 0 : ends[i]].decode("utf-8", "surrogatepass")

    def iter_from(self, number: int) -> Iterator[str]:
        """The texts from line NUMBER to the newest, in order: the lines there when the first is read
        (lines fed while the caller is part way through are not in it, and none is skipped)."""
        tail = self._tail[max(0, number - self._tail_start) :]
        sealed: list[bytes] = []
        skip = 0
        if number < self._tail_start:
            k = max(0, bisect_right(self._starts, number) - 1)
            sealed, skip = self._data[k:], number - self._starts[k]
        for data in sealed:
            lines = data.decode("utf-8", "surrogatepass").split("\n")
            yield from (islice(lines, skip, None) if skip > 0 else lines)
            skip = 0
        yield from tail

    def pieces(self, low: int, high: int, backwards: bool = False) -> Iterator[tuple[int, str]]:
        """The texts of lines LOW to HIGH (numbers, HIGH not included, all kept), joined by newlines, a
        batch at a time: (the number of the piece's first line, its text), oldest first (newest first
        when BACKWARDS). A sealed batch is decoded whole (or the part of it in the range), once."""
        spans: list[tuple[int, int, int]] = []  # (batch, first, end): -1 for the open batch
        for k in range(max(0, bisect_right(self._starts, low) - 1), len(self._starts)):
            begin = self._starts[k]
            if begin >= high:
                break
            first, end = max(low, begin), min(high, begin + len(self._ends[k]))
            if first < end:
                spans.append((k, first, end))
        if high > max(low, self._tail_start):
            spans.append((-1, max(low, self._tail_start), high))
        for k, first, end in reversed(spans) if backwards else spans:
            if k < 0:
                yield first, "\n".join(self._tail[first - self._tail_start : end - self._tail_start])
                continue
            ends, begin = self._ends[k], self._starts[k]
            i, j = first - begin, end - begin
            data = self._data[k][ends[i - 1] + 1 if i else 0 : ends[j - 1]]
            yield first, data.decode("utf-8", "surrogatepass")
