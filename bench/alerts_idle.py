"""Provides the `cockpit alerts` benchmark: what the headless watch costs the login node while it watches
a running job, against the watchdog users write today (a shell loop asking `ray job list` every 10 s).

On the bench's local cluster, with the demo job running (a step line a second in its driver log, 8
actors), both run side by side over the same window, so both see the same machine:

- `cockpit alerts local --json` (stdout to /dev/null), its defaults: jobs every 10 s, nodes every 30 s,
  pending work every 60 s, the running job's driver log followed (the hang watch and the NaN rule);
- `while true; do ray job list --address URL; sleep 10; done` (the same 10 s cadence, no log read).

CPU is each process tree's (utime+stime of the process and of its children it has waited for, from
/proc/PID/stat), as % of one core; RSS of the `cockpit alerts` process at the start and the end of the
window. Then the same with every cadence 20 times faster (`COCKPIT_ALERTS_INTERVAL=0.5`), a week's
looks in a few hours' worth, to see whether its memory stays put as looks pile up.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from common import BIN, Row, ratio, rss_mib

from cockpit.core.local.record import LocalCluster, token_file

NAME = "alerts_idle"
SETTLE_S = 15.0
TICK = os.sysconf("SC_CLK_TCK")


def _tree_cpu(pid: int) -> float:
    """Seconds of CPU of PID and of the children it has reaped (utime, stime, cutime, cstime)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(") ", 1)[1].split()
    return sum(int(fields[i]) for i in (11, 12, 13, 14)) / TICK


def _demo_job(env: dict[str, str]) -> str:
    done = subprocess.run(
        [str(BIN / "cockpit"), "submit", "local", "demo", "steps=100000"],
        env=env, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return done.stdout.split("submitted ", 1)[1].split()[0]


def _window(pids: dict[str, int], seconds: float) -> dict[str, float]:
    first = {k: _tree_cpu(p) for k, p in pids.items()}
    started = time.monotonic()
    time.sleep(seconds)
    took = time.monotonic() - started
    return {k: 100 * (_tree_cpu(p) - first[k]) / took for k, p in pids.items()}


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def run(cluster: LocalCluster, state_dir: Path, quick: bool) -> tuple[dict[str, Any], list[Row]]:
    window = 20.0 if quick else 120.0
    env = {**os.environ, "COCKPIT_STATE_DIR": str(state_dir), "COCKPIT_ALERTS_NOTIFY": "off"}
    job = _demo_job(env)
    token = token_file(state_dir).read_text().strip() if token_file(state_dir).exists() else ""
    loop = (
        f"while true; do {shlex.quote(str(BIN / 'ray'))} job list --address {cluster.dashboard_url} "
        ">/dev/null 2>&1; sleep 10; done"
    )
    doc: dict[str, Any] = {"window_s": window, "settle_s": SETTLE_S, "job": job}
    rows: list[Row] = []
    try:
        for label, interval in (("defaults", None), ("20x faster", "0.5")):
            alerts_env = dict(env)
            if interval is not None:  # the jobs every 0.5 s (the nodes and pending work keep their own)
                alerts_env["COCKPIT_ALERTS_INTERVAL"] = interval
            alerts = subprocess.Popen(
                [str(BIN / "cockpit"), "alerts", "local", "--json"],
                env=alerts_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
            baseline = subprocess.Popen(
                ["bash", "-c", loop],
                env={**env, "RAY_AUTH_TOKEN": token},
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
            try:
                time.sleep(SETTLE_S)
                rss_start = rss_mib(pid=alerts.pid)
                percent = _window({"alerts": alerts.pid, "loop": baseline.pid}, window)
                rss_end = rss_mib(pid=alerts.pid)
            finally:
                _stop(alerts)
                _stop(baseline)
            doc[label] = {"percent_of_one_core": percent, "rss_mib_start": rss_start, "rss_mib_end": rss_end}
            rows.append(
                Row(
                    NAME,
                    f"cockpit alerts local, {label}, CPU",
                    f"{percent['alerts']:.2f}% of a core",
                    f"ray job list loop every 10 s: {percent['loop']:.2f}% (ratio "
                    f"{ratio(percent['alerts'], percent['loop']):.2f}); "
                    f"RSS {rss_start:.1f} -> {rss_end:.1f} MiB over {window:.0f} s",
                )
            )
    finally:
        subprocess.run(
            [str(BIN / "cockpit"), "stop", "local", job],
            env=env,
            capture_output=True,
            timeout=60,
            check=False,
        )
    return doc, rows
