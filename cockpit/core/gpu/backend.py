"""Provides what every GPU backend is: the `GpuBackend` protocol (`errors.NoGpuFound` when none can be)."""

from __future__ import annotations

from typing import Protocol

from cockpit.core.snapshots import GpuSample


class GpuBackend(Protocol):
    vendor: str
    """"nvidia" or "amd"."""

    def sample(self) -> list[GpuSample]:
        """One reading of every GPU, all fields in one pass."""
        ...

    def close(self) -> None: ...
