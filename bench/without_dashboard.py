"""Provides what the cockpit costs a head that runs Ray without its dashboard:
`python bench/without_dashboard.py [--seconds S]` (run from the repository root).

Starts a real head with `--include-dashboard=false` and one node (tests/harness/headless.py), then runs
the cockpit's programs as they run on such a head (here the head is this machine, so they run as local
processes, no SSH: the head's side alone is measured): the probe (is the dashboard off?), then the
nodes program for S seconds. Prints the probe's wall time, the nodes program's time to its first nodes,
its CPU (user + system, from /proc, after the first nodes came) per minute and as a share of a core, its
resident memory, and the bytes of its lines (a whole table, a heartbeat). Stops everything on exit.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cockpit.core.connect.programs import LocalProgram
from cockpit.core.connect.without_dashboard import (
    FAST_START,
    FOLLOW_INTERVAL_S,
    head_program,
    probe_of,
)
from tests.harness.headless import headless_head, programs_on_head

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(") ", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


async def measure(port: int, seconds: float) -> dict[str, float]:
    started = time.monotonic()
    probe = await LocalProgram.start(head_program(port, None), "python3", flags=FAST_START)
    first = ""
    async for line in probe.lines():
        first = first or line
    probe_s = time.monotonic() - started
    assert probe_of(first).dashboard == "off", first

    started = time.monotonic()
    program = await LocalProgram.start(head_program(port, FOLLOW_INTERVAL_S), "python3", flags=FAST_START)
    sizes: dict[str, list[int]] = {"nodes": [], "same": [], "error": []}
    first_nodes_s = 0.0
    cpu_start = 0.0
    pid = 0
    try:
        async for line in program.lines():
            kind = "nodes" if '"nodes"' in line else "same" if '"same"' in line else "error"
            if kind == "error" and '"dashboard"' in line:
                continue
            sizes[kind].append(len(line.encode()))
            if kind == "nodes" and not first_nodes_s:
                first_nodes_s = time.monotonic() - started
                (pid,) = programs_on_head()
                cpu_start, window_start = cpu_seconds(pid), time.monotonic()
            if first_nodes_s and time.monotonic() - window_start >= seconds:
                break
        cpu = cpu_seconds(pid) - cpu_start
        window = time.monotonic() - window_start
        rss = rss_mib(pid)
    finally:
        await program.stop()
    return {
        "probe_s": probe_s,
        "first_nodes_s": first_nodes_s,
        "cpu_s_per_min": cpu / window * 60,
        "core_percent": cpu / window * 100,
        "rss_mib": rss,
        "nodes_line_bytes": max(sizes["nodes"], default=0),
        "heartbeat_bytes": max(sizes["same"], default=0),
        "lines": float(sum(len(v) for v in sizes.values())),
        "errors": float(len(sizes["error"])),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as state, headless_head(Path(state)) as head:
        time.sleep(10)  # the second node joins: its line is the table of two
        result = asyncio.run(measure(head.dashboard_port, args.seconds))
    for key, value in result.items():
        print(f"{key:18} {value:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
