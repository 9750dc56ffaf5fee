"""Provides what the cockpit knows of Ray versions: the range it supports.

The cockpit speaks to the dashboard's REST API, which changes little between releases; where it does
change, the client reads both shapes (see the README's "Ray versions" table). A cluster outside the
supported range gets one warning line, then best effort.
"""

from __future__ import annotations

import re

OLDEST_SUPPORTED = (2, 43)
"""The oldest Ray supported: the generation NeMo RL pins (2.43.0)."""
NEWEST_TESTED = (2, 60)
"""The newest Ray the whole suite runs against."""
TESTED = ("2.44.1", "2.47.1", "2.60.0")
"""The versions the test suite starts real heads of."""

_VERSION = re.compile(r"^\s*(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(text: str) -> tuple[int, int, int] | None:
    """`2.44.1` -> (2, 44, 1); `2.60.0rc1`, `2.9.3+dev` read their numbers; None for anything else."""
    found = _VERSION.match(text or "")
    if not found:
        return None
    major, minor, patch = found.groups()
    return int(major), int(minor), int(patch or 0)


def shown(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


def range_warning(text: str) -> str:
    """One line when the cluster's Ray is outside the supported range (or unreadable); else ""."""
    version = parse_version(text)
    if version is None:
        return f"the cluster reports Ray version {text!r}, which the cockpit cannot read: best effort."
    if version[:2] < OLDEST_SUPPORTED:
        return (
            f"this cluster runs Ray {text}, older than the oldest the cockpit supports "
            f"({shown(OLDEST_SUPPORTED)}): best effort; some views may be empty."
        )
    if version[:2] > NEWEST_TESTED:
        return (
            f"this cluster runs Ray {text}, newer than the newest the cockpit is tested with "
            f"({shown(NEWEST_TESTED)}): best effort."
        )
    return ""
