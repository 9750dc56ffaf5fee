"""Provides text snapshots: what a view drew, compared with the file under tests/ui/snapshots.

Regenerate with COCKPIT_UPDATE_SNAPSHOTS=1 after a deliberate change, and read the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

SNAPSHOTS = Path(__file__).resolve().parents[1] / "ui" / "snapshots"


def check_snapshot(name: str, text: str) -> None:
    path = SNAPSHOTS / name
    if os.environ.get("COCKPIT_UPDATE_SNAPSHOTS") == "1":
        path.write_text(text, encoding="utf-8")
    expected = path.read_text(encoding="utf-8")
    assert text == expected, f"{name} changed; if on purpose, rerun with COCKPIT_UPDATE_SNAPSHOTS=1"
