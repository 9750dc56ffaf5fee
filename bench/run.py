"""Provides the benchmark runner: `python bench/run.py [--quick] [--only NAME ...]`.

Runs the start-up benchmark first (it needs no cluster), the head-load benchmark (`scale`: a synthetic
head in a process of its own, the dashboard's web page in headless chromium), then starts ONE real
local Ray cluster
(3 nodes x 2 logical GPUs, remembered in a private temp directory; 2 nodes when the stacks benchmark is
the largest that needs it, 1 when only the SSH-tunnel or actor-list benchmarks do) for the
cluster-status, SSH-tunnel, idle-CPU, stacks and actor-list head-cost benchmarks, and stops it in a
`finally`, also on Ctrl-C or SIGTERM; any process of that cluster that `down` missed (found by the
files it holds under the cluster's private directory) is recorded and ended by pid. Prints a table and
writes every sample to bench/results/YYYYmmdd-HHMMSS.json. Times are only compared within one run.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import actor_list_head
import actor_table
import alerts_idle
import cluster_status
import first_poll
import first_screen
import gpu_view
import idle_cpu
import log_ingest
import log_search
import metrics_parse
import scale
import stacks
import startup
import tunnel
from common import REPO, Row, describe, end_processes, load_average, machine, pids_naming, tree

from cockpit.core.local import processes

NODES, GPUS_PER_NODE = 3, 2
BENCHES = (
    "startup",
    "cluster_status",
    "tunnel",
    "idle_cpu",
    "actor_list_head",
    "log_ingest",
    "log_search",
    "gpu_view",
    "actor_table",
    "stacks",
    "metrics_parse",
    "scale",
    "alerts_idle",
    "first_screen",
    "first_poll",
)
CLUSTER_BENCHES = {
    "cluster_status",
    "tunnel",
    "idle_cpu",
    "stacks",
    "actor_list_head",
    "alerts_idle",
    "first_screen",
}
"""Those that run on the local cluster; the tunnel and actor-list benchmarks need only 1 node, the
stacks benchmark 2 (its job's actors are spread over the nodes)."""
RESULTS = REPO / "bench" / "results"


def _say(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def _stop_on_signal(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds through the `finally` that stops the cluster


def _with_cluster(selected: Sequence[str], quick: bool, results: dict[str, Any], rows: list[Row]) -> None:
    state_dir = Path(tempfile.mkdtemp(prefix="cockpit-bench-"))
    # The demo job's 4.5 GPUs need the 3 nodes (and the first screen shows the same cluster as idle_cpu).
    full = {"cluster_status", "idle_cpu", "alerts_idle", "first_screen"}
    nodes = NODES if full & set(selected) else 2 if "stacks" in selected else 1
    root = ""
    try:
        _say(f"starting a local cluster: {nodes} node(s) x {GPUS_PER_NODE} GPUs (state in {state_dir})")
        started = time.monotonic()
        cluster = processes.up(nodes, GPUS_PER_NODE, directory=state_dir, progress=_say)
        root = cluster.root
        up_s = time.monotonic() - started
        results["cluster"] = {"nodes": nodes, "gpus_per_node": GPUS_PER_NODE, "up_s": up_s}
        if "cluster_status" in selected:
            _say("cluster_status ...")
            results["cluster_status"], new = cluster_status.run(cluster, state_dir, nodes, quick)
            rows += new
        if "tunnel" in selected:
            _say("tunnel ...")
            results["tunnel"], new = tunnel.run(cluster, state_dir, quick)
            rows += new
        if "idle_cpu" in selected:
            _say("idle_cpu ...")
            results["idle_cpu"], new = idle_cpu.run(state_dir, nodes, quick)
            rows += new
        if "first_screen" in selected:  # before any job: the screen shows the cluster alone
            _say("first_screen ...")
            results["first_screen"], new = first_screen.run(state_dir, nodes, quick)
            rows += new
        if "alerts_idle" in selected:  # its demo job is stopped before the next benchmark
            _say("alerts_idle ...")
            results["alerts_idle"], new = alerts_idle.run(cluster, state_dir, quick)
            rows += new
        if "stacks" in selected:  # its job is stopped before the next benchmark
            _say("stacks ...")
            results["stacks"], new = stacks.run(cluster, state_dir, quick)
            rows += new
        if "actor_list_head" in selected:  # last: its 10,000 actors stay in the head's table
            _say("actor_list_head ...")
            results["actor_list_head"], new = actor_list_head.run(cluster, state_dir, quick)
            rows += new
    finally:
        _say("stopping the local cluster")
        processes.down(directory=state_dir)
        left = pids_naming(root) if root else []
        record = results.setdefault("cluster", {})
        record["processes_left_after_down"] = describe(left)
        if left:
            # Ours beyond doubt: they hold files under this run's private cluster directory.
            _say(f"WARNING: processes.down left processes of this cluster: {describe(left)}; ending them")
            still = end_processes(left)
            record["processes_left_after_runner_cleanup"] = describe(still)
            if still:
                _say(f"WARNING: still running after SIGKILL: {describe(still)}")
        shutil.rmtree(state_dir, ignore_errors=True)


def _bytecode_as_installed() -> None:
    """The checkout's bytecode compiled, and written from now on, as an installed cockpit has it (pip and
    pipx compile at install): where the environment says PYTHONDONTWRITEBYTECODE (some CI images do),
    every process the benchmarks start would otherwise compile the cockpit's sources again, about 0.4 s
    of a TUI's start here, which no user pays."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    compileall.compile_dir(REPO / "cockpit", quiet=1, workers=0)
    compileall.compile_dir(REPO / "tests" / "harness", quiet=1, workers=0)


def _print_table(rows: list[Row]) -> None:
    header = Row("bench", "measurement", "median (min-max) / ratio", "detail")
    widths = [max(len(getattr(r, f)) for r in [header, *rows]) for f in ("bench", "what", "value")]
    for row in [header, *rows]:
        print(f"{row.bench:{widths[0]}}  {row.what:{widths[1]}}  {row.value:{widths[2]}}  {row.detail}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer rounds and a 10 s idle window")
    parser.add_argument("--only", nargs="+", choices=BENCHES, default=list(BENCHES), metavar="NAME")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _stop_on_signal)
    signal.signal(signal.SIGHUP, _stop_on_signal)
    _bytecode_as_installed()
    results: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "quick": args.quick,
        "machine": machine(),
        "tree": tree(),
        "load_before": load_average(),
    }
    rows: list[Row] = []
    if "startup" in args.only:
        _say("startup ...")
        results["startup"], new = startup.run(args.quick)
        rows += new
    if "log_ingest" in args.only:  # needs no cluster
        _say("log_ingest ...")
        results["log_ingest"], new = log_ingest.run(args.quick)
        rows += new
    if "first_poll" in args.only:  # a synthetic head, no cluster
        _say("first_poll ...")
        results["first_poll"], new = first_poll.run(args.quick)
        rows += new
    if "log_search" in args.only:  # needs no cluster
        _say("log_search ...")
        results["log_search"], new = log_search.run(args.quick)
        rows += new
    if "gpu_view" in args.only:  # needs no cluster
        _say("gpu_view ...")
        results["gpu_view"], new = gpu_view.run(args.quick)
        rows += new
    if "actor_table" in args.only:  # needs no cluster
        _say("actor_table ...")
        results["actor_table"], new = actor_table.run(args.quick)
        rows += new
    if "metrics_parse" in args.only:  # needs no cluster
        _say("metrics_parse ...")
        results["metrics_parse"], new = metrics_parse.run(args.quick)
        rows += new
    if "scale" in args.only:  # a synthetic head, no cluster
        _say("scale ...")
        results["scale"], new = scale.run(args.quick)
        rows += new
    if CLUSTER_BENCHES & set(args.only):
        _with_cluster(args.only, args.quick, results, rows)
    results["load_after"] = load_average()
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{time.strftime('%Y%m%d-%H%M%S')}{'-quick' if args.quick else ''}.json"
    path.write_text(json.dumps(results, indent=2, default=str))
    info = results["machine"]
    print(
        f"\n{info['nproc']} cores, Python {info['python']}, ray {info['ray']}, textual {info['textual']}; "
        f"load average before {results['load_before'][0]:.2f}, after {results['load_after'][0]:.2f}\n"
    )
    _print_table(rows)
    measured = results["tree"]
    if measured["changed"]:
        print(f"\nmeasured {measured['commit']} plus uncommitted: {', '.join(measured['changed'])}")
    print(f"\nresults: {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
