"""Provides how numbers read to a user: bytes, percentages, ages and durations, each with its unit; and
`parse_duration`, a duration as a user types one (`90s`, `10m`, `1h30m`: `--hang-after`, `hang_after:`)."""

from __future__ import annotations

import re

from cockpit.core.snapshots import NA, Metric

MAX_DURATION = 7 * 24 * 3600.0
"""The longest duration `parse_duration` accepts: more is a typo (`10h` for `10m`), not a wish."""


def human_bytes(value: Metric) -> str:
    if value is NA:
        return "N/A"
    number = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        shown = round(number) if unit == "B" else round(number, 1)
        if abs(shown) < 1024 or unit == "TiB":  # as shown: 1023.97 MiB is "1.0 GiB", not "1024.0 MiB"
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


_NUMBER = r"(\d+(?:\.\d*)?|\.\d+)"
_DURATION = re.compile(
    rf"(?:{_NUMBER}\s*h)?\s*(?:{_NUMBER}\s*m)?\s*(?:{_NUMBER}\s*s)?", re.IGNORECASE | re.ASCII
)
_SECONDS = re.compile(_NUMBER, re.ASCII)
_FORMS = "e.g. 90s, 10m, 1.5m, 1h30m, or 45 for seconds"


def parse_duration(text: str) -> float:
    """Seconds in TEXT: `90s`, `10m`, `1.5m`, `1h`, `1h30m`, `2m30s`, or a bare number of seconds; what
    `duration` writes (`3m05s`, `2h07m`) reads back.

    Raises:
        ValueError: one line saying what forms are accepted; for empty text, garbage, a sign, zero, or
            more than 7 days.
    """
    stripped = text.strip() if isinstance(text, str) else ""
    plain = _SECONDS.fullmatch(stripped)
    parts = None if plain else _DURATION.fullmatch(stripped)
    if plain:
        seconds = float(plain.group(1))
    elif parts and any(parts.groups()):
        hours, minutes, secs = (float(part or 0) for part in parts.groups())
        seconds = hours * 3600 + minutes * 60 + secs
    else:
        raise ValueError(f"{_shown(text)} is not a duration ({_FORMS}).")
    if not seconds > 0:
        raise ValueError(f"{_shown(text)} is no time at all: give more than 0 ({_FORMS}).")
    if seconds > MAX_DURATION:
        raise ValueError(f"{_shown(text)} is more than 7 days: give at most 168h.")
    return seconds


def _shown(text: object) -> str:
    """TEXT quoted for an error line: escaped (repr) and cut, so hostile input stays one short line."""
    value = str(text)
    return repr(value if len(value) <= 40 else value[:40] + "…")
