"""The shared driver-log feed on the real local cluster: one stream per job however many read it, opened
with the first reader and closed when the last one leaves; a reader that joins late gets the last lines
it asked for, one that comes back gets every byte since it left (no line lost or repeated, also after
the stream was closed and opened again), and one that asks for the whole file gets it from byte 0 (read
once from the file: no second stream). The streams are counted on the dashboard client itself."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from textual.app import App

from cockpit.core.cluster.dashboard import DashboardClient
from cockpit.core.logs.sources import LogSource
from cockpit.core.snapshots import JobRow
from cockpit.ui.feeds.driver_logs import START, DriverLogs
from tests.harness.cluster import ClusterHandle
from tests.harness.debug_jobs import _stop
from tests.harness.run import until
from tests.harness.streams import CountedStreams

pytestmark = pytest.mark.cluster

COUNTER = """\
import time
for i in range(1500):
    print(f"line {i:05d}")
print("line 01500", flush=True)
for i in range(1501, 1000000):
    time.sleep(0.05)
    print(f"line {i:05d}", flush=True)
"""


class Read:
    """What one reader was given."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.caught_up = False

    def took(self, chunk: bytes, _history: bool) -> None:
        self.data += chunk

    def done(self) -> None:
        self.caught_up = True

    def numbers(self) -> list[int]:
        """The counter's numbers in the complete lines given (Ray's own lines before them left out)."""
        lines = bytes(self.data).split(b"\n")[:-1]
        return [int(line.split()[1]) for line in lines if line.startswith(b"line ")]


def consecutive(numbers: list[int]) -> bool:
    return numbers == list(range(numbers[0], numbers[0] + len(numbers))) if numbers else False


async def running(client: DashboardClient, key: str, pilot: Any) -> JobRow:
    """KEY once it runs and its first 1,501 lines are written (more than the feed keeps)."""
    for _ in range(240):
        job = await client.job(key)
        if job.status == "RUNNING" and job.driver_node_id:
            written = await client.log_bytes(LogSource.driver(job).params(), lines=-1)
            if b"line 01500\n" in written:
                return job
        await pilot.pause(0.5)
    raise AssertionError(f"{key} did not run within 120 s")


async def test_one_stream_per_job_from_the_first_reader_to_the_last(
    ray_cluster: ClusterHandle, tmp_path: Path
) -> None:
    script = tmp_path / "counter.py"
    script.write_text(COUNTER)
    async with ray_cluster.client() as client:
        key = await client.submit_job(
            {"entrypoint": f"{sys.executable} -u {script}", "submission_id": "shared-driver-log"}
        )
    try:
        async with ray_cluster.client() as client:
            streams = CountedStreams(client)

            async def dashboard() -> DashboardClient:
                return client

            app: App[None] = App()
            async with app.run_test() as pilot:
                job = await running(client, key, pilot)
                logs = DriverLogs(app, dashboard)
                assert logs.open_streams(key) == 0 and streams.opened == 0

                # The first reader opens the stream: its last 5 lines, then each new one.
                a = Read()
                first = logs.join(job, a.took, lines=5)
                await until(pilot, lambda: len(a.numbers()) >= 8, timeout=60)
                assert (streams.open, streams.opened, logs.open_streams(key)) == (1, 1, 1)
                assert consecutive(a.numbers()) and a.numbers()[0] >= 1500 - 5

                # A second reader, late: the last 3 lines of what the stream brought, on the same stream.
                b = Read()
                second = logs.join(job, b.took, lines=3)
                assert len(bytes(b.data).splitlines()) == 3 and a.data.endswith(b.data)
                await until(pilot, lambda: len(b.numbers()) >= 6, timeout=60)
                assert (streams.open, streams.opened) == (1, 1)

                # The first leaves: the stream stays for the second.
                first.leave()
                seen = len(b.numbers())
                await until(pilot, lambda: len(b.numbers()) >= seen + 3, timeout=60)
                assert (streams.open, streams.opened, logs.open_streams(key)) == (1, 1, 1)
                assert consecutive(b.numbers())

                # The last leaves: the stream closes.
                second.leave()
                await until(pilot, lambda: streams.open == 0, timeout=30)
                assert logs.open_streams(key) == 0 and logs.logs == {}
                left_at = b.numbers()[-1]
                await pilot.pause(1.0)  # lines are written while nobody reads

                # It comes back: the stream opens again, and it gets every line since it left.
                c = Read()
                back = logs.join(job, c.took, since=second.position)
                await until(pilot, lambda: len(c.numbers()) >= 25, timeout=60)
                assert (streams.open, streams.opened) == (1, 2)
                assert c.numbers()[0] == left_at + 1 and consecutive(b.numbers() + c.numbers())

                # The whole file from byte 0 (the curves' history): what is before the kept lines is
                # read once from the file, then the stream's; still one stream.
                d = Read()
                latest = c.numbers()[-1]
                whole = logs.join(job, d.took, since=START, caught_up=d.done)
                await until(pilot, lambda: d.caught_up and len(d.numbers()) > latest + 3, timeout=90)
                assert d.numbers()[0] == 0 and consecutive(d.numbers())
                assert (streams.open, streams.opened, streams.most) == (1, 2, 1)

                back.leave()
                whole.leave()
                await until(pilot, lambda: streams.open == 0, timeout=30)
                assert logs.logs == {}
    finally:
        await asyncio.to_thread(_stop, ray_cluster, key)
