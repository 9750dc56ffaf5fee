"""A head without its dashboard, without Ray: the probe run as it runs on a head against real processes
that look like Ray's `dashboard.py` (with and without `--disable-frontend`), the node rows read into
snapshots, and the dashboard client's one question when nothing answers at its port (a real closed
port)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cockpit.core.cluster.dashboard import DashboardClient
from cockpit.core.cluster.errors import DashboardOff, DashboardUnreachable
from cockpit.core.cluster.transport import ASK_WHY_EVERY_S
from cockpit.core.connect.programs import LocalProgram, NodeProgram
from cockpit.core.connect.without_dashboard import (
    FAST_START,
    HeadOverSsh,
    head_program,
    nodes_of,
    probe_of,
    sentence,
    state_message,
)
from tests.harness.hostile import FRAGMENTS
from tests.harness.sshd import find_free_port


async def local_start(program: str) -> NodeProgram:
    """The head is this machine: the program as a local process (the SSH session is the other tests')."""
    return await LocalProgram.start(program, "python3", flags=FAST_START)


@pytest.fixture
def fake_dashboard(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """A free port and a `.../dashboard/dashboard.py` file that only sleeps: started by the tests with
    Ray's own flags, it is what the probe looks for."""
    script = tmp_path / "ray" / "dashboard" / "dashboard.py"
    script.parent.mkdir(parents=True)
    script.write_text("import time\ntime.sleep(60)\n")
    yield find_free_port(), script


def start_like_ray(
    script: Path, port: int, *flags: str, python: str = sys.executable
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            python,
            "-u",
            str(script),
            "--host=127.0.0.1",
            f"--port={port}",
            "--gcs-address=1.2.3.4:6379",
            *flags,
        ]
    )


async def test_the_probe_tells_off_from_on_from_absent(fake_dashboard: tuple[int, Path]) -> None:
    port, script = fake_dashboard
    head = HeadOverSsh("head-node", port, local_start)
    assert await head.why_unreachable() is None  # no such process: the usual "cannot reach" stands
    on = start_like_ray(script, port)
    try:
        assert await head.why_unreachable() is None  # a dashboard that runs: starting, or too busy
    finally:
        on.kill()
        on.wait()
    off = start_like_ray(script, port, "--modules-to-load=UsageStatsHead", "--disable-frontend")
    other = start_like_ray(script, find_free_port(), "--disable-frontend")  # another cluster's port
    try:
        assert await head.why_unreachable() == sentence("head-node")
        program = await local_start(head_program(port, None))
        lines = [line async for line in program.lines()]
        probe = probe_of(lines[0])
        assert (probe.dashboard, probe.python, probe.gcs_address) == ("off", sys.executable, "1.2.3.4:6379")
    finally:
        for proc in (off, other):
            proc.kill()
            proc.wait()


async def test_without_ray_the_head_says_so_and_gives_no_nodes(fake_dashboard: tuple[int, Path]) -> None:
    """The interpreter of the fake dashboard has no Ray: the nodes program says why in one sentence."""
    port, script = fake_dashboard
    python = "/usr/bin/python3"
    if subprocess.run([python, "-c", "import ray"], capture_output=True).returncode == 0:
        pytest.skip(f"{python} has Ray: no interpreter without it here")
    off = start_like_ray(script, port, "--disable-frontend", python=python)
    head = HeadOverSsh("head-node", port, local_start)
    try:
        with pytest.raises(DashboardUnreachable) as raised:
            await head.nodes()
        assert str(raised.value).startswith(
            f"the head's Ray on head-node gave no nodes (the head's Ray cannot be imported by {python} ("
        )
    finally:
        await head.close()
        off.kill()
        off.wait()


def test_probe_lines_that_are_not_the_probes_read_as_absent() -> None:
    for line in ("", "not json", "[]", '{"dashboard": "maybe"}', '{"dashboard": 1}', *FRAGMENTS):
        assert probe_of(line).dashboard == "absent"


def test_node_rows_become_snapshots_head_first_with_the_dashboards_death_words() -> None:
    rows = [
        {
            "node_id": "b" * 56,
            "node_ip": "10.0.0.2",
            "node_name": "worker",
            "state": "DEAD",
            "is_head_node": False,
            "resources_total": {"CPU": 8.0, "GPU": 4.0},
            "start_time_ms": 2000,
            "end_time_ms": 9000,
            "death_reason": "UNEXPECTED_TERMINATION",
            "death_reason_message": "health check failed",
        },
        {
            "node_id": "a" * 56,
            "node_ip": "10.0.0.1",
            "node_name": "head",
            "state": "ALIVE",
            "is_head_node": True,
            "resources_total": {"CPU": 4.0},
            "start_time_ms": 1000,
            "end_time_ms": 0,
            "death_reason": "",
            "death_reason_message": "",
        },
        "not a row",
        {"node_id": 7, "state": None, "death_reason": ["x"]},
    ]
    head, odd, worker = nodes_of(rows)  # head first, then by join time (unknown first)
    assert head.is_head and head.alive and head.logical_cpus == 4.0 and head.state_message == ""
    assert worker.state == "DEAD" and worker.logical_gpus == 4.0 and worker.start_time == 2.0
    assert worker.state_message == "Unexpected termination: health check failed"
    assert odd.state == "UNKNOWN" and odd.node_id == "7" and odd.state_message == ""
    assert nodes_of("not a list") == ()


def test_death_words_are_ray_dashboards() -> None:
    assert state_message("AUTOSCALER_DRAIN_IDLE", "") == "Terminated due to idle (no Ray activity)"
    assert state_message("UNSPECIFIED", "killed") == "killed"
    assert state_message("", "") == ""


async def test_the_client_asks_why_once_then_says_it_without_asking() -> None:
    asked: list[int] = []

    async def why() -> str | None:
        asked.append(1)
        return sentence("head-node")

    client = DashboardClient(f"http://127.0.0.1:{find_free_port()}", timeout=5, why_unreachable=why)
    try:
        results = await asyncio.gather(client.version(), client.jobs(), return_exceptions=True)
        assert [str(r) for r in results] == [sentence("head-node")] * 2
        assert all(isinstance(r, DashboardOff) and r.permanent for r in results)
        with pytest.raises(DashboardOff):
            async for _chunk in client.stream_log([("node_id", "x"), ("filename", "raylet.out")]):
                pass
        assert len(asked) == 1 and client.without_dashboard == sentence("head-node")
    finally:
        await client.close()


async def test_a_dashboard_that_is_just_down_stays_unreachable_and_is_asked_about_rarely() -> None:
    asked: list[int] = []

    async def why() -> str | None:
        asked.append(1)
        return None

    client = DashboardClient(f"http://127.0.0.1:{find_free_port()}", timeout=5, why_unreachable=why)
    try:
        for _ in range(3):
            with pytest.raises(DashboardUnreachable, match="cannot reach the Ray dashboard"):
                await client.version()
        assert len(asked) == 1  # at most once every ASK_WHY_EVERY_S
        assert ASK_WHY_EVERY_S >= 10
    finally:
        await client.close()
