"""The machine's CPU by kind of process while something runs beside it: which of pytest, Ray's workers,
Ray's daemons (raylet, GCS, dashboard, its agents, log monitors), job drivers, sshd or Slurm spent it.

The test suite's CPU ledger (tests/harness/cpu_ledger.py) says which *test* the machine's CPU went to;
this says which *process*, so that a cut can be aimed at what burns (docs/testing.md, "Where the CPU goes,
by process"). It reads every /proc/PID/stat each PERIOD seconds and charges each process's new CPU time to
its kind, chosen once, when the process is first seen; a process that starts and ends between two looks
is missed (the report says how much of the machine's busy time it placed).

    python scripts/cpu_by_process.py OUT.json [--period 2] &   # then run the suite; kill %1 (SIGTERM)

OUT.json is rewritten every ten looks and at SIGTERM/SIGINT: wall seconds, the machine's busy CPU-s
(user, nice, system, irq, softirq), what was placed, and per kind its CPU-s and how many processes.
Costs about 1% of a core at the default period.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import time
from pathlib import Path
from types import FrameType

TICK = os.sysconf("SC_CLK_TCK")

BY_COMMAND_LINE = (
    "default_worker.py",  # a Ray worker before it names itself `ray::...` (its kind is kept)
    "setup_worker",  # a Ray worker with a runtime env, before it execs the worker
    "dashboard/agent.py",
    "runtime_env/agent",
    "dashboard/dashboard.py",
    "log_monitor.py",
    "autoscaler/_private/monitor.py",
    "cockpit.demo.trainer",  # the demo job's driver
    "cockpit.cli",
    "py-spy",
    "debugpy",
)
BY_NAME = ("raylet", "gcs_server", "sshd", "tmux", "munged", "slurmctld", "slurmd", "slurmstepd", "uv", "pip")


def kind_of(pid: str, name: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            command = file.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        command = ""
    if re.search(r"-m pytest|bin/pytest", command):
        part = re.search(r"--part (\w+)", command)
        return f"pytest --part {part.group(1)}" if part else "pytest"
    if name.startswith("ray::"):
        return "ray worker " + name  # its class as Ray names it (the kernel keeps 15 characters)
    if name in BY_NAME:
        return name
    if name.startswith("ray-dashboard-") or (
        "multiprocessing.forkserver" in command and "ray.dashboard" in command
    ):
        return "dashboard modules (forkserver and its subprocesses)"
    if "ray.util.client.server" in command:
        return "ray client server"
    for key in BY_COMMAND_LINE:
        if key in command:
            return "ray worker (starting)" if key in ("default_worker.py", "setup_worker") else key
    if "bin/ray " in command or command.endswith("bin/ray"):
        return "ray (command line)"
    return "other: " + name


def busy_ticks() -> int:
    with open("/proc/stat") as stat:
        user, nice, system, _idle, _iowait, irq, softirq = (int(f) for f in stat.readline().split()[1:8])
    return user + nice + system + irq + softirq


class Sampler:
    def __init__(self) -> None:
        self.seen: dict[int, tuple[int, int, str]] = {}  # pid: (start time, CPU ticks, kind)
        self.ticks: dict[str, int] = {}
        self.count: dict[str, int] = {}
        self.started = time.monotonic()
        self.busy_at_start = busy_ticks()
        self.first = True

    def look(self) -> None:
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as file:
                    raw = file.read()
            except OSError:
                continue
            close = raw.rfind(")")
            name = raw[raw.find("(") + 1 : close]
            fields = raw[close + 2 :].split()
            cpu, start, pid = int(fields[11]) + int(fields[12]), int(fields[19]), int(entry)
            known = self.seen.get(pid)
            if known is None or known[0] != start:  # new, or the pid was reused
                kind = kind_of(entry, name)
                self.count[kind] = self.count.get(kind, 0) + 1
                self.ticks[kind] = self.ticks.get(kind, 0) + (0 if self.first else cpu)
            else:
                kind = known[2]
                self.ticks[kind] = self.ticks.get(kind, 0) + cpu - known[1]
            self.seen[pid] = (start, cpu, kind)
        self.first = False

    def report(self) -> dict[str, object]:
        kinds = sorted(self.ticks.items(), key=lambda item: -item[1])
        return {
            "wall_s": round(time.monotonic() - self.started, 1),
            "busy_cpu_s": round((busy_ticks() - self.busy_at_start) / TICK, 1),
            "placed_cpu_s": round(sum(self.ticks.values()) / TICK, 1),
            "kinds": {
                k: {"cpu_s": round(t / TICK, 1), "processes": self.count.get(k, 0)} for k, t in kinds if t
            },
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("out", type=Path, help="the JSON report, rewritten as it goes")
    parser.add_argument("--period", type=float, default=2.0, help="seconds between looks (default 2)")
    args = parser.parse_args(argv)
    sampler = Sampler()

    def write() -> None:
        args.out.write_text(json.dumps(sampler.report(), indent=1) + "\n")

    def stop(_signum: int, _frame: FrameType | None) -> None:
        write()
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    looks = 0
    while True:
        sampler.look()
        looks += 1
        if looks % 10 == 0:
            write()
        time.sleep(args.period)


if __name__ == "__main__":
    sys.exit(main())
