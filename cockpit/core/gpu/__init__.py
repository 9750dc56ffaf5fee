"""Provides the cockpit's own GPU sampler: one backend protocol, NVIDIA (pynvml) and AMD (amdsmi).

The vendor libraries are optional extras, imported only when a backend is asked for, and initialised
once. Every reading a vendor does not give (AMD temperature, a failing NVML call) is NA, never zero.

What ships to GPU nodes as `cockpit gpu-agent` is this module, `errors`, `backend`, `nvml`, `amd` and `agent`
(`agents.MODULES` bundles them as source): they import nothing outside them but `cockpit.core.errors` and
`.snapshots`. The rest stays home: `agents` (starting and reading the agents), `board` (the GPU screen's
fleet of readings) and `history` (per-GPU history).
"""

from __future__ import annotations

from cockpit.core.gpu.backend import GpuBackend
from cockpit.core.gpu.errors import NoGpuFound

__all__ = ["GpuBackend", "NoGpuFound", "detect"]


def detect() -> GpuBackend:
    """The first vendor whose library loads and sees at least one GPU.

    Raises:
        NoGpuFound: with the reason of each vendor, in one line.
    """
    reasons = []
    from cockpit.core.gpu.nvml import NvmlBackend

    try:
        return NvmlBackend()
    except NoGpuFound as exc:
        reasons.append(str(exc))
    from cockpit.core.gpu.amd import AmdBackend

    try:
        return AmdBackend()
    except NoGpuFound as exc:
        reasons.append(str(exc))
    raise NoGpuFound(f"no NVIDIA or AMD GPU found ({'; '.join(reasons)}).")
