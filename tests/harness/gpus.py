"""Provides what GPU tests share: whether this machine has a GPU, and the stand-in NVML for those without."""

from __future__ import annotations

from pathlib import Path

from cockpit.core.gpu import NoGpuFound, detect

FAKE_NVML = Path(__file__).resolve().parents[1] / "fixtures" / "fake_nvml"
"""A directory to put on PYTHONPATH: its `pynvml` shows two fixed GPUs (see its docstring)."""


def gpu_present() -> bool:
    """True where NVML or amdsmi sees a GPU on this machine."""
    try:
        detect().close()
    except NoGpuFound:
        return False
    return True
