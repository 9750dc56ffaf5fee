"""Provides the soak: the cockpit TUI left on a synthetic head (2,000 nodes x 8 GPUs with churn and the
1,000 dead nodes Ray keeps, a driver log at 2,000 lines/s) for `--minutes`, its screens switched by a
script, sampled every 10 s.

`python bench/soak.py --minutes 60` (the issue asks for at least an hour; a few minutes show it works).
The cockpit runs in a real terminal (tmux 160x45, `cockpit connect URL`); every `--switch-every` seconds
the next of the screens 1, 2, 3, 4, 5, 7, 0 is shown. Each sample reads, from /proc: RSS, open files
(fd count) and threads, and the head's counts. After a warm-up (the first fifth, at least 60 s) the
least-squares slope of each is reported per hour, with the first and last values. The cockpit's asyncio
tasks are not visible from outside the process: the threads and open files stand for what it holds.
Exceptions: the terminal is searched for a traceback at every sample. Lost or repeated log lines: the
Logs screen follows the job that was running when it was first shown, so it is shown first, before the
churn ends that job (a minute in) and starts the first of the short ones: the jobs there at start share
one synthetic driver log that numbers its lines (`step:N`) and goes on for the whole soak. Its stream
closes each time the screen is left and resumes when it is shown again. At the end the screen's `s`
saves what its ring holds (the last 200,000 lines): every line must be numbered one more than the line
before it, and the last must be near the log's end (`behind`: the lines written after it, a few seconds'
worth; a screen left on a job that ended would be a whole soak behind).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

from common import REPO, load_average, rss_mib
from scale import _cockpit, _get, synthetic_head
from terminal import quit_app

SCREENS = ("5", "1", "2", "3", "4", "7", "0")
"""The order the screens are shown in, the Logs screen first (see above)."""
DEAD = 1_000
"""Dead nodes listed from the start: Ray keeps the last 1,000 (`RAY_maximum_gcs_dead_node_cached_count`),
so under churn (a node dies and one joins every 5 s) a long-lived cluster lists 1,000 dead nodes. Starting
with fewer, the listing grows for the first 80 minutes (about 720 nodes an hour), and the cockpit's memory
with it: a slope that is the cluster's, not a leak."""


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return -1


STEP = re.compile(r"\bstep:(\d+) ")


def log_lines_check(text: str) -> dict[str, int]:
    """The numbered lines of a saved log, checked: how many, the first and last number, and each break in
    the numbering (a line missing between two, or one given again or out of order)."""
    numbers = [int(m.group(1)) for m in map(STEP.search, text.splitlines()) if m]
    lost = sum(b - a - 1 for a, b in pairwise(numbers) if b > a + 1)
    repeated = sum(1 for a, b in pairwise(numbers) if b <= a)
    return {
        "lines": len(numbers),
        "first": numbers[0] if numbers else -1,
        "last": numbers[-1] if numbers else -1,
        "lost": lost,
        "repeated": repeated,
    }


def _caught_up(term: Any, url: str, rate: float, timeout: float = 300.0) -> float:
    """Wait until the Logs screen shows a line written within the last 5 s (it reads what it missed while
    hidden first: 240,000 lines after two minutes away, longer on a busy machine); the seconds waited."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        shown = [int(n) for n in STEP.findall(term.screen() + " ")]
        written = int(_get(f"{url}/__control")["log_lines"])
        if shown and written - max(shown) <= 5 * rate:
            break
        time.sleep(1)
    return time.monotonic() - started


def _saved_log(term: Any, pid: int, url: str, rate: float) -> dict[str, float]:
    """Show the Logs screen, wait until it has caught up, save what it holds (`s`, a file in the app's
    working directory), check it."""
    cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
    before = set(cwd.glob("cockpit-*.log"))
    term.type("5")
    term.wait_for(lambda screen: "step:" in screen, 120)
    caught_up_s = _caught_up(term, url, rate)
    term.type("s")
    deadline = time.monotonic() + 120
    while not (new := set(cwd.glob("cockpit-*.log")) - before) and time.monotonic() < deadline:
        time.sleep(0.5)
    if not new:
        raise RuntimeError("the Logs screen's save wrote no file")
    path = new.pop()
    term.wait_for(lambda screen: "saved" in screen, 120)  # written whole
    try:
        return {**log_lines_check(path.read_text()), "caught_up_s": round(caught_up_s, 1)}
    finally:
        path.unlink()


def slope_per_hour(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, value) points, per hour."""
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(t for t, _ in points) / n
    my = sum(v for _, v in points) / n
    den = sum((t - mx) ** 2 for t, _ in points)
    return 3600 * sum((t - mx) * (v - my) for t, v in points) / den if den else 0.0


def soak(
    minutes: float, switch_every: float, nodes: int, log_rate: float, dead: int = DEAD
) -> dict[str, Any]:
    state_dir = Path(os.environ.get("TMPDIR", "/tmp")) / f"cockpit-soak-{os.getpid()}"
    state_dir.mkdir(exist_ok=True)
    samples: list[dict[str, float]] = []
    tracebacks = 0
    with synthetic_head(nodes, actors=4 * nodes, jobs=5, dead=dead, log_rate=log_rate, churn=True) as url:
        term, pid = _cockpit(url, state_dir, "soak")
        try:
            term.wait_for(lambda s: "ALIVE" in s, 300)
            started = time.monotonic()
            end = started + 60 * minutes
            next_switch, screen = started, 0
            while (now := time.monotonic()) < end:
                if now >= next_switch:
                    term.type(SCREENS[screen % len(SCREENS)])
                    screen += 1
                    next_switch = now + switch_every
                stats = _get(f"{url}/__stats")
                samples.append(
                    {
                        "t": now - started,
                        "rss_mib": rss_mib(pid=pid),
                        "fds": _fds(pid),
                        "threads": _threads(pid),
                        "head_requests": stats["requests"],
                        "head_bytes": stats["bytes"],
                        "head_in_flight": stats["in_flight"],
                    }
                )
                if "Traceback" in term.screen():
                    tracebacks += 1
                if len(samples) % 30 == 1:  # every 5 minutes: where it stands, for a long run watched live
                    last = samples[-1]
                    print(
                        f"{last['t'] / 60:5.1f} min: RSS {last['rss_mib']:.0f} MiB, {last['fds']:.0f} files, "
                        f"{last['threads']:.0f} threads, {last['head_in_flight']:.0f} in flight",
                        flush=True,
                    )
                time.sleep(10)
            saved_log = _saved_log(term, pid, url, log_rate)
            control = _get(f"{url}/__control")  # no change: reads how many lines the log holds
            endpoints = {
                path: {"requests": e["requests"], "bytes": e["bytes"]}
                for path, e in _get(f"{url}/__stats")["endpoints"].items()
            }
            quit_s = quit_app(term, pid, timeout=60)
        finally:
            term.close()
    warm = max(60.0, 0.2 * 60 * minutes)
    steady = [s for s in samples if s["t"] >= warm] or samples
    keys = ("rss_mib", "fds", "threads", "head_in_flight")
    return {
        "minutes": minutes,
        "nodes": nodes,
        "dead": dead,
        "log_rate": log_rate,
        "warm_up_s": warm,
        "samples": samples,
        "slopes_per_hour": {k: slope_per_hour([(s["t"], s[k]) for s in steady]) for k in keys},
        "first_last": {k: (steady[0][k], steady[-1][k]) for k in keys},
        "tracebacks_seen": tracebacks,
        "log_lines_written": control["log_lines"],
        "log_saved": {**saved_log, "behind": control["log_lines"] - 1 - saved_log["last"]},
        "head_endpoints": endpoints,
        "quit_s": quit_s,
        "load_after": load_average(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--switch-every", type=float, default=20.0)
    parser.add_argument("--nodes", type=int, default=2_000)
    parser.add_argument("--log-rate", type=float, default=2_000.0)
    parser.add_argument("--dead", type=int, default=DEAD, help="dead nodes listed from the start")
    args = parser.parse_args()
    # SIGTERM and SIGHUP unwind like Ctrl+C: the synthetic head and the cockpit's terminal are closed.
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda number, _frame: sys.exit(128 + number))
    doc = soak(args.minutes, args.switch_every, args.nodes, args.log_rate, args.dead)
    out = REPO / "bench" / "results" / f"soak-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1))
    for key, slope in doc["slopes_per_hour"].items():
        first, last = doc["first_last"][key]
        print(f"{key}: {first:g} -> {last:g} after warm-up; slope {slope:+.2f}/hour")
    saved = doc["log_saved"]
    print(
        f"Logs screen at the end: {saved['lines']:,} lines (steps {saved['first']:,} to {saved['last']:,}), "
        f"{saved['lost']} lost, {saved['repeated']} repeated; the log's last step "
        f"{doc['log_lines_written'] - 1:,} ({saved['behind']:,} lines after the ring's last)"
    )
    print(f"tracebacks seen: {doc['tracebacks_seen']}; results: {out.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
