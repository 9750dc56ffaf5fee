"""Provides the NVIDIA backend: NVML through pynvml (the `nvidia-ml-py` package), no subprocesses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from cockpit.core.gpu.errors import NoGpuFound
from cockpit.core.snapshots import NA, GpuProcess, GpuSample, Metric

T = TypeVar("T")


class NvmlBackend:
    vendor = "nvidia"

    def __init__(self) -> None:
        try:
            import pynvml
        except ImportError:
            raise NoGpuFound("NVIDIA: pynvml is not installed (pip install 'ray-cockpit[nvidia]')") from None
        self._nvml: Any = pynvml
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            raise NoGpuFound(f"NVIDIA: NVML did not start ({exc})") from None
        count = pynvml.nvmlDeviceGetCount()
        if count == 0:
            pynvml.nvmlShutdown()
            raise NoGpuFound("NVIDIA: NVML sees no GPU")
        # Handles are looked up once: NVML calls cost ~0.3 ms each, a lookup is one more.
        self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]

    def _get(self, call: Callable[..., T], *args: Any) -> T | None:
        try:
            return call(*args)
        except self._nvml.NVMLError:
            return None

    def sample(self) -> list[GpuSample]:
        nvml = self._nvml
        samples = []
        for index, handle in enumerate(self._handles):
            memory = self._get(nvml.nvmlDeviceGetMemoryInfo, handle)
            rates = self._get(nvml.nvmlDeviceGetUtilizationRates, handle)
            power = self._get(nvml.nvmlDeviceGetPowerUsage, handle)
            temperature = self._get(nvml.nvmlDeviceGetTemperature, handle, nvml.NVML_TEMPERATURE_GPU)
            name = self._get(nvml.nvmlDeviceGetName, handle) or ""
            uuid = self._get(nvml.nvmlDeviceGetUUID, handle) or ""
            processes = []
            for proc in self._get(nvml.nvmlDeviceGetComputeRunningProcesses, handle) or []:
                used = getattr(proc, "usedGpuMemory", None)
                processes.append(GpuProcess(pid=int(proc.pid), memory_mib=_mib(used), utilization=NA))
            samples.append(
                GpuSample(
                    index=index,
                    name=name.decode() if isinstance(name, bytes) else str(name),
                    uuid=uuid.decode() if isinstance(uuid, bytes) else str(uuid),
                    utilization=float(rates.gpu) if rates is not None else NA,
                    memory_used_mib=_mib(memory.used if memory is not None else None),
                    memory_total_mib=_mib(memory.total if memory is not None else None),
                    power_w=float(power) / 1000.0 if power is not None else NA,
                    temperature_c=float(temperature) if temperature is not None else NA,
                    processes=tuple(processes),
                )
            )
        return samples

    def close(self) -> None:
        self._nvml.nvmlShutdown()


def _mib(value: Any) -> Metric:
    if value is None or not isinstance(value, int) or value < 0:
        return NA
    return value / 2**20
