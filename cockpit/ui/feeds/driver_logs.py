"""Provides the driver-log feed: one stream of a job's driver log, shared by everything that reads it.

The hang watch, the training curves, the cockpit screen's driver-log pane and the Logs screen read the
driver log of the same job (the newest running one, `cockpit.core.snapshots.newest_running`). A log
stream holds one of the dashboard's 100 concurrent requests, so each job's driver log is followed once:
the stream (a `LogTail`: a drop resumes with no line lost or repeated) opens with the first reader and
closes when the last one leaves. The feed keeps the stream's last `KEEP_LINES` lines, and a reader that
joins is given, on the UI thread, in order and each byte once:

- a new reader: the last `lines` lines of the log (1 for the hang watch, 200 for the pane, 1000 for the
  Logs screen), then every byte as it comes;
- a reader coming back (`since`: where what it was given ends, the pane shown again): every byte from
  there, from what is kept or, before that, read once from the file (`read_span`: a window of the
  file's last lines where it tells the missed bytes for sure, else the file from byte 0); `since=START`
  is the whole file (the training curves' history).

A stream that cannot be followed at all (its node gone) is tried again every `RETRY_SECONDS` while it
has readers; each reader hears why in one sentence.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from cockpit.core.errors import CockpitError
from cockpit.core.logs.position import AFTER_BYTES, CHECKED_BYTES, FileReplaced, last_lines_start
from cockpit.core.logs.sources import LogSource, LogTail, read_span
from cockpit.ui.feeds import start_worker

if TYPE_CHECKING:
    from textual.app import App
    from textual.worker import Worker

    from cockpit.core.cluster.dashboard import DashboardClient
    from cockpit.core.snapshots import JobRow

KEEP_LINES = 1000
"""Lines of the log kept (at most HISTORY_LIMIT bytes): what a reader that joins late is given."""
RETRY_SECONDS = 10.0
"""After a failure the stream cannot resume by itself (a missing node, a refused request)."""
INTERVAL = 0.5
"""How often the dashboard looks for new bytes at the end of the file (seconds)."""
HELD_BYTES = 16 << 20
"""The most a reader catching up from the file has held for it of what the stream brought meanwhile.
Past it nothing is held: once the read from the file ends, the reader catches up again from where it is
(what is kept, or the file once more). A log pouring in while a reader reads its whole history would
otherwise hold everything it brought, however much (a 2,000,000-line burst: hundreds of MiB)."""

Took = Callable[[bytes, bool], None]
"""A reader's chunk: the bytes, and whether they were written before it joined (its history)."""
Said = Callable[[str, bool], None]
"""A sentence about the stream (dropped, resumed, the file replaced), and whether it failed."""


class LogPosition(NamedTuple):
    """Where what a reader was given ends in the file, and its last bytes (checked when it comes back)."""

    offset: int
    recent: bytes = b""


START = LogPosition(0)
"""The file from its first byte."""


class LogReader:
    """One reader of a shared driver log; `leave()` when done (the last one out closes the stream)."""

    def __init__(
        self,
        log: DriverLog,
        lines: int,
        since: LogPosition | None,
        took: Took,
        said: Said,
        caught_up: Callable[[], None] | None,
    ) -> None:
        self.log = log
        self.lines = lines
        self.since = since
        self.took = took
        self.said = said
        self.caught_up = caught_up
        self.offset: int | None = None
        """Where, in the file, what this reader was given ends (None until it was given its start)."""
        self.recent = b""
        self.live = False
        """Given everything up to the stream's end: each new chunk goes straight to it."""
        self.pending: list[tuple[bytes, bool]] | None = None
        """While it catches up from the file: what the stream brought meanwhile, given after."""
        self.held = 0
        """Bytes in `pending`; `most_held` is the most there ever were (at most HELD_BYTES)."""
        self.most_held = 0
        self.behind = False
        """`pending` would have held more than HELD_BYTES: dropped, and caught up again from the file."""
        self.rounds = 0
        """Catch-ups from the file begun again because more came meanwhile than it may hold."""
        self.catch_up: Worker[None] | None = None
        self.left = False

    @property
    def position(self) -> LogPosition | None:
        """Where to come back to (`DriverLogs.join(..., since=)`): None before it was given anything."""
        return None if self.offset is None else LogPosition(self.offset, self.recent)

    @property
    def trouble(self) -> str:
        """Why the stream does not flow ("" while it does)."""
        return self.log.trouble

    def leave(self) -> None:
        self.log.feed.leave(self)

    def hold(self, chunk: bytes, history: bool = False) -> None:
        """Keep CHUNK for after the catch-up, unless that would hold more than HELD_BYTES."""
        if self.pending is None or self.behind:
            return
        if self.held + len(chunk) > HELD_BYTES:
            self.pending, self.held, self.behind = [], 0, True
            return
        self.pending.append((chunk, history))
        self.held += len(chunk)
        self.most_held = max(self.most_held, self.held)

    def give(self, data: bytes, history: bool) -> None:
        if not data or self.left:
            return
        self.offset = (self.offset or 0) + len(data)
        self.recent = (self.recent + data)[-CHECKED_BYTES:]
        self.took(data, history)


class DriverLog:
    """One job's driver log: its stream, what it brought (the last lines), and its readers."""

    def __init__(self, feed: DriverLogs, job: JobRow) -> None:
        self.feed = feed
        self.job = job
        self.source = LogSource.driver(job)
        self.readers: list[LogReader] = []
        self.tail: LogTail | None = None
        self.kept = bytearray()
        """The end of what the stream brought: at least its last KEEP_LINES lines (HISTORY_LIMIT bytes at
        most), and up to twice what was kept after the last trim (trims cost O(bytes), so they are rare)."""
        self._trimmed = 0
        self.end: int | None = None
        """Where, in the file, what the stream brought ends (None before its first chunk)."""
        self.worker: Worker[None] | None = None
        self.opened = 0
        """How many times the feed opened its stream (a drop resumed inside `LogTail` not counted)."""
        self.failure = ""
        """Why the stream could not be followed at all ("" while it is)."""

    @property
    def start(self) -> int:
        """Where, in the file, what is kept begins."""
        return (self.end or 0) - len(self.kept)

    @property
    def trouble(self) -> str:
        return self.failure or (self.tail.dropped if self.tail is not None else "")

    def keep(self, chunk: bytes) -> None:
        self.kept += chunk
        if len(self.kept) > 2 * max(self._trimmed, 1 << 20):
            del self.kept[: last_lines_start(self.kept, KEEP_LINES)]
            self._trimmed = len(self.kept)

    def last_lines(self, lines: int) -> bytes:
        return bytes(self.kept[last_lines_start(self.kept, lines) :])

    def holds(self, since: LogPosition) -> bool:
        """Whether what is kept agrees with the bytes a reader was given before SINCE, where they overlap
        (a file rewritten under a reader that was away is caught here, as a replay catches it)."""
        low = max(self.start, since.offset - len(since.recent))
        if low >= since.offset:
            return True
        kept = self.kept[low - self.start : since.offset - self.start]
        return bytes(kept) == since.recent[len(since.recent) - (since.offset - low) :]


class DriverLogs:
    """The feed: each job's driver log followed once, whoever reads it."""

    def __init__(self, app: App[Any], client: Callable[[], Awaitable[DashboardClient]]) -> None:
        self.app = app
        self.client = client
        self.logs: dict[str, DriverLog] = {}
        """Job key -> its log, while it has readers."""

    # -- readers -------------------------------------------------------------------------------

    def join(
        self,
        job: JobRow,
        took: Took,
        *,
        lines: int = KEEP_LINES,
        since: LogPosition | None = None,
        said: Said | None = None,
        caught_up: Callable[[], None] | None = None,
    ) -> LogReader:
        """Read JOB's driver log (it must have a driver): TOOK is given its last LINES lines, or every
        byte from SINCE, then each chunk as it comes; CAUGHT_UP is called once it is given everything
        written before it joined (at once when the stream is known). TOOK may be called before this
        returns."""
        log = self.logs.get(job.key)
        if log is None:
            log = self.logs[job.key] = DriverLog(self, job)
        reader = LogReader(log, max(0, min(lines, KEEP_LINES)), since, took, said or _nothing, caught_up)
        log.readers.append(reader)
        if log.end is not None:
            self._place(log, reader)
        if log.worker is None or log.worker.is_finished:
            log.worker = start_worker(
                self.app,
                functools.partial(self._follow, log),
                group=f"driver-log-{job.key}",
                description=f"Following the driver log of {job.key}",
            )
        return reader

    def leave(self, reader: LogReader) -> None:
        """READER reads no more; the last reader out closes the stream."""
        if reader.left:
            return
        reader.left = True
        log = reader.log
        if reader.catch_up is not None:
            reader.catch_up.cancel()
        if reader in log.readers:
            log.readers.remove(reader)
        if not log.readers:
            if log.worker is not None:
                log.worker.cancel()
            if self.logs.get(log.job.key) is log:
                del self.logs[log.job.key]

    def stop(self) -> None:
        """Every stream closed (the app ends)."""
        for log in list(self.logs.values()):
            for reader in list(log.readers):
                self.leave(reader)

    def open_streams(self, job_key: str) -> int:
        """Streams of JOB_KEY's driver log open now: 1 while it has readers, else 0."""
        log = self.logs.get(job_key)
        return int(log is not None and log.worker is not None and not log.worker.is_finished)

    # -- the stream ----------------------------------------------------------------------------

    async def _follow(self, log: DriverLog) -> None:
        """The stream, while the log has readers; what it brings goes to each of them."""
        while log.readers:
            try:
                client = await self.client()
                if log.tail is None:
                    said = functools.partial(self._said, log)
                    log.tail = LogTail(client, log.source, lines=KEEP_LINES, on_event=said, interval=INTERVAL)
                log.tail.client = client  # a reconnect may have opened a new connection
                log.opened += 1
                async for chunk in log.tail.chunks():
                    log.failure = ""
                    self._took(log, chunk)
            except CockpitError as exc:
                log.failure = str(exc)
                self._said(log, f"cannot follow the driver log of {log.job.key}: {exc}", failed=True)
            await asyncio.sleep(RETRY_SECONDS)

    def _said(self, log: DriverLog, message: str, failed: bool = False) -> None:
        for reader in list(log.readers):
            reader.said(message, failed)

    def _took(self, log: DriverLog, chunk: bytes) -> None:
        tail = log.tail
        assert tail is not None and tail.offset is not None
        end = tail.offset
        begin = end - len(chunk)
        if log.end is None and tail.start_point is not None and begin >= tail.start_point:
            # No history came (the file was empty): the readers start where the stream did.
            log.end = begin
            for reader in list(log.readers):
                self._place(log, reader)
        if log.end is None or begin != log.end:
            # The stream's first chunk (the log's last lines), or a file replaced under it (the tail
            # said so, and goes on from the new file's top): what was kept and the readers' places go.
            replaced = log.end is not None
            log.kept, log.end = bytearray(), begin
            if replaced:
                for reader in log.readers:
                    if reader.catch_up is not None:
                        reader.catch_up.cancel()
                        reader.catch_up = None
                    reader.pending, reader.since, reader.live = None, None, True
                    reader.held, reader.behind = 0, False
                    reader.offset, reader.recent = begin, b""
        log.keep(chunk)
        log.end = end
        for reader in list(log.readers):
            if reader.live:
                reader.give(chunk, history=False)
            elif reader.pending is not None:
                reader.hold(chunk)
            else:
                self._place(log, reader)

    def _place(self, log: DriverLog, reader: LogReader) -> None:
        """Give READER its start: the last lines it asked for, or every byte from where it was."""
        assert log.end is not None
        since = reader.since
        if since is not None and (since.offset > log.end or not log.holds(since)):
            reader.said(f"{log.source.label}: the file no longer holds what was shown (rewritten)", False)
            since = None
        if since is None:
            data = log.last_lines(reader.lines) if reader.lines else b""
            reader.offset = log.end - len(data)
            self._caught_up(reader, [(data, True)])
        elif since.offset >= log.start:
            reader.offset, reader.recent = since.offset, since.recent
            self._caught_up(reader, [(bytes(log.kept[since.offset - log.start :]), True)])
        else:
            reader.offset, reader.recent = since.offset, since.recent
            reader.pending, reader.held, reader.behind = [], 0, False
            reader.hold(bytes(log.kept), history=True)
            reader.catch_up = start_worker(
                self.app,
                functools.partial(
                    self._catch_up,
                    log,
                    reader,
                    since,
                    log.start,
                    bytes(log.kept[:AFTER_BYTES]),
                    len(log.kept),
                ),
                group=f"driver-log-catch-up-{id(reader)}",
                description=f"Reading what {log.job.key}'s driver log holds before its last lines",
            )

    def _caught_up(self, reader: LogReader, backlog: list[tuple[bytes, bool]]) -> None:
        reader.live = True
        reader.pending, reader.held = None, 0
        for data, history in backlog:
            reader.give(data, history)
        if reader.caught_up is not None and not reader.left:
            reader.caught_up()

    async def _catch_up(
        self, log: DriverLog, reader: LogReader, since: LogPosition, upto: int, after: bytes, beyond: int
    ) -> None:
        """The bytes a reader missed before what is kept (which begins with AFTER, BEYOND bytes long),
        from the file; then what is kept and came."""
        try:
            client = await self.client()
            spanned = read_span(
                client, log.source, since.offset, upto, since.recent, after=after, beyond=beyond
            )
            async for data in spanned:
                reader.give(data, history=True)
        except FileReplaced:
            reader.said(f"{log.source.label}: the file no longer holds what was shown (rewritten)", False)
            reader.offset = upto  # what is kept follows
        except CockpitError as exc:
            reader.catch_up = None
            self.leave(reader)  # a gap it cannot fill: it reads no more (`left`), and hears why
            reader.said(f"cannot read the driver log of {log.job.key}: {exc}", True)
            return
        reader.catch_up = None
        if reader.left:
            return  # it left from its own callback, on the read's last chunk: no new round for it
        if reader.behind:
            # More came meanwhile than it may hold: from where it is now, again (from what is kept, or
            # once more from the file).
            reader.pending, reader.held, reader.behind = None, 0, False
            reader.since = reader.position
            reader.rounds += 1
            self._place(log, reader)
            return
        self._caught_up(reader, reader.pending or [])


def _nothing(_message: str, _failed: bool) -> None:
    pass


def driver_logs_of(app: App[Any]) -> DriverLogs:
    """The app's driver-log feed (screens reach it without importing the app)."""
    feed = getattr(app, "driver_logs", None)
    if not isinstance(feed, DriverLogs):
        raise TypeError(f"{type(app).__name__} has no driver-log feed")
    return feed
