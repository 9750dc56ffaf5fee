"""Provides what every GPU backend is: the `GpuBackend` protocol, and `NoGpuFound` when none can be."""

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
