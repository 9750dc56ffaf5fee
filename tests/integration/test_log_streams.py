"""Logs against the real cluster: `cockpit logs`, and a stream cut mid-way that resumes exactly."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from cockpit.core.connection import open_connection
from cockpit.core.log_sources import LogSource, LogTail
from cockpit.core.targets import parse_target
from tests.harness.cluster import ClusterHandle
from tests.harness.run import run_cockpit as cockpit
from tests.harness.sshd import start_sshd

pytestmark = pytest.mark.cluster

COUNTER = (
    "import time\nfor i in range({n}):\n"
    "    print(f'line {{i:05d}} ' + 'x' * 60, flush=True)\n    time.sleep({pause})\n"
)


async def submit_counter(ray_cluster: ClusterHandle, tmp_path: Path, name: str, n: int, pause: float) -> str:
    script = tmp_path / f"{name}.py"
    script.write_text(COUNTER.format(n=n, pause=pause))
    async with ray_cluster.client() as client:
        return await client.submit_job({"entrypoint": f"{sys.executable} -u {script}", "submission_id": name})


async def test_logs_follow_prints_the_driver_log_and_returns_with_the_job(
    ray_cluster: ClusterHandle, tmp_path: Path
) -> None:
    job = await submit_counter(ray_cluster, tmp_path, "count-follow", n=150, pause=0.02)
    result = await asyncio.to_thread(cockpit, "logs", "local", job, "--follow")
    assert result.returncode == 0, result.stderr
    numbered = [line.split()[1] for line in result.stdout.splitlines() if line.startswith("line ")]
    assert numbered == [f"{i:05d}" for i in range(150)]  # every line, once, in order
    assert result.stdout.rstrip().endswith(f"{job}: SUCCEEDED")


def test_logs_of_an_actor_and_of_a_node_file(ray_cluster: ClusterHandle, demo_job: str) -> None:
    actor = cockpit("logs", "local", "--actor", "PolicyTrainer", "--lines", "20")
    assert actor.returncode == 0, actor.stderr
    assert "policy update step=" in actor.stdout or "PolicyTrainer up on" in actor.stdout
    head = ray_cluster.cluster.nodes[0]
    node_id = next(
        line.split()[0].rstrip("*")
        for line in cockpit("local", "status").stdout.splitlines()
        if line.split() and line.split()[0].endswith("*")
    )
    raylet = cockpit("logs", "local", "--node", node_id, "--file", "raylet.out", "--lines", "3")
    assert raylet.returncode == 0, raylet.stderr
    assert 1 <= len(raylet.stdout.splitlines()) <= 3 and "raylet" in raylet.stdout
    assert head.temp_dir  # the file read is the head node's own raylet.out


def test_logs_usage_errors_are_one_sentence(ray_cluster: ClusterHandle) -> None:
    both = cockpit("logs", "local", "some-job", "--actor", "x")
    assert both.returncode == 1 and both.stderr.startswith("cockpit: give exactly one of JOB")
    missing = cockpit("logs", "local", "--actor", "NoSuchActor")
    assert missing.returncode == 1 and "no actor with name 'NoSuchActor'" in missing.stderr


async def test_stream_cut_mid_way_resumes_without_gap_or_duplicate(
    ray_cluster: ClusterHandle, tmp_path: Path
) -> None:
    """The connection under the stream is killed twice; what arrived equals the file on disk."""
    server = start_sshd(tmp_path / "sshd")
    config = tmp_path / "config"
    config.write_text(server.ssh_config_entry("head-node"))
    options = ray_cluster.over_ssh(config)
    job_id = await submit_counter(ray_cluster, tmp_path, "count-cut", n=400, pause=0.02)
    events: list[str] = []
    received = bytearray()
    try:
        async with open_connection(parse_target("head-node"), options) as conn:
            client = conn.client
            while not (job := await client.job(job_id)).driver_node_id:
                await asyncio.sleep(0.2)
            tail = LogTail(client, LogSource.driver(job), lines=-1, on_event=events.append, interval=0.2)

            async def collect() -> None:
                async for chunk in tail.chunks():
                    received.extend(chunk)

            collector = asyncio.ensure_future(collect())
            for cut in range(2):
                while len(received) < 2000 * (cut + 1) and not collector.done():
                    await asyncio.sleep(0.1)
                server.kill_connections()
                await asyncio.sleep(1.5)
            while not (await client.job(job_id)).terminal:
                await asyncio.sleep(0.5)
            await asyncio.sleep(1.5)
            collector.cancel()
            received.extend(await tail.remainder())
    finally:
        server.stop()
    on_disk = (
        Path(ray_cluster.cluster.nodes[0].temp_dir) / "session_latest" / "logs" / f"job-driver-{job_id}.log"
    )
    assert tail.resumes >= 2, events
    assert any("resumed, no line lost or repeated" in e for e in events), events
    assert bytes(received) == on_disk.read_bytes()
    numbered = [line.split()[1] for line in received.decode().splitlines() if line.startswith("line ")]
    assert numbered == [f"{i:05d}" for i in range(400)]
