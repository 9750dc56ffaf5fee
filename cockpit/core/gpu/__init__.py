"""Provides the cockpit's own GPU sampler: one backend protocol, NVIDIA (pynvml) and AMD (amdsmi).

The vendor libraries are optional extras, imported only when a backend is asked for, and initialised
once. Every reading a vendor does not give (AMD temperature, a failing NVML call) is NA, never zero.
"""

from __future__ import annotations

from typing import Protocol

from cockpit.core.errors import CockpitError
from cockpit.core.snapshots import GpuSample


class NoGpuFound(CockpitError):
    """No usable NVIDIA or AMD GPU on this machine."""


class GpuBackend(Protocol):
    vendor: str
    """"nvidia" or "amd"."""

    def sample(self) -> list[GpuSample]:
        """One reading of every GPU, all fields in one pass."""
        ...

    def close(self) -> None: ...


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
