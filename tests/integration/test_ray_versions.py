"""The cockpit against a real Ray 2.44 head (the generation NeMo RL and others pin), started from its own
cached virtualenv: its log API frames every chunk with a status byte unless asked for text, and reports
a failed read in the body. Followed logs must equal the file byte for byte, across a forced drop too."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from cockpit.core.log_sources import LogSource, LogTail
from cockpit.core.ray_api import DashboardClient, NotFound
from tests.harness.ray_versions import OldHead, old_head
from tests.harness.relay import relay
from tests.harness.run import run_cockpit

pytestmark = pytest.mark.ray_versions

OLD = "2.44.1"

COUNTER = """import time
for i in range(1, 61):
    print(f"line {i:04d} " + "x" * 40, flush=True)
    time.sleep(0.05)
"""


@pytest.fixture(scope="module")
def head() -> Iterator[OldHead]:
    with old_head(OLD) as started:
        yield started


async def node_id(client: DashboardClient) -> str:
    return next(node.node_id for node in (await client.node_table()).rows if node.is_head)


def test_status_names_the_old_version(head: OldHead) -> None:
    answer = run_cockpit("status", head.url, "--json")
    assert answer.returncode == 0, answer.stderr
    assert json.loads(answer.stdout)["ray_version"] == OLD


def test_a_token_file_on_a_ray_without_token_auth_is_one_line(head: OldHead, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("not-needed-here\n")
    token.chmod(0o600)
    answer = run_cockpit("status", head.url, "--token-file", str(token))
    assert answer.returncode == 0, answer.stderr
    notes = [line for line in answer.stderr.splitlines() if line.strip()]
    assert notes == [
        "cockpit: note: this cluster's Ray has no token auth (it came with Ray 2.52): "
        "--token-file is not used."
    ]


def test_followed_driver_log_equals_the_file(head: OldHead) -> None:
    script = head.temp_dir / "counter.py"
    script.write_text(COUNTER)

    async def submit() -> str:
        async with DashboardClient(head.url) as client:
            return await client.submit_job(
                {"entrypoint": f"python {script}", "submission_id": "count-follow"}
            )

    job = asyncio.run(submit())
    followed = run_cockpit("logs", head.url, job, "--follow", timeout=120)
    assert followed.returncode == 0, followed.stderr
    file = (head.logs / f"job-driver-{job}.log").read_bytes()
    # stdout is the driver log, then one line with the job's end.
    body, _, last = followed.stdout.encode().rstrip(b"\n").rpartition(b"\n")
    assert body + b"\n" == file and b"line 0060" in file
    assert last.decode().strip() == f"{job}: SUCCEEDED"
    assert not any(line.startswith(b"1line") for line in file.splitlines())  # the framing is gone


async def test_a_stream_cut_mid_way_resumes_with_the_file_s_bytes(head: OldHead) -> None:
    first = b"".join(b"step=%d reward=0.%d\n" % (i, i % 10) for i in range(4000))
    whole = first + b"".join(b"step=%d reward=0.%d\n" % (i, i % 10) for i in range(4000, 4200))
    path = head.logs / "cut-mid-way.log"
    path.write_bytes(first)
    received = bytearray()
    events: list[str] = []
    async with relay(head.url) as link, DashboardClient(link.url) as client:
        source = LogSource.file(await node_id(client), path.name)
        tail = LogTail(client, source, lines=-1, on_event=events.append, interval=0.2)

        async def collect() -> None:
            async for chunk in tail.chunks():
                received.extend(chunk)

        collector = asyncio.ensure_future(collect())
        while len(received) < len(first) and not collector.done():
            await asyncio.sleep(0.05)
        link.cut()
        with path.open("ab") as log:
            log.write(whole[len(first) :])
        while len(received) < len(whole) and not collector.done():
            await asyncio.sleep(0.05)
        collector.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await collector
    assert bytes(received) == whole
    assert tail.resumes >= 1, events


async def test_a_missing_file_is_a_clear_not_found(head: OldHead) -> None:
    async with DashboardClient(head.url) as client:
        node = await node_id(client)
        with pytest.raises(NotFound, match="not found"):
            await client.log_bytes([("node_id", node), ("filename", "no-such.log")], lines=10)
        with pytest.raises(NotFound, match="not found"):
            await client.log_file(node_id=node, filename="no-such.log", lines=10)
