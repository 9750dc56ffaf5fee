"""Provides the "what is the cluster doing" benchmark: `ray status` vs `cockpit status` vs the HTTP client.

Three ways to the same answer, measured in paired rounds after one warm-up of each, the order rotated
every round so that neither side always runs first under the machine's changing load:

- `ray status --address GCS` as a whole process (what people type today);
- `cockpit status local --json` as a whole process, Python start-up included;
- `DashboardClient.cluster_status()` and `nodes()` concurrently (`asyncio.gather`, 3 requests) on one
  reused set of HTTP connections, in this process: the cost of one refresh of a running cockpit.

Every answer is checked (node count) so that a fast failure can never pass for a fast answer. The
autoscaler's status lists a joined node a few seconds after the node table does, so measuring starts
once the status lists them all; that lag is recorded.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from common import BIN, Row, Stats, bench_env, cluster_token, ratio, timed_run

from cockpit.core.cluster.dashboard import DashboardClient
from cockpit.core.local.record import LocalCluster

NAME = "cluster_status"


def _lists_nodes(text: str, nodes: int) -> bool:
    return "Node status" in text and text.count("node_") >= nodes


def _check_ray_status(text: str, nodes: int) -> None:
    if not _lists_nodes(text, nodes):
        raise RuntimeError(f"`ray status` did not list {nodes} nodes:\n{text[:1000]}")


async def _until_status_lists_nodes(client: DashboardClient, nodes: int, timeout: float = 60.0) -> float:
    """Seconds until the autoscaler's status lists every node: it lags the node table after a join."""
    started = time.monotonic()
    while not _lists_nodes((await client.cluster_status()).text, nodes):
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"the cluster status did not list {nodes} nodes within {timeout:.0f} s")
        await asyncio.sleep(0.2)
    return time.monotonic() - started


async def _measure(
    cluster: LocalCluster, state_dir: Path, nodes: int, rounds: int
) -> tuple[float, dict[str, list[float]]]:
    env = bench_env(state_dir)
    ray_argv = [str(BIN / "ray"), "status", "--address", cluster.gcs_address]
    cockpit_argv = [str(BIN / "cockpit"), "status", "local", "--json"]
    client = DashboardClient(cluster.dashboard_url, token=cluster_token(state_dir))

    async def ray_status() -> float:
        took, out = await asyncio.to_thread(timed_run, ray_argv, env)
        _check_ray_status(out, nodes)
        return took

    async def cockpit_status() -> float:
        took, out = await asyncio.to_thread(timed_run, cockpit_argv, env)
        if json.loads(out)["alive_nodes"] != nodes:
            raise RuntimeError(f"`cockpit status` did not see {nodes} alive nodes: {out[:500]}")
        return took

    async def http() -> float:
        started = time.perf_counter()
        status, snapshot = await asyncio.gather(client.cluster_status(), client.nodes())
        took = time.perf_counter() - started
        _check_ray_status(status.text, nodes)
        if sum(1 for n in snapshot if n.alive) != nodes:
            raise RuntimeError(f"the dashboard listed {len(snapshot)} nodes, expected {nodes} alive")
        return took

    ways: dict[str, Callable[[], Awaitable[float]]] = {
        "ray_status": ray_status,
        "cockpit_status": cockpit_status,
        "http": http,
    }
    samples: dict[str, list[float]] = {key: [] for key in ways}
    try:
        lag = await _until_status_lists_nodes(client, nodes)
        for way in ways.values():  # warm-up: page cache, .pyc files, the dashboard's first answers
            await way()
        keys = list(ways)
        for index in range(rounds):
            for key in keys[index % 3 :] + keys[: index % 3]:
                samples[key].append(await ways[key]())
    finally:
        await client.close()
    return lag, samples


def run(cluster: LocalCluster, state_dir: Path, nodes: int, quick: bool) -> tuple[dict[str, Any], list[Row]]:
    """Measure; return the JSON document and the table rows."""
    rounds = 3 if quick else 7
    lag, samples = asyncio.run(_measure(cluster, state_dir, nodes, rounds))
    stats = {key: Stats.of(values) for key, values in samples.items()}
    ray_s, cockpit_s, http_s = stats["ray_status"], stats["cockpit_status"], stats["http"]
    ratios = {
        "ray_status_over_cockpit_status": ratio(ray_s.median, cockpit_s.median),
        "ray_status_over_http": ratio(ray_s.median, http_s.median),
    }
    doc = {
        "rounds": rounds,
        "nodes": nodes,
        "status_listed_all_nodes_after_s": lag,
        "stats_s": {key: s.as_dict() for key, s in stats.items()},
        "samples_s": samples,
        "ratios_of_medians": ratios,
    }

    def fmt(s: Stats) -> str:
        return f"{s.median * 1000:.0f} ms ({s.min * 1000:.0f}-{s.max * 1000:.0f})"

    rows = [
        Row(NAME, "ray status --address (process)", fmt(ray_s), f"n={rounds}"),
        Row(NAME, "cockpit status local --json (process)", fmt(cockpit_s), f"n={rounds}"),
        Row(NAME, "cluster_status()+nodes(), reused session", fmt(http_s), f"n={rounds}"),
        Row(NAME, "ratio ray status / cockpit status", f"{ratios['ray_status_over_cockpit_status']:.1f}x"),
        Row(NAME, "ratio ray status / HTTP refresh", f"{ratios['ray_status_over_http']:.0f}x"),
    ]
    return doc, rows
