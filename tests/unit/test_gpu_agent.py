"""`cockpit gpu-agent`: its JSON lines, the no-GPU message, and real NVML where an NVIDIA GPU exists."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

from cockpit.core.gpu.agent import run
from cockpit.core.snapshots import NA, GpuProcess, GpuSample
from tests.harness.gpus import gpu_present

HAS_GPU = gpu_present()


class RecordedBackend:
    """Readings as an AMD node reports them (no temperature), replayed: the agent's output format alone."""

    vendor = "amd"

    def __init__(self) -> None:
        self.closed = False

    def sample(self) -> list[GpuSample]:
        return [
            GpuSample(
                index=0,
                name="AMD Instinct MI300X",
                uuid="GPU-0",
                utilization=37.0,
                memory_used_mib=12288.0,
                memory_total_mib=196608.0,
                power_w=412.0,
                temperature_c=NA,
                processes=(GpuProcess(pid=11500, memory_mib=3072.0, utilization=NA),),
            )
        ]

    def close(self) -> None:
        self.closed = True


def test_json_lines_with_null_for_missing_readings() -> None:
    out = io.StringIO()
    backend = RecordedBackend()
    assert run(backend, out, interval=0.5, count=2, sleep=lambda _s: None) == 2
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(lines) == 2 and backend.closed
    gpu = lines[0]["gpus"][0]
    assert lines[0]["vendor"] == "amd" and gpu["utilization"] == 37.0 and gpu["temperature_c"] is None
    assert gpu["processes"] == [{"pid": 11500, "memory_mib": 3072.0}]


@pytest.mark.skipif(HAS_GPU, reason="this machine has a GPU: the no-GPU message cannot be seen here")
def test_no_gpu_exits_1_with_the_message() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "cockpit.cli", "gpu-agent", "--count", "1"], capture_output=True, text=True
    )
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith("cockpit: no NVIDIA or AMD GPU found (")
    assert result.stderr.count("\n") == 1


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="no NVIDIA or AMD GPU on this machine (runs where NVML sees one)")
def test_real_gpus_are_sampled() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "cockpit.cli", "gpu-agent", "--count", "3", "--interval", "0.2"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(lines) == 3 and lines[0]["time"] < lines[2]["time"]
    for gpu in lines[-1]["gpus"]:
        assert gpu["name"] and gpu["memory_total_mib"] > 0
        assert gpu["utilization"] is None or 0 <= gpu["utilization"] <= 100
