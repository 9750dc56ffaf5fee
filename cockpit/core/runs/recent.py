"""Provides the targets used recently (`cockpit connect`, `cockpit alerts`), for the runs overview.

Kept in `recent-targets.json` in the cockpit's state directory (`COCKPIT_STATE_DIR`, else the XDG state
home), mode 0600, the newest first, `MAX_RECENT` at most: only the TARGET as typed and when, never a
token or a URL's user and password (such a target is not kept). A file that cannot be read or written
costs the list, never the command.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

from cockpit.core.local.record import save_private_json, state_dir

MAX_RECENT = 20
FILE = "recent-targets.json"


def _path(directory: Path | None) -> Path:
    return (directory or state_dir()) / FILE


def recent(directory: Path | None = None) -> list[str]:
    """The targets used recently, the newest first ([] when none or unreadable)."""
    try:
        data = json.loads(_path(directory).read_text(encoding="utf-8"))
        entries = [e for e in data if isinstance(e, dict) and isinstance(e.get("target"), str)]
    except (OSError, ValueError, TypeError):
        return []
    return [e["target"] for e in entries][:MAX_RECENT]


def remember(target: str, directory: Path | None = None) -> None:
    """TARGET put first in the list (`local` and targets with a password are not kept)."""
    target = target.strip()
    if not target or target == "local" or "@" in target.partition("://")[2].partition("/")[0]:
        return  # `local` is always listed when it runs; `http://user:pass@host` holds a secret
    if len(target) > 300 or not target.isprintable():
        return
    path = _path(directory)
    kept = [{"target": target, "at": time.time()}] + [
        {"target": t, "at": 0.0} for t in recent(directory) if t != target
    ]
    with contextlib.suppress(OSError):
        save_private_json(path, kept[:MAX_RECENT])
