"""Provides `cockpit status`, `cockpit wait` (the join gate) and `cockpit local up | down | status`."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

from cockpit.cli.common import (
    EXIT_FAIL,
    EXIT_OK,
    EXIT_TIMEOUT,
    EXIT_USAGE,
    add_connect_options,
    connect_options,
    err,
    whole,
)

if TYPE_CHECKING:
    from cockpit.core.cluster.join import JoinProgress
    from cockpit.core.connect.connection import ConnectOptions
    from cockpit.core.slurm.queue import SlurmJob
    from cockpit.core.snapshots import NodeSnapshot
    from cockpit.core.targets import Target


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("local", help="a real multi-node Ray cluster on this machine")
    local = p.add_subparsers(dest="local_command", metavar="ACTION", required=True)
    p = local.add_parser("up", help="start the cluster")
    p.add_argument("--nodes", type=whole(1), default=3)
    p.add_argument("--gpus-per-node", type=whole(0), default=2, help="logical GPUs per node")
    p.add_argument("--cpus-per-node", type=whole(1), default=2, help="logical CPUs per node")
    p.add_argument(
        "--no-auth",
        action="store_true",
        help="no token auth (by default a random token guards it; without, anyone here can submit jobs)",
    )
    p.set_defaults(handler=local_up)
    local.add_parser("down", help="stop it; no Ray process is left").set_defaults(handler=local_down)
    local.add_parser("status", help="its nodes and dashboard address").set_defaults(handler=local_status)

    p = sub.add_parser("status", help="one-shot cluster summary")
    add_connect_options(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=status)

    p = sub.add_parser("wait", help="wait until the cluster has N nodes (and G GPUs)")
    add_connect_options(p)
    p.add_argument("--nodes", type=whole(1), metavar="N", help="nodes to wait for (slurm: the allocation's)")
    p.add_argument("--gpus", type=float, metavar="G", help="GPUs to wait for (slurm: the allocation's)")
    p.add_argument(
        "--timeout", type=float, default=600.0, metavar="S", help="seconds (default 600); exit 3 after"
    )
    p.add_argument("--interval", type=float, default=2.0, metavar="S", help=argparse.SUPPRESS)
    p.set_defaults(handler=wait)


# -- local ---------------------------------------------------------------------------------------


def local_up(args: argparse.Namespace) -> int:
    from cockpit.core.local import processes, record

    cluster = processes.up(
        args.nodes,
        args.gpus_per_node,
        args.cpus_per_node,
        auth=not args.no_auth,
        progress=lambda m: print(m, file=sys.stderr),
    )
    print(f"local cluster up: {len(cluster.nodes)} nodes, dashboard {cluster.dashboard_url}")
    if cluster.auth_token:
        print(f"token auth on: the cockpit reads the token from {record.token_file()}")
    else:
        print("token auth OFF: anyone on this machine can submit jobs to it")
    print("use it as TARGET `local`, e.g. `cockpit connect local`; stop it with `cockpit local down`")
    return EXIT_OK


def local_down(args: argparse.Namespace) -> int:
    from cockpit.core.local import processes

    if processes.down():
        print("local cluster stopped")
    else:
        print("no local cluster was running")
    return EXIT_OK


def local_status(args: argparse.Namespace) -> int:
    from cockpit.core.connect.connection import ConnectOptions
    from cockpit.core.local import processes, record
    from cockpit.core.targets import Target

    running = record.load()
    if running is None or not processes.is_running(running):
        err("no local cluster is running: start one with `cockpit local up`.")
        return EXIT_FAIL
    print(f"dashboard: {running.dashboard_url}")
    print(f"gcs:       {running.gcs_address}")
    print_nodes(asyncio.run(fetch_nodes(Target(kind="local", raw="local"), ConnectOptions())))
    return EXIT_OK


# -- status --------------------------------------------------------------------------------------


async def fetch_nodes(target: Target, options: ConnectOptions) -> tuple[NodeSnapshot, ...]:
    from cockpit.core.connect.connection import open_dashboard

    async with open_dashboard(target, options) as client:
        return await client.nodes(fresh=True)


def print_nodes(nodes: tuple[NodeSnapshot, ...]) -> None:
    for line in node_lines(nodes, time.time()):
        print(line)


def node_lines(nodes: tuple[NodeSnapshot, ...], now: float) -> list[str]:
    """`cockpit status`'s node table: a header, then a line a node, each of the cluster's strings cleaned
    (one line, no escape, no control character) and cut to its column; a node id is its first 8
    characters, without "…", as it is typed back (`cockpit logs --node`)."""
    from cockpit.core.text import clean, cut
    from cockpit.core.units import ago, human_bytes, percent

    lines = [f"{'NODE':10} {'HOST':16} {'IP':15} {'STATE':6} {'CPU':>5} {'MEMORY':>21} {'GPUS':>4}  JOINED"]
    for node in nodes:
        mem = f"{human_bytes(node.mem_used_bytes)}/{human_bytes(node.mem_total_bytes)}"
        joined = ago(now - node.start_time) if node.start_time else "?"
        head = "*" if node.is_head else " "
        line = (
            f"{clean(node.node_id)[:8]}{head} {cut(node.hostname, 16):16} {cut(node.ip, 39):15} "
            f"{cut(node.state, 10):6} {percent(node.cpu_percent):>5} {mem:>21} "
            f"{node.logical_gpus:>4g}  {joined}"
        )
        if not node.alive:
            line += f"  ({cut(node.state_message, 300) or 'no reason given'})"
        lines.append(line)
    return lines


def _node_json(node: NodeSnapshot) -> dict[str, Any]:
    from cockpit.core.snapshots import NA

    def num(value: object) -> object:
        return None if value is NA else value

    return {
        "node_id": node.node_id,
        "hostname": node.hostname,
        "ip": node.ip,
        "is_head": node.is_head,
        "state": node.state,
        "state_message": node.state_message,
        "gpus": node.logical_gpus,
        "gpu_telemetry": len(node.gpus),
        "cpus": node.logical_cpus,
        "cpu_percent": num(node.cpu_percent),
        "mem_used_bytes": num(node.mem_used_bytes),
        "mem_total_bytes": num(node.mem_total_bytes),
        "start_time": node.start_time,
        "end_time": node.end_time,
    }


def status(args: argparse.Namespace) -> int:
    from cockpit.core.targets import parse_target

    target = parse_target(args.target)
    return asyncio.run(_status(target, connect_options(args), args.json))


async def _status(target: Target, options: ConnectOptions, as_json: bool) -> int:
    from cockpit.core.cluster.errors import DashboardOff
    from cockpit.core.cluster.join import JoinProgress
    from cockpit.core.connect.connection import open_connection
    from cockpit.core.snapshots import NA

    async with open_connection(target, options) as connection:
        client = connection.client
        try:
            info, nodes, jobs = await asyncio.gather(
                client.cluster_info(), client.nodes(fresh=True), client.jobs()
            )
        except DashboardOff as off:
            if connection.head is None:
                raise
            # Nodes and join progress from the head's own Ray over SSH; the rest needs the dashboard.
            nodes = await connection.head.nodes()
            return _status_without_dashboard(target, connection.slurm, nodes, str(off), as_json)
        url = client.display_url
    job = connection.slurm
    progress = JoinProgress.of(nodes, job.num_nodes, job.gpus) if job else JoinProgress.of(nodes)
    job_counts = Counter(job.status for job in jobs)
    from cockpit.core.cluster.versions import range_warning
    from cockpit.core.text import clean, cut

    warning = range_warning(info.ray_version)
    if warning:
        err(clean(warning))
    if as_json:
        doc = {
            "target": target.raw,
            "dashboard": url,
            "ray_version": info.ray_version,
            "python_version": None if info.python_version is NA else info.python_version,
            "session_name": info.session_name,
            "alive_nodes": progress.alive_nodes,
            "dead_nodes": len(progress.dead),
            "gpus": progress.alive_gpus,
            "nodes": [_node_json(n) for n in nodes],
            "jobs": dict(job_counts),
        }
        if job is not None:
            doc["slurm"] = slurm_json(job)
        print(json.dumps(doc, indent=2))
        return EXIT_OK
    print(clean(f"{target.raw}  Ray {info.ray_version}  Python {info.python_version}  dashboard {url}"))
    if job is not None:
        print(slurm_line(job))
    print(progress.summary())
    for line in progress.death_lines():
        print(f"  {line}")
    print_nodes(nodes)
    if jobs:
        counts = ", ".join(f"{count} {cut(status, 20)}" for status, count in sorted(job_counts.items()))
        print(f"jobs: {counts}")
    return EXIT_OK


def _status_without_dashboard(
    target: Target, job: SlurmJob | None, nodes: tuple[NodeSnapshot, ...], why: str, as_json: bool
) -> int:
    """`cockpit status` of a head that runs Ray without its dashboard: its nodes and join progress (from
    its GCS, over SSH), the one line that says so on stderr, no Ray version and no jobs."""
    from cockpit.core.cluster.join import JoinProgress

    progress = JoinProgress.of(nodes, job.num_nodes, job.gpus) if job else JoinProgress.of(nodes)
    err(f"note: {why}")
    if as_json:
        doc: dict[str, Any] = {
            "target": target.raw,
            "dashboard": None,
            "without_dashboard": why,
            "ray_version": None,
            "python_version": None,
            "session_name": None,
            "alive_nodes": progress.alive_nodes,
            "dead_nodes": len(progress.dead),
            "gpus": progress.alive_gpus,
            "nodes": [_node_json(n) for n in nodes],
            "jobs": None,
        }
        if job is not None:
            doc["slurm"] = slurm_json(job)
        print(json.dumps(doc, indent=2))
        return EXIT_OK
    from cockpit.core.text import clean

    print(clean(f"{target.raw}  no dashboard: nodes from the head's Ray over SSH"))
    if job is not None:
        print(slurm_line(job))
    print(progress.summary())
    for line in progress.death_lines():
        print(f"  {line}")
    print_nodes(nodes)
    return EXIT_OK


def slurm_line(job: SlurmJob) -> str:
    """ "slurm job 123 (name) RUNNING on 4 nodes (gpu[01-04]) · 3h12m left" """
    from cockpit.core.text import clean
    from cockpit.core.units import duration

    left = job.seconds_left(time.time())
    walltime = f" · {duration(left)} left" if left is not None else " · no time limit"
    return clean(f"{job.describe()} on {job.num_nodes} node(s) ({job.node_list}){walltime}")


def slurm_json(job: SlurmJob) -> dict[str, Any]:
    return {
        "job_id": job.job_id,
        "name": job.name,
        "state": job.state,
        "reason": job.reason,
        "nodes": list(job.hosts),
        "gpus": job.gpus,
        "start_time": job.start_time,
        "end_time": job.end_time,
        "seconds_left": job.seconds_left(time.time()),
    }


# -- wait: the join gate -------------------------------------------------------------------------


def wait(args: argparse.Namespace) -> int:
    from cockpit.core.targets import parse_target

    target = parse_target(args.target)
    if args.nodes is None and target.kind != "slurm":
        err("--nodes N is needed (only a slurm:JOBID target knows its shape: its allocation's).")
        return EXIT_USAGE
    return asyncio.run(
        _wait(target, connect_options(args), args.nodes, args.gpus, args.timeout, args.interval)
    )


async def _wait(
    target: Target,
    options: ConnectOptions,
    nodes: int | None,
    gpus: float | None,
    timeout: float,
    interval: float,
) -> int:
    """The join gate's wait (`cockpit.core.connect.wait`), its rounds printed on stderr: over one line on a
    terminal, else a line each time what it says changes. A permanent error ends it at once (raised: one
    line, exit 1); a timeout exits 3 with what is missing."""
    from cockpit.core.connect.wait import WaitRound, wait_for_shape
    from cockpit.core.text import clean
    from cockpit.core.units import duration

    live = sys.stderr.isatty()
    said = ""

    def show(now: WaitRound) -> None:
        nonlocal said
        text = clean(now.line)
        line = f"[{duration(now.waited)}] {text}"
        if live:
            print(f"\r\x1b[K{line}", end="", file=sys.stderr, flush=True)
        elif text != said:
            print(line, file=sys.stderr, flush=True)
        said = text

    try:
        outcome = await wait_for_shape(target, options, nodes, gpus, timeout, interval, on_round=show)
    finally:
        if live and said:
            print(file=sys.stderr)
    if outcome.ready:
        assert outcome.last.progress is not None
        print(f"ready: {outcome.last.progress.summary()}")
        return EXIT_OK
    if outcome.last.progress is None:
        err(f"timed out after {duration(timeout)}: {clean(outcome.last.problem)}")
        return EXIT_TIMEOUT
    _say_what_is_missing(outcome.last.progress, outcome.expected_nodes, outcome.expected_gpus, timeout)
    return EXIT_TIMEOUT


def _say_what_is_missing(progress: JoinProgress, nodes: int, gpus: float | None, timeout: float) -> None:
    from cockpit.core.units import duration

    missing = []
    if progress.missing_nodes:
        missing.append(f"{progress.missing_nodes} node{'s' if progress.missing_nodes != 1 else ''} missing")
    if progress.missing_gpus:
        missing.append(f"{progress.missing_gpus:g} GPU{'s' if progress.missing_gpus != 1 else ''} missing")
    gpus_text = f", {progress.alive_gpus:g}/{gpus:g} GPUs" if gpus else ""
    err(
        f"timed out after {duration(timeout)}: {' and '.join(missing)} "
        f"({progress.alive_nodes}/{nodes} nodes joined{gpus_text})"
    )
    for line in progress.death_lines():
        print(f"  {line}", file=sys.stderr)
