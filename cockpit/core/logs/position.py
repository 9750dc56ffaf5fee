"""Keeps a log tail's place in a file Ray will not give an offset into (pure: no I/O).

Ray 2.60's log API cannot start a read at a byte offset, and it reports no file size: `lines=N` counts
from the end of the file as it is at that moment, and `lines=-1` starts at byte 0. Counted from the
end, no position survives a drop: in a run that prints the same block over and over, nothing tells how
many blocks were written while the stream was down. Byte 0 is the one fixed point, so a tail counts
every byte from there (`Ledger`): a replay reads the file from its start, discards exactly the bytes
already delivered and checks the last 4 KiB of them on the way (a file replaced or rotated under the
tail is caught there, or by being shorter than what was delivered).

A window of the file's last lines (Ray's `lines=K`) places bytes too, where it can tell for sure: the
last bytes delivered, found in it exactly once, tell where it begins (`origin_in_window`); the bytes a
reader missed lie between two runs of bytes that each occur once (`span_in_window`). Either answers
exactly or not at all, and a window that cannot tell leaves the replay from byte 0.
"""

from __future__ import annotations

from cockpit.core.errors import CockpitError

CHECKED_BYTES = 4096
"""How many of the last bytes delivered a replay compares, at their exact offsets (not a search)."""
HISTORY_LIMIT = 8 << 20
"""At most this much history when starting at the last N lines (one runaway line cannot fill memory)."""
WINDOW_BYTES_LIMIT = 64 << 20
"""The largest window of last lines asked for before reading the file from byte 0 instead."""
AFTER_BYTES = 64 << 10
"""How much of what follows a span anchors it in a window (`span_in_window`)."""


class FileReplaced(CockpitError):
    """The file no longer holds the bytes delivered from it (rewritten, truncated or rotated). `LogTail`
    catches it and follows the new file from its top; it reaches no one else."""


class Ledger:
    """Where the bytes delivered so far end in the file, and the last of them.

    A replay is a read of the file from byte 0; `feed` takes its chunks in order, however they are cut,
    and returns only the bytes past `offset` (advancing it): after any number of replays that stop
    anywhere, the bytes returned, joined, are the file from the first offset on, once each.
    """

    def __init__(self, offset: int = 0, recent: bytes = b"") -> None:
        self.offset = offset
        """Absolute offset, in the file, of the end of what was delivered."""
        self.recent = recent[-CHECKED_BYTES:]
        """The last bytes before `offset` (up to CHECKED_BYTES): what a replay must find there."""
        self.seen = 0
        """Bytes of the current replay fed so far (its position in the file)."""

    def replay(self) -> None:
        """A new read of the file from byte 0 begins."""
        self.seen = 0

    @property
    def caught_up(self) -> bool:
        return self.seen >= self.offset

    def feed(self, chunk: bytes) -> bytes:
        """The part of `chunk` (the replay's next bytes) past what was delivered; it counts as delivered.

        Raises:
            FileReplaced: the replay's bytes before `offset` differ from the ones delivered there.
        """
        start, self.seen = self.seen, self.seen + len(chunk)
        checked_from = self.offset - len(self.recent)
        low, high = max(start, checked_from), min(self.seen, self.offset)
        if (
            low < high
            and chunk[low - start : high - start] != self.recent[low - checked_from : high - checked_from]
        ):
            raise FileReplaced(f"the bytes before offset {self.offset} changed")
        if self.seen <= self.offset:
            return b""
        new = chunk[self.offset - start :]
        self.offset = self.seen
        self.recent = (self.recent + new)[-CHECKED_BYTES:]
        return new


class LastLines:
    """The last `n` lines of a read from byte 0, chosen as Ray's `lines=n` chooses them (a last line
    without a newline counts as one), and never more than `limit` bytes (then cut mid-line).

    Memory stays near the size of those lines: the start only moves forward as bytes arrive, so
    everything before it is dropped now and then.
    """

    def __init__(self, n: int, limit: int = HISTORY_LIMIT) -> None:
        self.n = n
        self.limit = limit
        self._buffer = bytearray()
        self._kept = 0

    def feed(self, chunk: bytes) -> None:
        self._buffer += chunk
        if len(self._buffer) > 2 * max(self._kept, 1 << 20):
            del self._buffer[: self._start()]
            self._kept = len(self._buffer)

    def _start(self) -> int:
        return last_lines_start(self._buffer, self.n, self.limit)

    def take(self) -> bytes:
        return bytes(self._buffer[self._start() :])


def last_lines_start(data: bytes | bytearray, n: int, limit: int = HISTORY_LIMIT) -> int:
    """Where, in DATA, its last N lines begin, as Ray's `lines=n` counts them (a last line without a
    newline counts as one), and at most LIMIT bytes from the end (then mid-line)."""
    end = len(data)
    if n <= 0:
        return end
    # Start after the (n+1)-th newline from the end, the file's last newline included; a partial
    # last line is one of the n. Fewer newlines: the start of what is held (a line start, or byte 0).
    position = end
    for _ in range(n + 1 if data.endswith(b"\n") else n):
        position = data.rfind(b"\n", 0, position)
        if position < 0:
            break
    return max(position + 1, end - limit)


def origin_in_window(window: bytes, recent: bytes, offset: int) -> int | None:
    """Where, in the file, WINDOW begins (bytes Ray sent from the start of the file's last lines, a place
    it does not say), told by RECENT, the bytes the file holds just before OFFSET; None where WINDOW
    cannot tell that for sure: RECENT in it twice (a log that repeats itself), not at all (a window too
    short, a file rewritten), or a place before byte 0.

    Exact whenever WINDOW reaches back to RECENT's true place: then a second, false place would put
    RECENT in WINDOW twice. The window is asked for right away, sized from what can have been written
    since OFFSET, so only a log that grew by more than that in the moment and repeats RECENT exactly
    could mislead it.
    """
    if not recent:
        return None
    at = window.find(recent)
    if at < 0 or window.find(recent, at + 1) >= 0:
        return None
    origin = offset - at - len(recent)
    return origin if origin >= 0 else None


def look_for_origin(window: bytes, recent: bytes, offset: int, lines: int) -> tuple[int | None, bool]:
    """`origin_in_window`'s answer for a window of the last LINES lines, and whether a wider window could
    not change it: WINDOW holds fewer lines than asked for (the whole file), or RECENT already."""
    origin = origin_in_window(window, recent, offset)
    return origin, origin is not None or window.count(b"\n") < lines - 1 or recent in window


def span_in_window(window: bytes, recent: bytes, length: int, after: bytes) -> bytes | None:
    """The LENGTH bytes between RECENT and AFTER, found in WINDOW (the file's last lines as Ray sent
    them), or None where WINDOW cannot tell them for sure.

    The span's place in the file is known, WINDOW's is not (Ray 2.60 sends no offset), so the span is
    found by its two sides: RECENT just before it and AFTER just after it must each occur exactly once
    in WINDOW, LENGTH bytes apart. A side seen twice (a log that repeats itself) or not at all (a window
    too short, a file rewritten) gives None, and the caller reads the file from byte 0 instead.

    Exact whenever WINDOW reaches back to AFTER's true place (then a second, false place of the span
    would put AFTER in WINDOW twice). The window is read right after the reader returns and sized from
    what is known to follow, so only a log that grew by more than the window in that moment and repeats
    RECENT, LENGTH bytes and AFTER exactly could mislead it.
    """
    if not recent or not after:
        return None
    at = window.find(recent)
    if at < 0 or window.find(recent, at + 1) >= 0:
        return None
    begin = at + len(recent)
    follows = window.find(after)
    if follows != begin + length or window.find(after, follows + 1) >= 0:
        return None
    return window[begin:follows]


def look_for_span(
    window: bytes, recent: bytes, length: int, after: bytes, lines: int
) -> tuple[bytes | None, bool]:
    """`span_in_window`'s answer, and whether a wider window could not change it: WINDOW is the whole
    file (fewer lines than asked for), or it holds RECENT already."""
    span = span_in_window(window, recent, length, after)
    return span, span is not None or window.count(b"\n") < lines - 1 or recent in window
