"""Provides log sources (a job's driver log, an actor's output, any file of any node) and `LogTail`,
which follows one through the dashboard and resumes after a drop with no gap and no repeated byte.

Ray's log API has no byte offset (`position`): a tail places its start by reading the file once from
byte 0; each (re)open after that starts from a window of the file's last lines (Ray's `lines=K`, sized
from what can have been written since) where the last bytes delivered occur in it exactly once, so a
resume reads about what it missed. A log that repeats itself, or a window that cannot be told for sure,
is read from byte 0 again, discarding exactly the bytes already delivered; no read has a total time
limit, only a limit on each wait while that part is resent.

A reader that comes back to a stream still open (`read_span` with the stream's bytes after the gap)
needs no position: what it missed lies between two known runs of bytes, and a window of the file's last
lines that holds each of them once tells it exactly (`span_in_window`), at about the cost of the gap.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import TypeVar, cast

from cockpit.core.cluster.dashboard import DashboardClient
from cockpit.core.cluster.errors import DashboardError, DashboardUnreachable, LogStalled
from cockpit.core.errors import is_permanent
from cockpit.core.logs.position import (
    AFTER_BYTES,
    CHECKED_BYTES,
    HISTORY_LIMIT,
    WINDOW_BYTES_LIMIT,
    FileReplaced,
    LastLines,
    Ledger,
    look_for_origin,
    look_for_span,
)
from cockpit.core.snapshots import ActorRow, JobRow

T = TypeVar("T")

RETRY_SECONDS = (0.5, 1.0, 2.0, 4.0)
WINDOW_FROM_BYTES = 1 << 20
"""A reopen at fewer bytes than this replays the file from byte 0 (cheap); at more, a window comes first."""
WINDOW_MARGIN_LINES = 1000
"""Lines a window holds beyond the last ones delivered and those written since, by the rate seen."""
WINDOW_RATE_LIMIT = 20_000
"""Lines a second a window is sized for at most (a replay of old bytes comes faster than any writer)."""
WINDOW_QUIET_S = 1.0
WINDOW_WAIT_S = 3.0
"""A stream's window is taken as whole after this long without a byte, or this long in all with all its
lines but the last (a last line still being written, like a progress bar's)."""
FILE_READ_FLOOR_S = 600
FILE_READ_BYTES_PER_S = 1 << 20
"""The dashboard's deadline for one whole-file read: the floor, plus a second per MiB known to be there."""


@dataclass(frozen=True)
class LogSource:
    """One log: by node and file name, or by actor (the dashboard finds the actor's worker file)."""

    label: str
    """How lines from it are tagged ("driver", "RolloutWorker_0", "raylet.out")."""
    node_id: str = ""
    filename: str = ""
    actor_id: str = ""
    suffix: str = "out"
    """For actors: "out" (stdout) or "err" (stderr)."""
    path: str = ""
    """A file on this machine, read without the dashboard (a Slurm job's output, `ray.sub`'s logs)."""

    def params(self) -> list[tuple[str, str]]:
        if self.actor_id:
            return [("actor_id", self.actor_id), ("suffix", self.suffix)]
        return [("node_id", self.node_id), ("filename", self.filename)]

    @classmethod
    def driver(cls, job: JobRow) -> LogSource:
        """The job's driver log (stdout and stderr of the entrypoint), on the driver's node."""
        return cls(label="driver", node_id=job.driver_node_id, filename=f"job-driver-{job.submission_id}.log")

    @classmethod
    def actor(cls, actor: ActorRow, suffix: str = "out") -> LogSource:
        name = actor.name or f"{actor.class_name}:{actor.actor_id[:8]}"
        return cls(
            label=name if suffix == "out" else f"{name} (stderr)", actor_id=actor.actor_id, suffix=suffix
        )

    @classmethod
    def file(cls, node_id: str, filename: str) -> LogSource:
        return cls(label=filename.rsplit("/", 1)[-1], node_id=node_id, filename=filename)

    @classmethod
    def local(cls, path: str) -> LogSource:
        """A file on this machine (no dashboard needed)."""
        return cls(label=path.rsplit("/", 1)[-1], path=path)


class LocalFileTail:
    """Follows a file on this machine: its last `lines` lines, then what is appended, polled every
    `interval` seconds (a stat; a read only when it grew). The files it is for (a Slurm job's output,
    the bootstrap logs of `ray.sub`) exist before any dashboard does. A file that shrinks was replaced:
    said once, and read again from its top. A file not there yet is waited for.
    """

    READ_LIMIT = 1 << 20
    """At most this much per read: a file that grows fast is read in steps."""

    def __init__(
        self,
        path: str,
        lines: int = 1000,
        on_event: Callable[[str], None] | None = None,
        interval: float = 1.0,
    ) -> None:
        self.path = path
        self.lines = lines
        self.on_event = on_event or (lambda _message: None)
        self.interval = interval
        self.offset: int | None = None

    def _read(self, start: int, size: int) -> bytes:
        with open(self.path, "rb") as handle:
            handle.seek(start)
            return handle.read(min(size, self.READ_LIMIT))

    def _start(self, size: int) -> int:
        """Where the last `lines` lines begin (reading at most HISTORY_LIMIT bytes of the end)."""
        if self.lines < 0:
            return 0
        begin = max(0, size - HISTORY_LIMIT)
        last = LastLines(self.lines)
        with open(self.path, "rb") as handle:
            handle.seek(begin)
            last.feed(handle.read(size - begin))
        return size - len(last.take())

    async def chunks(self) -> AsyncIterator[bytes]:
        missing_said = False
        while True:
            try:
                size = (await asyncio.to_thread(os.stat, self.path)).st_size
                if self.offset is None:
                    self.offset = await asyncio.to_thread(self._start, size)
                if size < self.offset:
                    self.on_event(f"{self.path} is shorter than what was read: replaced; reading it again")
                    self.offset = 0
                if size > self.offset:
                    data = await asyncio.to_thread(self._read, self.offset, size - self.offset)
                    self.offset += len(data)
                    if data:
                        yield data
                        continue  # more may be there already
                missing_said = False
            except FileNotFoundError:
                if not missing_said:
                    self.on_event(f"{self.path} is not there (yet); waiting for it")
                    missing_said = True
            except OSError as exc:
                self.on_event(f"cannot read {self.path}: {exc.strerror}")
            await asyncio.sleep(self.interval)


class LogTail:
    """Follows one log source; iterate `chunks()` for its bytes, in order, each exactly once.

    Guarantee: everything yielded by `chunks()` and `rest()`, over any number of drops and of iterations
    stopped and started again, joined, is exactly the file from the start point on, for as long as the
    file is only appended to. The start point is byte 0 (`lines=-1`), or the start of the last `lines`
    lines when the tail first read the file (at most HISTORY_LIMIT bytes of them). If the file is
    replaced, truncated or rotated, `on_event` says so and the tail goes on with the new file from its
    top (that break is the one exception, and it is announced).

    Cost: starting at the last N lines reads the file once, from byte 0, to place the start point; a
    (re)open after that reads a window of the file's last lines where it tells the place for sure, else
    the file from byte 0 again, dropping what was delivered (see the module docstring). One iteration at
    a time: `chunks()` and `rest()` share the position.

    Args:
        lines: how many existing lines to start with (-1: the whole file, 0: none).
        on_event: told, in one sentence each, when the stream dropped and when it resumed (once an
            outage, however many tries it takes; `dropped` holds the latest reason meanwhile).
        interval: how often the dashboard looks for new bytes at the end of the file (seconds).
    """

    def __init__(
        self,
        client: DashboardClient,
        source: LogSource,
        lines: int = 1000,
        on_event: Callable[[str], None] | None = None,
        interval: float = 0.5,
    ) -> None:
        self.client = client
        self.source = source
        self.lines = lines
        self.on_event = on_event or (lambda _message: None)
        self.interval = interval
        self.delivered = 0
        """Bytes delivered so far."""
        self.resumes = 0
        self.dropped = ""
        """Why the stream dropped, while it is being resumed ("" while it flows)."""
        self.dropped_at: float | None = None
        """When (monotonic) the stream dropped, while it is being resumed."""
        self.start_point: int | None = None
        """Where, in the file, the history ends and new bytes begin (None before the first read)."""
        self._ledger: Ledger | None = None
        """None until the start point is placed (the first read of the file)."""
        self._largest = 0
        """The most bytes any read of this file has seen: a floor for the size of the next one."""
        self.windows = 0
        """Reopens placed by a window of the file's last lines (no read from byte 0)."""
        self.replays = 0
        """Reopens that read the file from byte 0 (the history's read not counted)."""
        self._lines = 0
        self._first_at: float | None = None
        self._last_at: float | None = None
        """Lines delivered, and when the first and the latest bytes were: the rate a window is sized by."""

    @property
    def offset(self) -> int | None:
        """Where, in the file, what was delivered ends (None before the first read)."""
        return self._ledger.offset if self._ledger is not None else None

    def _deadline(self, failures: int) -> int:
        """The dashboard's time limit for reading the whole file once; doubled after each failed try."""
        known = max(self._largest, self._ledger.offset if self._ledger is not None else 0)
        return (FILE_READ_FLOOR_S + known // FILE_READ_BYTES_PER_S) << min(failures, 6)

    def _deliver(self, data: bytes, history: bool = False) -> bytes:
        self.delivered += len(data)
        self._last_at = time.monotonic()
        if history:  # not written at the rate of what follows
            self._first_at = self._last_at
            return data
        self._lines += data.count(b"\n")
        if self._first_at is None:
            self._first_at = self._last_at
        return data

    def _window_lines(self, ledger: Ledger) -> int:
        """How many last lines a window asks for: those of the bytes it must find, and twice as many as
        can have been written since the latest delivery at the rate seen, and a margin."""
        since = 0
        if self._first_at is not None and self._last_at is not None:
            now = time.monotonic()
            rate = min(WINDOW_RATE_LIMIT, self._lines / max(1.0, self._last_at - self._first_at))
            since = int(2 * rate * (now - self._last_at))
        return ledger.recent.count(b"\n") + since + WINDOW_MARGIN_LINES

    @staticmethod
    def _windowed(ledger: Ledger) -> bool:
        return ledger.offset >= WINDOW_FROM_BYTES and bool(ledger.recent)

    @staticmethod
    def _widest(ledger: Ledger, window: bytes) -> bool:
        """Whether WINDOW is as wide as a window gets: 4x wider would pass WINDOW_BYTES_LIMIT, or half
        of what a read from byte 0 costs (a stream dropped while it replayed old bytes is far from the
        file's end, where no window finds it)."""
        return 4 * len(window) > min(WINDOW_BYTES_LIMIT, ledger.offset // 2)

    async def _stream_window(self, reader: _Reader, lines: int) -> tuple[bytes, bool]:
        """The window a stream opened at the last LINES lines sends first, and whether it came whole:
        all its lines arrived, or all but a last one still being written. A window cut short (fewer
        lines, then a pause) is the whole file, or a slow head: the caller tells which."""
        first_wait = self.client.timeout_s or 30.0
        chunk = await reader.next(first_wait)  # the answer comes with the first chunk, however slow
        if chunk is None:
            raise DashboardUnreachable(
                f"the log stream from {self.client.display_url} sent nothing for {first_wait:g} s."
            )
        window = bytearray(chunk)
        newlines = chunk.count(b"\n")
        begun = time.monotonic()
        while newlines < lines and len(window) <= WINDOW_BYTES_LIMIT:
            wait = min(WINDOW_QUIET_S, begun + WINDOW_WAIT_S - time.monotonic())
            chunk = await reader.next(max(0.0, wait))
            if chunk is None:
                break
            window += chunk
            newlines += chunk.count(b"\n")
        return bytes(window), newlines >= lines - 1

    async def _opened(self, ledger: Ledger) -> AsyncIterator[bytes]:
        """A stream's bytes past what LEDGER says was delivered, fed through it (b"" while a replay is
        still before the end of what was delivered): from a window of the file's last lines where
        `origin_in_window` places it (widened while the bytes to find are not in it yet), else from
        byte 0."""
        params = self.source.params()
        if self._windowed(ledger):
            lines = self._window_lines(ledger)
            while True:
                reader = _Reader(self.client.stream_log(params, lines=lines, interval=self.interval))
                try:
                    window, whole = await self._stream_window(reader, lines)
                    origin, final = await _scan(look_for_origin, window, ledger.recent, ledger.offset, lines)
                    # A window cut short tells only when it is the file from byte 0.
                    if origin is not None and (whole or origin == 0):
                        self.windows += 1
                        ledger.seen = origin
                        data = ledger.feed(window)
                        del window  # tens of MB after a long gap: not kept for the stream's life
                        yield data
                        del data
                        while True:
                            chunk = await reader.next()
                            assert chunk is not None  # no limit on the wait
                            yield ledger.feed(chunk)
                finally:
                    await reader.close()
                if final or self._widest(ledger, window):
                    break  # a wider window cannot tell either
                lines *= 4
        self.replays += 1
        ledger.replay()
        async for chunk in self.client.stream_log(
            params, lines=-1, interval=self.interval, replay_bytes=ledger.offset
        ):
            yield ledger.feed(chunk)

    async def _read_window(self, ledger: Ledger) -> bytes | None:
        """The bytes past what LEDGER says was delivered, to the end of the file as it is now, from a
        window of its last lines (read whole through the file endpoint, widened while the bytes to find
        are not in it yet); None where no window tells the place for sure."""
        lines = self._window_lines(ledger)
        while True:
            window = b"".join([c async for c in self.client.read_log(self.source.params(), lines=lines)])
            origin, final = await _scan(look_for_origin, window, ledger.recent, ledger.offset, lines)
            if origin is not None:
                self.windows += 1
                ledger.seen = origin
                return ledger.feed(window)
            if final or self._widest(ledger, window):
                return None  # the whole file, or a wider window cannot tell either
            lines *= 4

    async def _history(self, failures: int) -> bytes:
        """Read the file to its end, keep its last `lines` lines and place the start point after them."""
        last = LastLines(self.lines)
        recent = b""
        size = 0
        async for chunk in self.client.read_log(self.source.params(), deadline_s=self._deadline(failures)):
            last.feed(chunk)
            recent = (recent + chunk)[-CHECKED_BYTES:]
            size += len(chunk)
            self._largest = max(self._largest, size)
        self._ledger = Ledger(offset=size, recent=recent)
        self.start_point = size
        return last.take()

    async def _shorter_than(self, offset: int, failures: int) -> bool:
        """Whether the file now holds fewer than `offset` bytes (a stalled replay: truncated, or slow?)."""
        size = 0
        async for chunk in self.client.read_log(self.source.params(), deadline_s=self._deadline(failures)):
            size += len(chunk)
            if size >= offset:
                return False
        return True

    def _replaced(self) -> None:
        self.on_event(
            f"{self.source.label}: the file no longer holds what was shown (rotated or rewritten); "
            "following the new file from its top"
        )
        self._ledger = Ledger()

    def _retry_delay(self, exc: DashboardError, failures: int) -> float:
        """The wait before the next try, or raise what `is_permanent` says cannot be cured by one: a
        drop, the dashboard's request limit or a module restart is retried; a missing node or a refused
        token is not."""
        if is_permanent(exc):
            raise exc
        return RETRY_SECONDS[min(failures, len(RETRY_SECONDS) - 1)]

    async def chunks(self) -> AsyncIterator[bytes]:
        """New bytes, forever. Iterating again later (a pane shown again) continues where it stopped."""
        failures = 0
        while True:
            try:
                if self._ledger is None:
                    if self.lines < 0:
                        self._ledger = Ledger()
                        self.start_point = 0
                    else:
                        history = await self._history(failures)
                        if history:
                            yield self._deliver(history, history=True)
                ledger = self._ledger
                assert ledger is not None
                ledger.replay()
                async with aclosing(cast("AsyncGenerator[bytes, None]", self._opened(ledger))) as opened:
                    async for data in opened:
                        if failures and ledger.caught_up:
                            down = time.monotonic() - (self.dropped_at or time.monotonic())
                            self.on_event(
                                f"{self.source.label}: stream resumed after {down:.0f} s, "
                                "no line lost or repeated"
                            )
                            failures = 0
                            self.dropped = ""
                            self.dropped_at = None
                        if data:
                            yield self._deliver(data)
            except FileReplaced:
                self._replaced()
            except DashboardError as exc:
                if isinstance(exc, LogStalled) and self._ledger is not None:
                    try:
                        if await self._shorter_than(self._ledger.offset, failures):
                            self._replaced()
                            continue
                    except DashboardError as check:
                        exc = check
                delay = self._retry_delay(exc, failures)
                if not failures:  # said once an outage; the tries after it only update `dropped`
                    self.dropped_at = time.monotonic()
                    reason = str(exc).rstrip(".")
                    self.on_event(f"{self.source.label}: {reason}; resuming by itself, from where it stopped")
                failures += 1
                self.resumes += 1
                self.dropped = str(exc)
                await asyncio.sleep(delay)

    async def rest(self) -> AsyncIterator[bytes]:
        """The bytes not delivered yet, up to the end of the file as it is now (e.g. once the job ended).

        The same bytes `chunks()` would have gone on with, read through the file endpoint (which ends),
        with no total time limit. A drop is retried a few times, then raised.
        """
        failures = 0
        while True:
            try:
                if self._ledger is None:
                    if self.lines >= 0:
                        history = await self._history(failures)
                        if history:
                            yield self._deliver(history, history=True)
                        return
                    self._ledger = Ledger()
                ledger = self._ledger
                if self._windowed(ledger):
                    data = await self._read_window(ledger)
                    if data is not None:
                        if data:
                            yield self._deliver(data)
                        return
                self.replays += 1
                ledger.replay()
                async for chunk in self.client.read_log(
                    self.source.params(), deadline_s=self._deadline(failures)
                ):
                    self._largest = max(self._largest, ledger.seen + len(chunk))
                    data = ledger.feed(chunk)
                    if data:
                        yield self._deliver(data)
                if not ledger.caught_up:
                    raise FileReplaced(f"the file ends before offset {ledger.offset}")
                return
            except FileReplaced:
                self._replaced()
            except DashboardError as exc:
                delay = self._retry_delay(exc, failures)
                if failures >= len(RETRY_SECONDS):
                    raise
                failures += 1
                await asyncio.sleep(delay)

    async def remainder(self) -> bytes:
        """`rest()` joined (held in memory whole: for a large file, iterate `rest()`)."""
        return b"".join([chunk async for chunk in self.rest()])


async def last_lines(client: DashboardClient, source: LogSource, lines: int) -> AsyncIterator[bytes]:
    """SOURCE's last LINES lines as Ray picks them (`lines=N`: one read at the file's end, whatever its
    size), for a look once; a tail that goes on from them is `LogTail`."""
    async for chunk in client.read_log(source.params(), lines=lines):
        yield chunk


SCAN_ON_LOOP_BYTES = 1 << 20
"""A window larger than this is scanned on a thread (tens of MB would hold up the screen)."""


async def _scan(look: Callable[..., T], window: bytes, *args: object) -> T:
    """LOOK(WINDOW, *ARGS), each look a scan of WINDOW: on a thread when WINDOW is large."""
    if len(window) <= SCAN_ON_LOOP_BYTES:
        return look(window, *args)
    return await asyncio.to_thread(look, window, *args)


class _Reader:
    """An async iterator read with a limit on each wait; a wait that runs out leaves the read going, so
    no chunk is lost (the next call takes it)."""

    def __init__(self, chunks: AsyncIterator[bytes]) -> None:
        self.chunks = cast("AsyncGenerator[bytes, None]", chunks)
        self.pending: asyncio.Future[bytes] | None = None

    async def next(self, timeout: float | None = None) -> bytes | None:
        """The next chunk, or None when TIMEOUT passed first (the end of the iterator raises)."""
        if self.pending is None:
            self.pending = asyncio.ensure_future(anext(self.chunks))
        done, _ = await asyncio.wait({self.pending}, timeout=timeout)
        if not done:
            return None
        pending, self.pending = self.pending, None
        return pending.result()

    async def close(self) -> None:
        if self.pending is not None:
            self.pending.cancel()
            await asyncio.gather(self.pending, return_exceptions=True)
            self.pending = None
        await self.chunks.aclose()


async def _span_from_end(
    client: DashboardClient, source: LogSource, length: int, recent: bytes, after: bytes, beyond: int
) -> bytes | None:
    """The span `span_in_window` finds in the file's last lines, asked for as a window sized from the
    bytes known to follow it (LENGTH + BEYOND) and AFTER's line length, widened 4x while it is too
    short; None when no window up to WINDOW_BYTES_LIMIT tells it for sure."""
    after = after[:AFTER_BYTES]
    if not recent or not after or after.count(b"\n") < 2:
        return None
    line_bytes = max(1, len(after) // after.count(b"\n"))
    wanted = len(recent) + length + beyond
    while wanted <= WINDOW_BYTES_LIMIT:
        lines = wanted // line_bytes * 5 // 4 + 100
        window = b"".join([chunk async for chunk in client.read_log(source.params(), lines=lines)])
        span, final = await _scan(look_for_span, window, recent, length, after, lines)
        if span is not None or final:
            return span
        wanted *= 4
    return None


async def read_span(
    client: DashboardClient,
    source: LogSource,
    start: int,
    end: int,
    recent: bytes = b"",
    *,
    after: bytes = b"",
    beyond: int = 0,
) -> AsyncIterator[bytes]:
    """The bytes [START, END) of a log file (what a reader missed while it was away). RECENT, the bytes
    just before START as the reader got them, must still be there. A drop is retried a few times, then
    raised.

    With AFTER (the bytes from END on, as the stream brought them; BEYOND: how many bytes are known to
    follow END) the span is first looked for in a window of the file's last lines (`span_in_window`),
    so the head reads about as much as was missed, not the whole file; where that cannot tell, the file
    is read through the file endpoint from byte 0, like every replay (`Ledger`).

    Raises:
        FileReplaced: the file no longer holds RECENT before START, or ends before END.
    """
    if after and end > start:
        try:
            span = await _span_from_end(client, source, end - start, recent, after, beyond)
        except DashboardError as exc:
            if is_permanent(exc):
                raise
            span = None  # the read from byte 0 below retries
        if span is not None:
            yield span
            return
    ledger = Ledger(offset=start, recent=recent)
    failures = 0
    while ledger.offset < end:
        ledger.replay()
        deadline = (FILE_READ_FLOOR_S + end // FILE_READ_BYTES_PER_S) << min(failures, 6)
        try:
            reading = client.read_log(source.params(), deadline_s=deadline)
            reading = cast("AsyncGenerator[bytes, None]", reading)  # it is one: closed when left early
            async with aclosing(reading) as chunks:
                async for chunk in chunks:
                    data = ledger.feed(chunk[: max(0, end - ledger.seen)])
                    if data:
                        yield data
                    if ledger.offset >= end:
                        return  # the rest of the file is not wanted: the request is closed now
            raise FileReplaced(f"the file ends before offset {end}")
        except DashboardError as exc:
            if is_permanent(exc) or failures >= len(RETRY_SECONDS):
                raise
            await asyncio.sleep(RETRY_SECONDS[failures])
            failures += 1
