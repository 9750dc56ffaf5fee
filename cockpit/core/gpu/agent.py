"""Provides `cockpit gpu-agent`: one JSON line per sample of every GPU of this machine.

Meant to run on a GPU node (started through the SSH link by the TUI's high-resolution mode), or on the
login node when it has GPUs. Each line: {"time": posix s, "vendor": ..., "gpus": [{index, name, uuid,
utilization, memory_used_mib, memory_total_mib, power_w, temperature_c, processes: [{pid, memory_mib}]}]}
with null for a reading the vendor does not give.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import IO, Any

from cockpit.core.gpu.backend import GpuBackend
from cockpit.core.snapshots import NA, GpuSample


def _value(metric: object) -> object:
    return None if metric is NA else metric


def sample_json(vendor: str, samples: list[GpuSample], when: float) -> str:
    gpus: list[dict[str, Any]] = []
    for gpu in samples:
        gpus.append(
            {
                "index": gpu.index,
                "name": gpu.name,
                "uuid": gpu.uuid,
                "utilization": _value(gpu.utilization),
                "memory_used_mib": _value(gpu.memory_used_mib),
                "memory_total_mib": _value(gpu.memory_total_mib),
                "power_w": _value(gpu.power_w),
                "temperature_c": _value(gpu.temperature_c),
                "processes": [{"pid": p.pid, "memory_mib": _value(p.memory_mib)} for p in gpu.processes],
            }
        )
    return json.dumps({"time": round(when, 3), "vendor": vendor, "gpus": gpus})


def run(
    backend: GpuBackend,
    out: IO[str],
    interval: float = 1.0,
    count: int | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Print `count` samples (forever when None), `interval` seconds apart; returns how many."""
    printed = 0
    try:
        while count is None or printed < count:
            started = time.monotonic()
            out.write(sample_json(backend.vendor, backend.sample(), time.time()) + "\n")
            out.flush()
            printed += 1
            if count is None or printed < count:
                sleep(max(0.0, interval - (time.monotonic() - started)))
    finally:
        backend.close()
    return printed
