"""Provides how numbers read to a user: bytes, percentages, ages and durations, each with its unit."""

from __future__ import annotations

from cockpit.core.snapshots import NA, Metric


def human_bytes(value: Metric) -> str:
    if value is NA:
        return "N/A"
    number = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(number) < 1024 or unit == "TiB":
            return f"{number:.0f} {unit}" if unit == "B" else f"{number:.1f} {unit}"
        number /= 1024
    return f"{number:.1f} TiB"


def percent(value: Metric) -> str:
    return "N/A" if value is NA else f"{float(value):.0f}%"


def duration(seconds: float) -> str:
    """Compact duration: 42s, 3m05s, 2h07m."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{(seconds % 3600) // 60:02d}m"


def ago(seconds: float | None) -> str:
    return "never" if seconds is None else f"{duration(seconds)} ago"
