"""Provides the CPU ledger: the machine's busy CPU seconds spent during each test (setup, call and
teardown together, so a session fixture's start is charged to its first user and its stop to its last).

Opt-in, for finding what to cut (docs/testing.md, "How to keep it"): `COCKPIT_CPU_LEDGER=FILE` writes
one tab-separated line per test (busy CPU-s, wall s, tier, node id), the costliest first. The figure is
the whole machine's, so run one part alone (`pytest --part cluster`, `--part hosts`, `--part rest`) for a
ledger that belongs to its tests; Ray's daemons, which no test waits for, are counted where they burn.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def busy_cpu_seconds() -> float:
    """The machine's CPU time so far in user, nice, system, irq and softirq (idle and iowait left out)."""
    with open("/proc/stat") as stat:
        fields = stat.readline().split()[1:8]
    user, nice, system, _idle, _iowait, irq, softirq = (int(f) for f in fields)
    return (user + nice + system + irq + softirq) / TICK


class CpuLedger:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: list[tuple[float, float, str, str]] = []

    def record(self, nodeid: str, tier: str, cpu: float, wall: float) -> None:
        self.rows.append((cpu, wall, tier, nodeid))

    def write(self) -> str:
        """Write the ledger; return its one-line summary."""
        rows = sorted(self.rows, reverse=True)
        lines = [f"{cpu:.1f}\t{wall:.1f}\t{tier}\t{nodeid}" for cpu, wall, tier, nodeid in rows]
        self.path.write_text("cpu_s\twall_s\ttier\ttest\n" + "\n".join(lines) + "\n")
        total = sum(r[0] for r in rows)
        return f"CPU ledger: {len(rows)} tests, {total:.0f} busy CPU-s on the machine, in {self.path}"


def start() -> tuple[float, float]:
    return busy_cpu_seconds(), time.monotonic()
