"""Provides text snapshots: what a view drew, compared with the file under tests/ui/snapshots (each
line without its trailing blanks); a difference is shown as a unified diff.

Regenerate with COCKPIT_UPDATE_SNAPSHOTS=1 after a deliberate change, and read the diff.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

SNAPSHOTS = Path(__file__).resolve().parents[1] / "ui" / "snapshots"


def check_snapshot(name: str, text: str) -> None:
    path = SNAPSHOTS / name
    if os.environ.get("COCKPIT_UPDATE_SNAPSHOTS") == "1":
        path.write_text(text, encoding="utf-8")
    expected = path.read_text(encoding="utf-8")
    if _trimmed(text) != _trimmed(expected):
        diff = difflib.unified_diff(
            expected.splitlines(), text.splitlines(), "snapshot", "drawn", lineterm=""
        )
        raise AssertionError(
            f"{name} changed; if on purpose, rerun with COCKPIT_UPDATE_SNAPSHOTS=1\n" + "\n".join(diff)
        )


def _trimmed(text: str) -> list[str]:
    """TEXT's lines without their trailing blanks: a test's normalising of an age (`data 12s ago` to
    `data 0s ago`) shortens its line, and the padding after it says nothing."""
    return [line.rstrip() for line in text.split("\n")]
