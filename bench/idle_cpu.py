"""Provides the idle-CPU benchmark: the cockpit TUI left alone on a cluster vs a minimal Textual app.

Both run in real terminals (tmux, 100x30, each on its own server socket so no one else's tmux is
touched) at the same time, so that both see the same machine load. Once both have drawn their screen
and settled, the utime+stime of each app's process (/proc/PID/stat) is read over the same window,
split into 10 s slices, and reported as % of one core; VmRSS at the start and the end of the window.
/proc/PID/stat counts in 10 ms ticks (0.03% of a core over 30 s, a third of an idle Textual app; an
idle app can show 0 ticks in 10 s), so each process's CPU clock (clock_getcpuclockid: nanoseconds,
exited threads included) is read alongside and is the figure the table leads with.
Then both are quit with `q` and the time each took to exit is recorded.
"""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path
from typing import Any

from common import BIN, PYTHON, REPO, Row, Stats, cpu_clock_seconds, ratio, rss_mib
from terminal import Terminal, quit_app, start

NAME = "idle_cpu"
SLICE_S = 10.0
SETTLE_S = 5.0
WINDOW_S = 120.0
"""The full run's window: the cockpit's work comes with its node poll (every 5 s), so a 30 s window held
six polls and one more or less in it moved the ratio by about half a point."""
TICK = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(") ", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime: fields 14 and 15


COUNTERS = {"stat": _cpu_seconds, "clock": cpu_clock_seconds}
"""utime+stime from /proc/PID/stat (10 ms ticks), and the process CPU clock (ns)."""


Slices = dict[str, dict[str, list[float]]]


def _sample(pids: dict[str, int], window: float) -> tuple[dict[str, dict[str, float]], Slices]:
    """% of one core per app and counter over the whole window, and per slice of it."""
    slices: Slices = {key: {name: [] for name in COUNTERS} for key in pids}
    first = {(k, n): read(pid) for k, pid in pids.items() for n, read in COUNTERS.items()}
    started = time.monotonic()
    before = dict(first)
    while (elapsed := time.monotonic() - started) < window - 0.01:
        t0 = time.monotonic()
        time.sleep(min(SLICE_S, window - elapsed))
        took = time.monotonic() - t0
        for (key, name), value in before.items():
            before[key, name] = COUNTERS[name](pids[key])
            slices[key][name].append(100 * (before[key, name] - value) / took)
    whole = {
        key: {name: 100 * (before[key, name] - first[key, name]) / elapsed for name in COUNTERS}
        for key in pids
    }
    return whole, slices


def run(state_dir: Path, nodes: int, quick: bool) -> tuple[dict[str, Any], list[Row]]:
    """Measure; return the JSON document and the table rows."""
    window = 10.0 if quick else WINDOW_S
    env = f"COCKPIT_STATE_DIR={shlex.quote(str(state_dir))}"
    apps = {
        "cockpit": (
            f"{env} {shlex.quote(str(BIN / 'cockpit'))} connect local",
            lambda s: s.count("ALIVE") >= nodes,
            "cockpit connect local",
        ),
        "minimal": (
            f"{shlex.quote(PYTHON)} {shlex.quote(str(REPO / 'bench' / 'minimal_app.py'))}",
            lambda s: "idle baseline" in s,
            "minimal_app.py",
        ),
    }
    started: dict[str, tuple[Terminal, int]] = {}
    try:
        for key, (command, ready, pattern) in apps.items():
            started[key] = start(f"cockpit-bench-{key}-{os.getpid()}", command, ready, pattern)
        time.sleep(SETTLE_S)
        pids = {key: pid for key, (_term, pid) in started.items()}
        rss_start = {key: rss_mib(pid=pid) for key, pid in pids.items()}
        percent, slices = _sample(pids, window)
        rss_end = {key: rss_mib(pid=pid) for key, pid in pids.items()}
        quit_s = {key: quit_app(term, pid) for key, (term, pid) in started.items()}
    finally:
        for term, _pid in started.values():
            term.close()
    ratios = {name: ratio(percent["cockpit"][name], percent["minimal"][name]) for name in COUNTERS}
    doc = {
        "window_s": window,
        "settle_s": SETTLE_S,
        "terminal": "tmux 100x30",
        "percent_of_one_core": percent,
        "slice_percent": {k: {n: Stats.of(v).as_dict() for n, v in c.items()} for k, c in slices.items()},
        "rss_mib_start": rss_start,
        "rss_mib_end": rss_end,
        "quit_s": quit_s,
        "ratio_cockpit_over_minimal": ratios,
    }
    rows = []
    for key, label in (("cockpit", "cockpit connect local (TUI)"), ("minimal", "minimal Textual app")):
        s = Stats.of(slices[key]["clock"])
        rows.append(
            Row(
                NAME,
                f"{label}, idle CPU",
                f"{percent[key]['clock']:.3f}% of a core",
                f"{SLICE_S:.0f} s slices {s.min:.3f}-{s.max:.3f}%; "
                f"/proc stat ticks {percent[key]['stat']:.2f}%; RSS {rss_end[key]:.1f} MiB "
                f"(start {rss_start[key]:.1f}); quit in {quit_s[key]:.1f} s",
            )
        )
    ticks = f"{ratios['stat']:.1f}x" if ratios["stat"] != float("inf") else "n/a (0 ticks)"
    rows.append(
        Row(
            NAME,
            "ratio cockpit / minimal app (CPU)",
            f"{ratios['clock']:.1f}x",
            f"/proc stat ticks {ticks}; over {window:.0f} s",
        )
    )
    return doc, rows
