"""Provides the text of the GPU view's cells: bars, sparklines, memory, power, temperature and ages.

Plain functions of numbers, shared by the GPU list and the heatmap's detail line, so both say the same
thing the same way (units and ages always shown, N/A where the vendor reported nothing).
"""

from __future__ import annotations

from collections.abc import Sequence

from cockpit.core.snapshots import NA, Metric

_EIGHTHS = " ▏▎▍▌▋▊▉█"
_SPARKS = "▁▂▃▄▅▆▇█"


def bar(fraction: float, width: int) -> tuple[str, str]:
    """A horizontal bar in eighth blocks: (filled part, empty part), together `width` cells."""
    fraction = max(0.0, min(1.0, fraction))
    eighths = round(fraction * width * 8)
    full, part = divmod(eighths, 8)
    filled = "█" * full + (_EIGHTHS[part] if part and full < width else "")
    return filled, " " * (width - len(filled))


def sparkline(values: Sequence[int | None]) -> str:
    """One cell per value (0-100); a gap without samples is a blank."""
    out = []
    for value in values:
        if value is None:
            out.append(" ")
        else:
            out.append(_SPARKS[min(7, value * 8 // 101)])
    return "".join(out)


def gpu_label(index: int) -> str:
    """A GPU's number; a MIG slice (Ray numbers it GPU x 1000 + slice) reads "GPU:slice"."""
    return f"{index // 1000}:{index % 1000}" if index >= 1000 else str(index)


def gib(mib: Metric) -> str:
    return "N/A" if mib is NA else f"{float(mib) / 1024:.1f}"


def allocated(mib: Metric) -> str:
    """A process's allocated GPU memory after its name (" 3.0 GiB"); nothing when not reported."""
    return "" if mib is NA else f" {gib(mib)} GiB"


def memory(used: Metric, total: Metric) -> str:
    if used is NA or total is NA:
        return "N/A"
    return f"{gib(used)}/{gib(total)} GiB"


def watts(power: Metric) -> str:
    return "N/A" if power is NA else f"{float(power):.0f} W"


def celsius(temperature: Metric) -> str:
    return "N/A" if temperature is NA else f"{float(temperature):.0f}°C"


def age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.0f}h"


def util_text(utilization: Metric) -> str:
    return "N/A" if utilization is NA else f"{float(utilization):.0f}%"
