"""The GPU list on this machine's real GPUs (`gpu`-marked: skipped where NVML or amdsmi sees none).

Two real paths to the screen: the high-resolution agent the cockpit ships to nodes, and the GPU readings
Ray's own reporter takes on a node (its `gpu_providers` module, as the dashboard's node summary carries
them). One GPU is kept busy by a process that holds memory on it (PyTorch, where this Python has it), so
the rows must show that GPU busy, that process's pid and memory, and the actor that owns the pid.

Set COCKPIT_GPU_SCREENSHOTS to a directory to keep what the list looks like at 80x24 and 200x50 (SVG).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from textual.app import App, ComposeResult

from cockpit.core.cluster.parse import node_from_summary
from cockpit.core.gpu.agents import AgentReading, start_local_agent, stream_readings
from cockpit.core.gpu.board import GpuBoard
from cockpit.core.snapshots import NA, ActorRow, GpuSample, NodeSnapshot
from cockpit.ui.widgets.gpu_list import GpuList
from tests.harness.gpus import gpu_present
from tests.harness.synthetic import synthetic_nodes

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not gpu_present(), reason="no NVIDIA or AMD GPU here (runs where NVML sees one)"),
]

HAS_TORCH = importlib.util.find_spec("torch") is not None
BUSY_PROGRAM = """
import sys, torch
a = torch.randn(8192, 8192, device="cuda")
hold = torch.empty(1 << 28, device="cuda")  # 1 GiB held, so the process shows with memory
torch.cuda.synchronize()
print("busy", flush=True)
while True:
    for _ in range(20):
        a = (a @ a).clamp_(-1, 1)
    torch.cuda.synchronize()
"""


class Host(App[None]):
    CSS = "GpuList { height: 1fr; }"

    def __init__(self, widget: GpuList) -> None:
        super().__init__()
        self.widget = widget

    def compose(self) -> ComposeResult:
        yield self.widget


@pytest.fixture(scope="module")
def busy_gpu() -> Iterator[int | None]:
    """The pid of a process keeping GPU 0 busy with 1 GiB held (None where this Python has no PyTorch)."""
    if not HAS_TORCH:
        yield None
        return
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "0"}
    proc = subprocess.Popen([sys.executable, "-c", BUSY_PROGRAM], stdout=subprocess.PIPE, text=True, env=env)
    try:
        started = proc.stdout is not None and proc.stdout.readline().strip() == "busy"
        assert started, "the GPU load did not start"
        yield proc.pid
    finally:
        proc.kill()
        proc.wait(30)


def nvml_truth() -> dict[int, tuple[str, float]]:
    """Index -> (name, total memory in MiB), read from NVML directly (NVIDIA only; {} elsewhere)."""
    try:
        import pynvml
    except ImportError:
        return {}
    pynvml.nvmlInit()
    try:
        out = {}
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(handle)
            total = pynvml.nvmlDeviceGetMemoryInfo(handle).total / 2**20
            out[index] = (name.decode() if isinstance(name, bytes) else name, total)
        return out
    finally:
        pynvml.nvmlShutdown()


def this_host(gpus: int) -> NodeSnapshot:
    """This machine as a Ray node whose dashboard has no GPU readings yet (`gpus` logical GPUs)."""
    node = synthetic_nodes(1, 0)[0]
    return replace(
        node, ip="127.0.0.1", logical_gpus=float(gpus), resources_total={"GPU": float(gpus)}, gpus=()
    )


def trainer_on(node: NodeSnapshot, pid: int) -> ActorRow:
    return ActorRow(
        actor_id="ab" * 16,
        class_name="PolicyTrainer",
        name="policy_0",
        state="ALIVE",
        job_id="01000000",
        node_id=node.node_id,
        pid=pid,
        num_restarts=0,
        required_resources={"GPU": 1.0},
    )


def busy_seen(gpus: tuple[GpuSample, ...], pid: int | None) -> bool:
    """GPU 0 busy (>= 50%) with PID's memory on it, or any reading at all when nothing is kept busy."""
    if pid is None:
        return bool(gpus)
    gpu0 = next((g for g in gpus if g.index == 0), None)
    return (
        gpu0 is not None
        and gpu0.utilization is not NA
        and float(gpu0.utilization) >= 50
        and any(held(p.pid, p.memory_mib, pid) for p in gpu0.processes)
    )


def held(pid: int, memory_mib: object, busy: int) -> bool:
    """The busy process, with its 1 GiB on the GPU."""
    return pid == busy and memory_mib is not NA and float(memory_mib) >= 1024  # type: ignore[arg-type]


async def agent_reading_with(pid: int | None) -> AgentReading:
    """The shipped agent's first reading that shows the busy GPU (60 s at most)."""
    found: asyncio.Future[AgentReading] = asyncio.get_running_loop().create_future()
    seen: list[AgentReading] = []

    def on_reading(reading: AgentReading) -> None:
        seen.append(reading)
        if busy_seen(reading.gpus, pid) and not found.done():
            found.set_result(reading)

    task = asyncio.create_task(stream_readings(lambda: start_local_agent(interval=0.5), on_reading, "here"))
    try:
        return await asyncio.wait_for(asyncio.shield(found), 60)
    except TimeoutError:
        pytest.fail(f"no agent reading showed the busy GPU in 60 s; last: {seen[-1:]!r}")
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def shown(board: GpuBoard, size: tuple[int, int], name: str) -> list[str]:
    """The GPU list's lines (every row, as text) at SIZE; an SVG of the screen kept where asked."""
    fleet = board.fleet()
    gpu_list = GpuList()
    host = Host(gpu_list)
    async with host.run_test(size=size) as pilot:
        gpu_list.show(fleet, "node", "", board.history, now=fleet.built_at)
        await pilot.pause()
        visible = ["".join(s.text for s in gpu_list.render_line(y)) for y in range(size[1])]
        assert all(len(line) == size[0] for line in visible)
        keep = os.environ.get("COCKPIT_GPU_SCREENSHOTS")
        if keep:
            host.save_screenshot(f"{name}-{size[0]}x{size[1]}.svg", keep)
        lines = gpu_list.text_lines()
        print(f"-- {name} at {size[0]}x{size[1]}", *lines, sep="\n")  # seen with -s, on a real GPU
        return lines


def check_rows(lines: list[str], truth: dict[int, tuple[str, float]], pid: int | None) -> None:
    text = "\n".join(lines)
    assert "no GPU telemetry" not in text, text
    for name, total in truth.values():
        assert name in text, (name, text)
        assert f"/{total / 1024:.1f} GiB" in text, (total, text)
    if pid is not None:
        gpu0 = next(line for line in lines if f"pid {pid}" in line or "PolicyTrainer" in line)
        assert re.search(r"PolicyTrainer policy_0 \(policy\) \d+\.\d GiB", gpu0), gpu0  # allocated by it
        assert "IDLE" not in gpu0, gpu0


async def test_shipped_agent_readings_on_the_gpu_list(busy_gpu: int | None) -> None:
    """High-resolution mode on this machine: the agent's readings of the real GPUs, as the list shows them."""
    reading = await agent_reading_with(busy_gpu)
    node = this_host(len(reading.gpus))
    board = GpuBoard()
    if busy_gpu is not None:
        board.ingest_actors([trainer_on(node, busy_gpu)])
    board.ingest_nodes([node], job_running=True)
    board.ingest_agent([node.node_id], reading.time, reading.gpus)
    fleet = board.fleet()
    assert {row.source for row in fleet.rows} == {"agent"} and len(fleet.rows) == len(reading.gpus)
    for gpu in reading.gpus:
        assert gpu.name and gpu.memory_total_mib is not NA and float(gpu.memory_total_mib) > 0
        assert gpu.power_w is NA or 0 < float(gpu.power_w) < 2000
        assert gpu.temperature_c is NA or 0 < float(gpu.temperature_c) < 120
    truth = nvml_truth()
    for size in ((80, 24), (200, 50)):
        check_rows(await shown(board, size, "agent"), truth, busy_gpu)


def ray_reporter_gpus() -> list[dict[str, Any]]:
    """What Ray's reporter agent puts in a node's summary: its GPU provider's readings, with the two steps
    `ReporterAgent._generate_stats_payload` takes (process dicts to a list, keys to camelCase)."""
    providers = pytest.importorskip("ray.dashboard.modules.reporter.gpu_providers")
    provider = providers.GpuMetricProvider()
    assert provider.initialize(), "Ray's reporter finds no GPU where the cockpit's agent finds one"
    readings = [dict(g) for g in provider.get_gpu_usage()]
    for gpu in readings:
        if isinstance(gpu.get("processes_pids"), dict):
            gpu["processes_pids"] = list(gpu["processes_pids"].values())

    def camel(key: str) -> str:
        first, *rest = key.split("_")
        return first + "".join(part.title() for part in rest)

    def google(value: Any) -> Any:
        if isinstance(value, dict):
            return {camel(k): google(v) for k, v in value.items()}
        if isinstance(value, list):
            return [google(v) for v in value]
        return value

    payload: list[dict[str, Any]] = json.loads(json.dumps([google(g) for g in readings]))
    return payload


async def test_ray_reporter_readings_on_the_gpu_list(busy_gpu: int | None, samples_dir: Path) -> None:
    """The dashboard's path: Ray's own GPU provider on the real GPUs, in a captured node summary entry,
    through the cockpit's parser to the list."""
    deadline = asyncio.get_running_loop().time() + 60
    while True:
        gpus = ray_reporter_gpus()
        entry = json.loads((samples_dir / "nodes_summary_fakeamd.json").read_text())["data"]["summary"][0]
        entry["gpus"] = gpus
        node = node_from_summary(entry)
        if busy_seen(node.gpus, busy_gpu):
            break
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"Ray's reporter never showed the busy GPU in 60 s; last: {gpus!r}")
        await asyncio.sleep(0.5)
    assert len(node.gpus) == len(gpus) > 0
    board = GpuBoard()
    if busy_gpu is not None:
        board.ingest_actors([trainer_on(node, busy_gpu)])
    board.ingest_nodes([node], job_running=True)
    assert {row.source for row in board.fleet().rows if row.gpu is not None} == {"dashboard"}
    truth = nvml_truth()
    for size in ((80, 24), (200, 50)):
        check_rows(await shown(board, size, "ray-reporter"), truth, busy_gpu)
