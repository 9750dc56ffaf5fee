"""Provides what the fault tests measure and where they put it: one `Figure` a fault, written to the JSON
file named by `COCKPIT_RELIABILITY_OUT` (merged by fault, so tests may run in any order or alone), from
which `scripts/reliability_table.py` renders `RELIABILITY.md`.

Without the variable a figure is only printed (the suite's ordinary runs write nothing in the tree).
`COCKPIT_FAULT_CUT_S` sets how long a cut link stays down: short in the suite (the behaviour is the same
once the SSH keepalive has given up), 60 s when the table is produced (`scripts/reliability_table.py
--run`), so the table's figures are those of the fault as the issue states it.
"""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path

OUT_ENV = "COCKPIT_RELIABILITY_OUT"
CUT_ENV = "COCKPIT_FAULT_CUT_S"


def cut_seconds(default: float) -> float:
    """How long a cut link stays down in this run (`COCKPIT_FAULT_CUT_S`, else DEFAULT)."""
    value = os.environ.get(CUT_ENV, "").strip()
    return float(value) if value else default


@dataclass(frozen=True)
class Figure:
    """One fault as a user meets it, measured by the test that caused it."""

    key: str
    """Orders the table's rows ("1-link-cut")."""
    fault: str
    """The fault, as it was caused ("login-to-head link down 60 s during `logs --follow` and the TUI")."""
    user_sees: str
    """What the user sees, in the product's own words (quoted from its output)."""
    notice_s: float | None
    """Seconds from the fault to the cockpit saying so (None: nothing to notice)."""
    recover_s: float | None
    """Seconds from the fault's end to data flowing again (None: does not apply)."""
    lines_lost: int | None
    """Log lines missing or repeated (None: no log followed)."""
    notes: str = ""


def record(figure: Figure) -> None:
    """Print FIGURE (seen with `-s`) and, when `COCKPIT_RELIABILITY_OUT` names a file, merge it in."""
    print(f"reliability: {figure}")
    out = os.environ.get(OUT_ENV, "").strip()
    if not out:
        return
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError):
        document = {}
    faults = document.get("faults", {})
    faults[figure.key] = {**asdict(figure), "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    machine = f"{os.cpu_count()} cores, {platform.system()} {platform.release()}"
    document = {"machine": machine, "faults": faults}
    path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
