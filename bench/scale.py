"""Provides the head-load benchmark: what the cockpit costs a head of N nodes x 8 GPUs, against the Ray
dashboard's own web page on the same synthetic head (`tests/harness/synthetic_head.py`, run as a
process of its own).

For each N (100, 500, 2,000, 5,000; `--quick`: 100 and 2,000), with 4 actors a node (Ray's RL scheduling
benchmark) and a driver log at 10 lines/s:
- the anchor: the dashboard's built web page (`ray/dashboard/client/build`, from the installed Ray
  wheel) served by the synthetic head and loaded in headless Debian chromium, one tab on its Cluster view
  (`/#/cluster`); after the page settled, the head counts what the tab asks for;
- the cockpit (`cockpit connect URL` in a real terminal, tmux 160x45) on its Cluster screen, then on its
  GPU screen; its CPU clock over the Cluster window is its idle CPU.
Rates are steady ones: per endpoint, the bytes of every answer after the first divided by the time from
the first to the last (a request that comes once a minute is neither missed nor counted twice by a
window), else what the window saw; each window lasts more than two of the slowest cadence expected.

Then memory: the cockpit's RSS at 2,000 x 8 GPUs, 100,000 actors and a 200,000-line driver log after
every screen was shown, and again after ten times more data went by (2,000,000 more log lines, churn).

When chromium is missing, the anchor is computed from the cadences documented in
`../shared/reference/scale-and-asks.md` (labelled so in the results).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from common import BIN, PYTHON, REPO, Row, cpu_clock_seconds, ratio, rss_mib
from terminal import Terminal, quit_app, start

from cockpit.ui.feeds import cluster as cluster_feed

NAME = "scale"
GPUS = 8
ACTORS_PER_NODE = 4
ANCHOR_SETTLE_S = 15.0
SETTLE_S = 8.0
DOCUMENTED = {
    "/nodes?view=summary": 4.0,
    "/api/cluster_status": 4.0,
    "/api/jobs/": 4.0,
    "/logical/actors": 10.0,
}
"""The web page's poll periods (s) as documented (`API_REFRESH_INTERVAL_MS`), for the fallback anchor."""


def _say(message: str) -> None:
    print(f"[bench scale] {message}", flush=True)


def _get(url: str, timeout: float = 600) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as answer:
        return json.loads(answer.read())


@contextmanager
def synthetic_head(nodes: int, **extra: Any) -> Iterator[str]:
    """A synthetic head in a process of its own; yields its URL."""
    args = [PYTHON, "-m", "tests.harness.synthetic_head", "--nodes", str(nodes), "--gpus", str(GPUS)]
    for key, value in extra.items():
        flag = f"--{key.replace('_', '-')}"
        args += [flag] if value is True else [flag, str(value)]
    proc = subprocess.Popen(args, cwd=REPO, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http://"):
            raise RuntimeError(f"the synthetic head did not start: {url!r}")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def steady(events: list[list[Any]], window: float) -> dict[str, dict[str, float]]:
    """Per endpoint: requests and bytes a minute at the steady cadence (see the module's docstring)."""
    by: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for when, endpoint, sent in events:
        by[endpoint].append((when, sent))
    out = {}
    for endpoint, seen in by.items():
        seen.sort()
        span = seen[-1][0] - seen[0][0]
        if "(streamed)" in endpoint or len(seen) < 2 or span < 1.0:
            per_s, req_s = sum(b for _, b in seen) / window, len(seen) / window
        else:
            per_s, req_s = sum(b for _, b in seen[1:]) / span, (len(seen) - 1) / span
        out[endpoint] = {"bytes_per_min": 60 * per_s, "requests_per_min": 60 * req_s, "seen": len(seen)}
    return out


def totals(rates: dict[str, dict[str, float]]) -> dict[str, float]:
    return {
        "bytes_per_min": sum(r["bytes_per_min"] for r in rates.values()),
        "requests_per_min": sum(r["requests_per_min"] for k, r in rates.items() if "(streamed)" not in k),
    }


def measure(url: str, window: float) -> dict[str, Any]:
    """Reset the head's counts, wait WINDOW seconds, and read the rates."""
    _get(f"{url}/__stats?reset=1")
    time.sleep(window)
    doc = _get(f"{url}/__stats?log=1")
    rates = steady(doc["log"], doc["seconds"])
    return {"window_s": doc["seconds"], "endpoints": rates, **totals(rates)}


def dashboard_build() -> Path | None:
    try:
        import ray
    except ImportError:
        return None
    build = Path(ray.__file__).parent / "dashboard" / "client" / "build"
    return build if (build / "index.html").is_file() else None


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def anchor_tab(url: str, window: float) -> dict[str, Any]:
    """One headless chromium tab on the dashboard's Cluster view, counted by the head."""
    browser = chromium()
    assert browser is not None
    profile = tempfile.mkdtemp(prefix="cockpit-bench-chromium-")
    argv = [
        browser,
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--window-size=1400,900",
        f"{url}/#/cluster",
    ]
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        time.sleep(ANCHOR_SETTLE_S)  # the page's files, its first answers
        result = measure(url, window)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        shutil.rmtree(profile, ignore_errors=True)
    result["how"] = "headless chromium, one tab on /#/cluster"
    return result


def anchor_documented(url: str) -> dict[str, Any]:
    """Fallback: each endpoint the page polls fetched once, times its documented cadence."""
    endpoints = {}
    for path, period in DOCUMENTED.items():
        with urllib.request.urlopen(url + path, timeout=600) as answer:
            size = len(answer.read())
        endpoints[path] = {"bytes_per_min": size * 60 / period, "requests_per_min": 60 / period, "seen": 1}
    return {"how": "FALLBACK: documented cadences (no chromium)", "endpoints": endpoints, **totals(endpoints)}


def cluster_window(nodes: int) -> float:
    """More than two of the summary's periods on the Cluster screen (when no slow answer stretches it)."""
    period = nodes / cluster_feed.STATS_NODES_PER_SECOND
    return min(180.0, max(60.0, 2.2 * period))


def gpu_window(nodes: int) -> float:
    """Six of its periods on the GPU screen: a slow answer stretches them (ten times its time)."""
    period = nodes / cluster_feed.GPU_STATS_NODES_PER_SECOND
    return min(150.0, max(60.0, 6 * period))


def _cockpit(url: str, state_dir: Path, tag: str) -> tuple[Terminal, int]:
    # This checkout's cockpit, whichever the virtualenv's entry point would find.
    env = f"COCKPIT_STATE_DIR={shlex.quote(str(state_dir))} PYTHONPATH={shlex.quote(str(REPO))}"
    command = f"{env} {shlex.quote(str(BIN / 'cockpit'))} connect {url}"
    term, pid = start(
        f"cockpit-bench-scale-{tag}-{os.getpid()}", command, lambda s: "connected" in s, "connect"
    )
    return term, pid


def _wait_screen(term: Terminal, key: str, needle: str, timeout: float = 120.0) -> None:
    term.type(key)
    term.wait_for(lambda s: needle in s, timeout)


def cockpit_load(url: str, nodes: int, state_dir: Path) -> dict[str, Any]:
    term, pid = _cockpit(url, state_dir, str(nodes))
    try:
        term.wait_for(lambda s: "ALIVE" in s, 180)
        time.sleep(SETTLE_S)
        window = cluster_window(nodes)
        cpu0, t0 = cpu_clock_seconds(pid), time.monotonic()
        on_cluster = measure(url, window)
        cpu = 100 * (cpu_clock_seconds(pid) - cpu0) / (time.monotonic() - t0)
        on_cluster["cockpit_cpu_percent_of_core"] = cpu
        on_cluster["cockpit_rss_mib"] = rss_mib(pid=pid)
        _wait_screen(term, "2", "2 GPUs")
        time.sleep(SETTLE_S)
        on_gpus = measure(url, gpu_window(nodes))
        on_gpus["cockpit_rss_mib"] = rss_mib(pid=pid)
        quit_s = quit_app(term, pid, timeout=60)
    finally:
        term.close()
    return {"cluster_screen": on_cluster, "gpu_screen": on_gpus, "quit_s": quit_s}


def _streamed(url: str) -> int:
    """Bytes the head has sent on its log streams so far."""
    return int(_get(f"{url}/__stats")["endpoints"].get("/api/v0/logs/stream", {}).get("bytes", 0))


def _feed_logs(term: Terminal, url: str, lines: int, quick: bool) -> float:
    """On the Logs screen, the driver log grown by LINES at once, waited for until the stream has carried
    them (each line is about 90 bytes); the MiB streamed."""
    _wait_screen(term, "5", "5 Logs", 180)
    before = _streamed(url)
    _get(f"{url}/__control?add_log_lines={lines}")
    deadline = time.monotonic() + (300 if quick else 900)
    while time.monotonic() < deadline and _streamed(url) - before < 80 * lines:
        time.sleep(2)
    return (_streamed(url) - before) / 2**20


def memory(state_dir: Path, quick: bool) -> dict[str, Any]:
    """RSS with 2,000 x 8 GPUs, 100,000 actors and 200,000 log lines held (the Logs screen's ring full),
    then after 10x more data went by (2,000,000 more lines, nodes dying and joining, actors restarting),
    and after as much again (bounded: the same as after 10x).
    The 1,000 dead nodes Ray keeps are listed from the start, so the churn leaves the listing's size as
    it is: what grows is the cockpit's, not the cluster's."""
    lines = 200_000
    with synthetic_head(2_000, actors=100_000, jobs=5, dead=1_000, log_rate=100, log_lines=lines) as url:
        term, pid = _cockpit(url, state_dir, "memory")
        try:
            term.wait_for(lambda s: "ALIVE" in s, 180)
            _wait_screen(term, "3", "showing", 180)
            time.sleep(5)
            streamed = _feed_logs(term, url, lines, quick)  # the ring holds 200,000 lines from here on
            for key, needle in (("2", "2 GPUs"), ("1", "1 Cluster")):
                _wait_screen(term, key, needle, 180)
                time.sleep(5)
            time.sleep(SETTLE_S)
            first = rss_mib(pid=pid)
            _get(f"{url}/__control?churn=1")
            streamed += _feed_logs(term, url, 9 * lines, quick)
            for key, needle in (("3", "showing"), ("2", "2 GPUs"), ("1", "1 Cluster")):
                _wait_screen(term, key, needle, 180)
                time.sleep(5)
            time.sleep(SETTLE_S)
            after = rss_mib(pid=pid)
            streamed += _feed_logs(term, url, 10 * lines, quick)  # as much again: does it hold or grow?
            for key, needle in (("3", "showing"), ("2", "2 GPUs"), ("1", "1 Cluster")):
                _wait_screen(term, key, needle, 180)
                time.sleep(5)
            time.sleep(SETTLE_S)
            again = rss_mib(pid=pid)
            quit_app(term, pid, timeout=60)
        finally:
            term.close()
    return {
        "rss_mib_first": first,
        "rss_mib_after_10x": after,
        "rss_mib_after_20x": again,
        "log_stream_mib": streamed,
    }


def run(
    quick: bool, sizes: tuple[int, ...] = (), with_memory: bool = True
) -> tuple[dict[str, Any], list[Row]]:
    sizes = sizes or ((100, 2_000) if quick else (100, 500, 2_000, 5_000))
    build = dashboard_build()
    browser = chromium()
    doc: dict[str, Any] = {"gpus_per_node": GPUS, "actors_per_node": ACTORS_PER_NODE, "sizes": {}}
    rows: list[Row] = []
    state_dir = Path(tempfile.mkdtemp(prefix="cockpit-bench-scale-"))
    try:
        for nodes in sizes:
            _say(f"{nodes} nodes x {GPUS} GPUs")
            static = {"static": str(build)} if build is not None else {}
            extra = dict(actors=ACTORS_PER_NODE * nodes, jobs=5, dead=nodes // 50, log_rate=10, **static)
            with synthetic_head(nodes, **extra) as url:
                if browser and build is not None:
                    anchor = anchor_tab(url, 40.0 if quick else 60.0)
                else:
                    anchor = anchor_documented(url)
                _say(f"  anchor: {anchor['bytes_per_min'] / 2**20:.1f} MiB/min ({anchor['how']})")
                mine = cockpit_load(url, nodes, state_dir)
            doc["sizes"][nodes] = {"anchor": anchor, **mine}
            for screen, label in (("cluster_screen", "Cluster"), ("gpu_screen", "GPU")):
                got = mine[screen]
                share = ratio(got["bytes_per_min"], anchor["bytes_per_min"])
                rows.append(
                    Row(
                        NAME,
                        f"head load, {label} screen, {nodes} nodes",
                        f"{got['bytes_per_min'] / 2**20:.2f} MiB/min",
                        f"{got['requests_per_min']:.1f} req/min; dashboard tab "
                        f"{anchor['bytes_per_min'] / 2**20:.1f} MiB/min, "
                        f"{anchor['requests_per_min']:.1f} req/min; ratio {share:.3f}",
                    )
                )
            cpu = mine["cluster_screen"]["cockpit_cpu_percent_of_core"]
            rows.append(Row(NAME, f"cockpit CPU, Cluster screen, {nodes} nodes", f"{cpu:.2f}% of a core", ""))
        if not with_memory:
            return doc, rows
        _say("memory at 2,000 nodes, 100,000 actors, 200,000 log lines")
        doc["memory"] = mem = memory(state_dir, quick)
        rows.append(
            Row(
                NAME,
                "cockpit RSS, 2,000x8 + 100k actors + 200k lines",
                f"{mem['rss_mib_first']:.0f} MiB",
                f"after 10x more data: {mem['rss_mib_after_10x']:.0f} MiB, "
                f"after 20x: {mem['rss_mib_after_20x']:.0f} MiB "
                f"({mem['log_stream_mib']:.0f} MiB of log streamed)",
            )
        )
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)
    return doc, rows


if __name__ == "__main__":  # a partial run while developing: `python bench/scale.py --sizes 100 --no-memory`
    import argparse
    import sys

    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[100])
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument("--memory-only", action="store_true")
    opts = parser.parse_args()
    # SIGTERM and SIGHUP unwind like Ctrl+C: the synthetic head and the cockpit's terminal are closed.
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda number, _frame: sys.exit(128 + number))
    if opts.memory_only:
        scratch = Path(tempfile.mkdtemp(prefix="cockpit-bench-scale-"))
        try:
            print(json.dumps(memory(scratch, quick=True), indent=1))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        sys.exit(0)
    result, table = run(True, sizes=tuple(opts.sizes), with_memory=not opts.no_memory)
    json.dump(result, sys.stdout, indent=1, default=str)
    for row in table:
        print(f"\n{row.what}: {row.value}  {row.detail}")
