"""A reader coming back to a driver log finds what it missed in a window of the file's last lines
(`read_span` with `after`), not by reading the file from byte 0: `span_in_window` either tells the
missed bytes exactly or says it cannot (a log that repeats itself), property-tested on logs made of a few
repeated lines; and the shared feed against the synthetic head (a 200,000-line driver log) reads about
what was missed (a fifth of the log at most, where the whole file was read before).

A tail's (re)open does the same with the bytes it last delivered (`origin_in_window`, property-tested
alike): against the synthetic head, a new tail reads the file once (its history), and a reopen, a
resume and the rest once the job ended read about what is new."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import aclosing, asynccontextmanager

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from textual.app import App
from textual.pilot import Pilot

from cockpit.core.cluster.dashboard import DashboardClient
from cockpit.core.logs.position import last_lines_start, origin_in_window, span_in_window
from cockpit.core.logs.sources import LogSource, LogTail
from cockpit.core.snapshots import JobRow
from cockpit.ui.feeds import driver_logs
from cockpit.ui.feeds.driver_logs import KEEP_LINES, START, DriverLogs
from tests.harness.properties import examples
from tests.harness.run import until
from tests.harness.synthetic_head import HeadShape, SyntheticHead

LINES = st.lists(st.sampled_from([b"a\n", b"bb\n", b"step 1\n", b"x", b"\n"]), min_size=1, max_size=60)


@settings(max_examples=examples(400), deadline=None)
@given(
    lines=LINES,
    grown=st.lists(st.sampled_from([b"a\n", b"bb\n", b"zz\n"]), max_size=20),
    cuts=st.tuples(st.integers(0, 10**6), st.integers(0, 10**6), st.integers(1, 40), st.integers(1, 40)),
    extra_lines=st.integers(0, 30),
)
@example(lines=[b"a\n"] * 30, grown=[], cuts=(10, 20, 2, 2), extra_lines=0)  # a log of one line repeated
def test_a_span_found_in_a_window_is_exactly_the_missed_bytes(
    lines: list[bytes], grown: list[bytes], cuts: tuple[int, int, int, int], extra_lines: int
) -> None:
    # The file when the reader left, START and END its missed span, RECENT before it and AFTER from END
    # on (what the stream brought); the file has grown since, and the window is its last lines, at
    # least all of them from END on (the stream's kept bytes are more recent than any missed one).
    text = b"".join(lines)
    start = cuts[0] % (len(text) + 1)
    end = start + cuts[1] % (len(text) - start + 1)
    recent = text[max(0, start - cuts[2]) : start]
    after = text[end : end + cuts[3]]
    grown_file = text + b"".join(grown)
    least = grown_file[end:].count(b"\n") + 1
    window = grown_file[last_lines_start(grown_file, least + extra_lines) :]
    found = span_in_window(window, recent, end - start, after)
    assert found is None or found == text[start:end]


@settings(max_examples=examples(400), deadline=None)
@given(
    lines=LINES,
    grown=st.lists(st.sampled_from([b"a\n", b"bb\n", b"zz\n", b"x"]), max_size=20),
    cuts=st.tuples(st.integers(0, 10**6), st.integers(1, 40)),
    extra_lines=st.integers(0, 30),
)
@example(lines=[b"a\n"] * 30, grown=[], cuts=(10, 2), extra_lines=0)  # a log of one line repeated
def test_a_window_is_placed_exactly_or_not_at_all(
    lines: list[bytes], grown: list[bytes], cuts: tuple[int, int], extra_lines: int
) -> None:
    # What was delivered ends at OFFSET, RECENT its last bytes; the file grew since, and the window is
    # its last lines, at least all of them from RECENT's start on (its size is chosen so).
    text = b"".join(lines)
    offset = cuts[0] % (len(text) + 1)
    recent = text[max(0, offset - cuts[1]) : offset]
    grown_file = text + b"".join(grown)
    least = grown_file[offset - len(recent) :].count(b"\n") + 1
    begin = last_lines_start(grown_file, least + extra_lines)
    origin = origin_in_window(grown_file[begin:], recent, offset)
    assert origin is None or origin == begin
    if recent and grown_file.find(recent, grown_file.find(recent) + 1) < 0:
        assert origin == begin  # a RECENT seen once in the whole file is always found


def test_a_numbered_log_is_always_found_once_the_window_holds_it() -> None:
    text = b"".join(b"line %05d\n" % i for i in range(3000))
    start, end = text.index(b"line 01000"), text.index(b"line 02000")
    window = text[text.index(b"line 00900") :]
    assert (
        span_in_window(window, text[start - 40 : start], end - start, text[end : end + 200])
        == text[start:end]
    )
    # The window too short (RECENT not in it), a side missing, a side seen twice: None, never a guess.
    assert (
        span_in_window(text[start + 5 :], text[start - 40 : start], end - start, text[end : end + 200])
        is None
    )
    assert span_in_window(window, b"", end - start, text[end : end + 200]) is None
    twice = window + text[start - 40 : start]
    assert span_in_window(twice, text[start - 40 : start], end - start, text[end : end + 200]) is None


@asynccontextmanager
async def driver_log_feed(head: SyntheticHead) -> AsyncIterator[tuple[JobRow, Pilot[None], DriverLogs]]:
    """HEAD's first job, a running app's pilot, and a driver-log feed on a client of HEAD."""
    async with DashboardClient(head.url) as client:
        job = (await client.jobs())[0]

        async def dashboard() -> DashboardClient:
            return client

        app: App[None] = App()
        async with app.run_test() as pilot:
            yield job, pilot, DriverLogs(app, dashboard)


async def test_a_reader_back_after_many_lines_reads_about_what_it_missed_not_the_whole_log() -> None:
    # Lines when the reader leaves, and written while it is away: more than the feed keeps (at least
    # KEEP_LINES lines, up to about 2 MiB), so what it missed begins before what is kept.
    before, missed = 500_000, 30 * KEEP_LINES
    shape = HeadShape(nodes=2, gpus=1, actors=4, jobs=1, dead=0, log_rate=0.0, log_lines=before)
    with SyntheticHead(shape, tick_s=3600) as head:
        whole = len(head._log_text(0, before + missed))
        async with driver_log_feed(head) as (job, pilot, logs):
            watch: list[bytes] = []  # the hang watch: keeps the stream open all along
            staying = logs.join(job, lambda data, _h: watch.append(data), lines=1)
            got = bytearray()
            reader = logs.join(job, lambda data, _h: got.extend(data), lines=5)
            await until(pilot, lambda: got.count(b"\n") == 5, timeout=30)
            position = reader.position
            reader.leave()

            head.stats.reset()
            head.shape.log_lines = before + missed
            await until(pilot, lambda: logs.logs[job.key].end == whole, timeout=30)
            assert position is not None and position.offset < logs.logs[job.key].start

            back = bytearray()
            again = logs.join(job, lambda data, _h: back.extend(data), since=position)
            await until(pilot, lambda: back.count(b"\n") >= missed, timeout=30)
            assert bytes(back) == head._log_text(before, before + missed)  # none lost or repeated
            read = head.stats.snapshot()["endpoints"]["/api/v0/logs/file"]["bytes"]
            missed_bytes = len(back)
            assert missed_bytes <= read < whole // 5, (read, missed_bytes, whole)
            again.leave()
            staying.leave()


async def test_a_reader_of_the_whole_log_holds_little_while_it_pours_in_and_loses_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While a reader reads a log's history from the file (the curves: from byte 0), the stream goes on
    bringing lines; past HELD_BYTES nothing more is held for it, and once the read ends it catches up
    again from where it is: bounded memory, every byte once, in order. (HELD_BYTES made smaller than the
    last lines the feed keeps, so that holding is refused at once, however fast the file is read.)"""
    monkeypatch.setattr(driver_logs, "HELD_BYTES", 64 << 10)
    shape = HeadShape(nodes=2, gpus=1, actors=4, jobs=1, dead=0, log_rate=0.0, log_lines=200_000)
    with SyntheticHead(shape, tick_s=3600) as head:
        async with driver_log_feed(head) as (job, pilot, logs):
            staying = logs.join(job, lambda _data, _h: None, lines=1)  # the hang watch: the stream
            await until(pilot, lambda: logs.logs[job.key].end is not None, timeout=30)
            head.set_log_rate(40_000.0)  # about 3.5 MB/s from now
            got = bytearray()
            whole = logs.join(job, lambda data, _h: got.extend(data), since=START)
            await until(pilot, lambda: whole.rounds >= 1, timeout=60)
            head.set_log_rate(0.0)  # it stops: the reader must end with every line written
            end = head.log_count()
            await until(pilot, lambda: got.count(b"\n") >= end and whole.live, timeout=60)
            assert bytes(got) == head._log_text(0, end)  # none lost or repeated
            assert whole.most_held <= driver_logs.HELD_BYTES
            whole.leave()
            staying.leave()


async def test_a_tail_reads_a_big_log_once_and_then_about_what_is_new() -> None:
    # A driver log of 400,000 lines (about 33 MB) that grows while its tail is not followed.
    before = 400_000
    shape = HeadShape(nodes=2, gpus=1, actors=4, jobs=1, dead=0, log_rate=0.0, log_lines=before)
    with SyntheticHead(shape, tick_s=3600) as head:
        whole = len(head._log_text(0, before))
        async with DashboardClient(head.url) as client:
            job = (await client.jobs())[0]
            tail = LogTail(client, LogSource.driver(job), lines=100, interval=0.1)
            got = bytearray()

            async def follow(until_lines: int, then_written: int = 0) -> None:
                """Follow until UNTIL_LINES came (then its stream is closed); THEN_WRITTEN more lines are
                written once the first bytes came."""
                async with aclosing(tail.chunks()) as chunks:
                    async for chunk in chunks:
                        got.extend(chunk)
                        if then_written:
                            head.shape.log_lines += then_written
                            then_written = 0
                        if got.count(b"\n") >= until_lines:
                            return

            def served(endpoint: str) -> int:
                return int(head.stats.snapshot()["endpoints"].get(endpoint, {}).get("bytes", 0))

            async def reset_when_streams_closed() -> None:
                """Reset the head's counts once its side of the last stream has ended: a chunk it was
                still writing when the client left counted after the reset (seen on a loaded machine)."""
                for _ in range(400):
                    stream = head.stats.snapshot()["endpoints"].get("/api/v0/logs/stream", {})
                    if stream.get("in_flight", 0) == 0:
                        head.stats.reset()
                        return
                    await asyncio.sleep(0.05)
                raise AssertionError("the head never ended its side of the log stream")

            await follow(150, then_written=50)  # 50 lines written right after the history was read
            assert served("/api/v0/logs/file") >= whole  # the history's one read from byte 0
            first_stream = served("/api/v0/logs/stream")
            assert first_stream < whole // 20, first_stream  # a window, not the file again

            # 10,000 lines while the pane was hidden: windows widened 4x until one holds where it
            # stopped (those before it read in vain): a few times what was missed, not the file.
            await reset_when_streams_closed()
            head.shape.log_lines = before + 10_050
            await follow(10_150)
            missed = len(head._log_text(before + 50, before + 10_050))
            assert missed < served("/api/v0/logs/stream") < min(whole // 10, 4 * missed)
            assert served("/api/v0/logs/file") == 0

            await reset_when_streams_closed()
            head.shape.log_lines = before + 20_050  # the job ended after 10,000 more
            got.extend(await tail.remainder())
            assert missed <= served("/api/v0/logs/file") < min(whole // 10, 4 * missed)
            assert served("/api/v0/logs/stream") == 0
            assert bytes(got) == head._log_text(before - 100, before + 20_050)  # none lost or repeated
            assert (tail.windows, tail.replays) == (3, 0)
