"""High-resolution mode's agent program: shipped as source to a fresh Python, read back as a stream."""

from __future__ import annotations

import ast
import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import asyncssh
import pytest

import cockpit
from cockpit.core.connect.programs import LocalProgram
from cockpit.core.gpu.agents import (
    MODULES,
    AgentReading,
    agent_program,
    parse_reading,
    start_local_agent,
    stream_readings,
)
from cockpit.core.gpu.errors import AgentFailed
from cockpit.core.snapshots import NA
from tests.harness.gpus import FAKE_NVML, gpu_present


def test_program_is_self_contained() -> None:
    program = agent_program(interval=0.5)
    compile(program, "<agent>", "exec")
    assert "_INTERVAL = 0.5" in program
    assert "import textual" not in program and "aiohttp" not in program


def test_program_ships_the_gpu_package_and_only_what_it_imports() -> None:
    """MODULES names every file of `cockpit/core/gpu/` and the cockpit modules they import, each after
    those it imports at its top (they run in that order), and not the launcher that stays home."""
    root = Path(cockpit.__file__).parent
    names = [name for name, _path in MODULES]
    imported = set()
    for position, (name, path) in enumerate(MODULES):
        if path is None:
            continue
        tree = ast.parse((root / path).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cockpit"):
                imported.add(node.module)
                if node in tree.body:
                    assert node.module in names[:position], f"{name} imports {node.module} before it is there"
    stays_home = {"core/gpu/agents.py", "core/gpu/board.py", "core/gpu/history.py"}
    gpu_files = {f"core/gpu/{p.name}" for p in (root / "core" / "gpu").glob("*.py")} - stays_home
    assert gpu_files <= {path for _name, path in MODULES}
    shipped_files = {name for name, path in MODULES if path is not None and path not in gpu_files}
    assert shipped_files == imported - {name for name, path in MODULES if path in gpu_files}
    assert "cockpit.core.gpu.agents" not in names


def test_parse_reading_tolerates_junk() -> None:
    assert parse_reading("not json") is None
    assert parse_reading('{"time": 1}') is None
    reading = parse_reading(
        '{"time": 5.5, "vendor": "amd", "gpus": [{"index": 1, "name": "MI300X", "uuid": "u", '
        '"utilization": 12, "memory_used_mib": 3, "memory_total_mib": 4, "power_w": 90.5, '
        '"temperature_c": null, "processes": [{"pid": 7, "memory_mib": 1}, "junk"]}, "junk"]}'
    )
    assert reading is not None and reading.time == 5.5 and reading.vendor == "amd"
    (gpu,) = reading.gpus
    assert gpu.index == 1 and gpu.utilization == 12.0 and gpu.temperature_c is NA and gpu.power_w == 90.5
    assert [p.pid for p in gpu.processes] == [7]


@pytest.mark.skipif(gpu_present(), reason="this machine has a GPU: the agent starts instead of failing")
async def test_agent_without_gpu_fails_with_one_line() -> None:
    readings: list[AgentReading] = []
    with pytest.raises(AgentFailed) as failed:
        await asyncio.wait_for(stream_readings(start_local_agent, readings.append, "here"), 60)
    message = str(failed.value)
    assert message.startswith("here: no NVIDIA or AMD GPU found (") and "\n" not in message
    assert readings == []


async def test_agent_streams_readings_through_the_nvml_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real agent program and NVML backend, over a stand-in `pynvml` with two GPUs."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(FAKE_NVML), os.environ.get("PYTHONPATH", "")]))
    readings: list[AgentReading] = []
    got_two = asyncio.Event()

    def on_reading(reading: AgentReading) -> None:
        readings.append(reading)
        if len(readings) >= 2:
            got_two.set()

    started: list[LocalProgram] = []

    async def start() -> LocalProgram:
        agent = await start_local_agent()
        started.append(agent)
        return agent

    task = asyncio.create_task(stream_readings(start, on_reading, "here"))
    await asyncio.wait_for(got_two.wait(), 60)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    first = readings[0]
    assert first.vendor == "nvidia" and [g.uuid for g in first.gpus] == ["GPU-fake-0", "GPU-fake-1"]
    assert first.gpus[1].memory_used_mib == 30 * 1024 and first.gpus[0].temperature_c == 60.0
    assert [p.pid for p in first.gpus[0].processes] == [4242]
    assert readings[1].time > first.time
    assert started[0]._proc.returncode is not None  # the agent process ended with the stream


class DroppedStream:
    """An agent whose SSH channel dies after one reading (what a link drop does to the stream)."""

    reason = ""

    def __init__(self) -> None:
        self.stopped = False

    async def lines(self) -> AsyncIterator[str]:
        yield '{"time": 1.0, "vendor": "nvidia", "gpus": []}'
        raise asyncssh.ConnectionLost("Connection lost")

    async def stop(self) -> None:
        self.stopped = True


async def test_a_broken_stream_is_one_line_and_the_agent_is_stopped() -> None:
    agent = DroppedStream()
    readings: list[AgentReading] = []

    async def start() -> DroppedStream:
        return agent

    with pytest.raises(AgentFailed, match=r"^node-3: the agent's stream broke \(Connection lost\)$"):
        await stream_readings(start, readings.append, "node-3")
    assert len(readings) == 1 and agent.stopped


async def test_an_agent_that_cannot_start_is_one_line() -> None:
    async def start() -> DroppedStream:
        raise OSError("No such file or directory: '/opt/venv/bin/python3'")

    with pytest.raises(AgentFailed, match=r"^node-3: cannot start the agent \(No such file"):
        await stream_readings(start, lambda _r: None, "node-3")


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_present(), reason="no NVIDIA or AMD GPU here (runs where NVML sees one)")
async def test_shipped_agent_streams_this_machines_real_gpus() -> None:
    """The program high-resolution mode ships to nodes, on real NVML (or amdsmi): what a node would send."""
    readings: list[AgentReading] = []
    got = asyncio.Event()

    def on_reading(reading: AgentReading) -> None:
        readings.append(reading)
        if len(readings) >= 2:
            got.set()

    task = asyncio.create_task(stream_readings(start_local_agent, on_reading, "here"))
    await asyncio.wait_for(got.wait(), 60)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    last = readings[-1]
    assert last.vendor in ("nvidia", "amd") and last.gpus
    for gpu in last.gpus:
        assert gpu.name and gpu.memory_total_mib is not NA and float(gpu.memory_total_mib) > 0
        assert gpu.utilization is NA or 0 <= float(gpu.utilization) <= 100
