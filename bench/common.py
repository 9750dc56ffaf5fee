"""Provides what every benchmark shares: summary statistics, timed subprocesses, the machine description.

Absolute times on a shared 2-core machine are noise; every benchmark measures its baseline in the same
run, interleaved with the candidate, and reports ratios. Nothing here asserts a time.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.harness.sshd import SshServer

REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
BIN = Path(PYTHON).parent
_LIBC = ctypes.CDLL(None, use_errno=True)


@dataclass(frozen=True)
class Stats:
    """Median, min and max of one measured quantity (seconds unless the name says otherwise)."""

    median: float
    min: float
    max: float
    n: int

    @classmethod
    def of(cls, values: list[float]) -> Stats:
        if not values:
            raise ValueError("no samples")
        return cls(statistics.median(values), min(values), max(values), len(values))

    def as_dict(self) -> dict[str, float]:
        return {"median": self.median, "min": self.min, "max": self.max, "n": self.n}


@dataclass(frozen=True)
class Row:
    """One line of the results table."""

    bench: str
    what: str
    value: str
    detail: str = ""


def ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator > 0 else float("inf")


def percentile(values: list[float], q: float) -> float:
    """The sample at quantile Q (nearest rank: no interpolation between samples)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def tail(values: list[float]) -> dict[str, float]:
    """p50, p95, max and the count: how a per-frame or per-operation time spreads."""
    return {
        "p50": percentile(values, 0.5),
        "p95": percentile(values, 0.95),
        "max": max(values),
        "n": len(values),
    }


def rss_mib(field: str = "VmRSS", pid: int | str = "self") -> float:
    """A process's resident memory now (VmRSS), or its peak (`VmHWM`: this program's own, unlike
    `ru_maxrss`, which after fork and exec keeps the parent's), in MiB; NaN where /proc does not say.
    PID: another process (default this one)."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def run_child(argv: list[str], timeout: float) -> dict[str, Any]:
    """Run a benchmark's measured child process (`python bench/X.py --child ...`) and return the JSON
    object it prints on its last line; raises with the end of its stderr if it failed."""
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=timeout, check=False)
    if proc.returncode != 0:
        name = Path(argv[1]).stem if len(argv) > 1 else argv[0]
        raise RuntimeError(
            f"{name} child {' '.join(argv[2:])} exited {proc.returncode}: {proc.stderr.strip()[-2000:]}"
        )
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def cluster_token(state_dir: Path) -> str | None:
    """The auth token of the benchmark's cluster, or None when it runs without token auth.

    Local clusters use Ray's token auth by default.
    """
    from cockpit.core.local import record

    return record.cluster_token(state_dir)


def bench_env(state_dir: Path | None = None) -> dict[str, str]:
    """The environment for measured subprocesses: `local` resolves to the benchmark's own cluster."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    env["RAY_AUTH_MODE"] = "disabled"
    env.pop("RAY_AUTH_TOKEN", None)
    if state_dir is not None:
        env["COCKPIT_STATE_DIR"] = str(state_dir)
        token = cluster_token(state_dir)
        if token is not None:  # `ray status` and `cockpit status` both read RAY_AUTH_TOKEN
            env["RAY_AUTH_MODE"], env["RAY_AUTH_TOKEN"] = "token", token
    return env


def timed_run(argv: list[str], env: dict[str, str], timeout: float = 120.0) -> tuple[float, str]:
    """Wall time of one whole process from spawn to exit, and its stdout; raises if it failed."""
    started = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    took = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return took, proc.stdout


def cpu_clock_seconds(pid: int) -> float:
    """A process's CPU time from its POSIX CPU clock: nanosecond resolution, unlike /proc ticks."""
    clock = ctypes.c_int()
    if _LIBC.clock_getcpuclockid(pid, ctypes.byref(clock)) != 0:
        raise RuntimeError(f"clock_getcpuclockid({pid}) failed")
    return time.clock_gettime(clock.value)


def _refers_to(pid: str, needle: bytes) -> bool:
    """True when the process's command line, environment, working directory or an open file names NEEDLE.

    Ray's daemons rewrite their process title (`ray::DashboardAgent`) over the memory that held their
    command line and the start of their environment, so the command line alone misses them; the log
    files they keep open (`/proc/PID/fd`, also after the directory was deleted) do not.
    """
    for name in ("cmdline", "environ"):
        try:
            with open(f"/proc/{pid}/{name}", "rb") as fh:
                if needle in fh.read():
                    return True
        except OSError:
            continue
    links = [f"/proc/{pid}/cwd"]
    with contextlib.suppress(OSError):
        links += [f"/proc/{pid}/fd/{fd}" for fd in os.listdir(f"/proc/{pid}/fd")]
    for link in links:
        try:
            if needle in os.readlink(link).encode():
                return True
        except OSError:
            continue
    return False


def pids_naming(text: str) -> list[int]:
    """Live processes other than this one that name TEXT (e.g. a private temp dir): on their command
    line, in their environment, as their working directory or in the path of a file they hold open."""
    me = os.getpid()
    return sorted(
        int(entry)
        for entry in os.listdir("/proc")
        if entry.isdigit() and int(entry) != me and _running(int(entry)) and _refers_to(entry, text.encode())
    )


def _running(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(") ", 1)[-1][:1] != "Z"
    except OSError:
        return False


def harness_sshd(root: Path) -> SshServer:
    """The test suite's real OpenSSH server on 127.0.0.1 (`tests/harness/sshd.py`), its files under ROOT;
    `tests` is importable from the repository root."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from tests.harness.sshd import start_sshd

    return start_sshd(root)


def stop_sshd(server: SshServer | None, work: Path, name: str) -> list[int]:
    """Stop SERVER (None: it never started), then remove the benchmark's private directory WORK; return
    the processes still holding files there (named in a warning: none should be)."""
    if server is not None:
        server.stop()
    left = pids_naming(str(work))
    shutil.rmtree(work, ignore_errors=True)
    if left:
        print(f"[bench] WARNING: processes of the {name} bench still run: {left}", file=sys.stderr)
    return left


def describe(pids: list[int]) -> list[str]:
    """`PID name` for each process still there (for the JSON)."""
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                command = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        out.append(f"{pid} {command[:120]}")
    return out


def end_processes(pids: list[int], grace: float = 5.0) -> list[int]:
    """SIGTERM these processes (found by `pids_naming` on the benchmark's own private directory), SIGKILL
    what is left after GRACE s; return those still running after that."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except OSError:
                continue
        deadline = time.monotonic() + grace
        while (pids := [p for p in pids if _running(p)]) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not pids:
            break
    return pids


def load_average() -> tuple[float, float, float]:
    return os.getloadavg()


def tree() -> dict[str, Any]:
    """The commit measured, and the files outside bench/ that differed from it when the run started."""

    def git(*args: str) -> str:
        proc = subprocess.run(["git", *args], capture_output=True, text=True, cwd=REPO, check=False)
        return proc.stdout

    changed = [line[3:] for line in git("status", "--porcelain").splitlines() if line[3:]]
    return {
        "commit": git("rev-parse", "--short", "HEAD").strip(),
        "changed": [c for c in changed if not c.startswith("bench/")],
    }


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""

    def version(dist: str) -> str:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "not installed"

    mem_kib = 0
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    return {
        "nproc": os.cpu_count(),
        "memory_gib": round(mem_kib / 2**20, 1),
        "python": platform.python_version(),
        "kernel": platform.release(),
        "ray": version("ray"),
        "textual": version("textual"),
        "aiohttp": version("aiohttp"),
        "cockpit": version("ray-cockpit"),
    }
