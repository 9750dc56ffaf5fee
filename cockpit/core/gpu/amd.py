"""Provides the AMD backend: ROCm's `amdsmi` Python binding (no temperature is reported, as in Ray)."""

from __future__ import annotations

from typing import Any

from cockpit.core.gpu.errors import NoGpuFound
from cockpit.core.snapshots import NA, GpuProcess, GpuSample, Metric


class AmdBackend:
    vendor = "amd"

    def __init__(self) -> None:
        try:
            import amdsmi
        except ImportError:
            raise NoGpuFound("AMD: amdsmi is not installed (it comes with ROCm)") from None
        self._smi: Any = amdsmi
        try:
            amdsmi.amdsmi_init()
            self._handles = list(amdsmi.amdsmi_get_processor_handles())
        except Exception as exc:  # amdsmi raises its own exception types per call
            raise NoGpuFound(f"AMD: amdsmi did not start ({exc})") from None
        if not self._handles:
            amdsmi.amdsmi_shut_down()
            raise NoGpuFound("AMD: amdsmi sees no GPU")

    def _get(self, name: str, *args: Any) -> Any:
        try:
            return getattr(self._smi, name)(*args)
        except Exception:
            return None

    def sample(self) -> list[GpuSample]:
        samples = []
        for index, handle in enumerate(self._handles):
            activity = self._get("amdsmi_get_gpu_activity", handle) or {}
            vram = self._get("amdsmi_get_gpu_vram_usage", handle) or {}
            power = self._get("amdsmi_get_power_info", handle) or {}
            board = self._get("amdsmi_get_gpu_board_info", handle) or {}
            processes = []
            for proc in self._get("amdsmi_get_gpu_process_list", handle) or []:
                info = proc if isinstance(proc, dict) else {}
                memory = (info.get("memory_usage") or {}).get("vram_mem")
                if info.get("pid") is not None:
                    processes.append(
                        GpuProcess(pid=int(info["pid"]), memory_mib=_mib(memory), utilization=NA)
                    )
            watts = power.get("average_socket_power")
            samples.append(
                GpuSample(
                    index=index,
                    name=str(board.get("product_name", "")),
                    uuid=str(self._get("amdsmi_get_gpu_device_uuid", handle) or ""),
                    utilization=_number(activity.get("gfx_activity")),
                    memory_used_mib=_number(vram.get("vram_used")),
                    memory_total_mib=_number(vram.get("vram_total")),
                    power_w=_number(watts),
                    temperature_c=NA,
                    processes=tuple(processes),
                )
            )
        return samples

    def close(self) -> None:
        self._get("amdsmi_shut_down")


def _number(value: Any) -> Metric:
    return (
        float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else NA
    )


def _mib(value: Any) -> Metric:
    return value / 2**20 if isinstance(value, int) and value >= 0 else NA
