"""Provides the actor-list head-cost benchmark: what one fetch of the Actors screen costs the Ray head
at 1,000 and 10,000 actors, against `ray list actors --detail` in the same run.

A driver registers N actors that ask for a resource no node has (`cockpit_bench_never`), so the head's
actor table really holds N actors (PENDING_CREATION) without N worker processes on a 2-core machine.
Then, in rounds, the order alternating:

- the cockpit's fetch: what `cockpit.ui.feeds.actors.ActorsFeed` does once (`list_actors` with the
  10,000 limit, its summary and the alive workers, and the "why not running" report, concurrently);
- `ray list actors --detail --limit 10000 --format json`, the Ray CLI's answer to the same question
  (a whole process: what a person would otherwise run).

Measured per call: wall time, and the CPU time the head's processes (GCS and every dashboard process
of the cluster) spent meanwhile, from their POSIX CPU clocks. The feed's cadence follows from the wall
time (`max(5 s, 10 x fetch)`), so the head's average load while the screen is shown is reported too.
The bytes of one `/api/v0/actors?detail=true&limit=10000` answer are recorded.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from common import (
    BIN,
    PYTHON,
    Row,
    Stats,
    bench_env,
    cluster_token,
    cpu_clock_seconds,
    pids_naming,
    ratio,
    timed_run,
)

from cockpit.core.actors.listing import ActorQuery
from cockpit.core.cluster.dashboard import DashboardClient
from cockpit.core.local.record import LocalCluster
from cockpit.ui.feeds.actors import HEAD_SHARE, LIST_LIMIT, LIST_SECONDS, fetch_actor_table

NAME = "actor_list_head"
SIDES = ("first", "steady", "ray")
WHAT = ("wall_s", "head_cpu_s")

DRIVER = """
import sys, time
import ray

ray.init(address=sys.argv[1], logging_level="ERROR")


@ray.remote(num_cpus=0, resources={"cockpit_bench_never": 1})
class BenchRolloutWorker:
    pass


made = []
for line in sys.stdin:  # one target count per line, when the benchmark is ready for it
    while len(made) < int(line):
        made.append(BenchRolloutWorker.options(name=f"rollout_{len(made)}").remote())
    print(f"made {len(made)}", flush=True)
time.sleep(3600)
"""


def head_pids(cluster: LocalCluster, exclude: set[int]) -> list[int]:
    """The head's GCS and dashboard processes: the cluster's own (they name its directory) whose title
    or command line says so; Ray retitles its dashboard modules (`ray-dashboard-StateHead`, ...)."""
    found = []
    for pid in pids_naming(cluster.root):
        if pid in exclude:
            continue
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if comm == "gcs_server" or "dashboard" in comm or "dashboard/dashboard.py" in cmdline:
            found.append(pid)
    return found


def head_cpu(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            total += cpu_clock_seconds(pid)
        except RuntimeError:
            continue
    return total


async def _wait_for(client: DashboardClient, n: int, timeout: float = 600.0) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        summary = await client.actor_summary(filters=[("class_name", "=", "BenchRolloutWorker")])
        if summary.total >= n:
            return time.monotonic() - started
        await asyncio.sleep(1.0)
    raise RuntimeError(f"the head did not list {n} actors within {timeout:.0f} s")


async def _cockpit_fetch(client: DashboardClient, steady: bool) -> int:
    """One fetch as the feed makes it: the first (list, summary, pending states asked for) or, STEADY,
    every later one while the list holds every actor (the list alone, the report built from it)."""
    nodes = (await client.node_table()).rows
    listing, _report = await fetch_actor_table(client, ActorQuery(), nodes, everything=steady)
    return len(listing.rows)


def _answer_bytes(cluster: LocalCluster, state_dir: Path) -> int:
    url = f"{cluster.dashboard_url}/api/v0/actors?detail=true&limit={LIST_LIMIT}"
    request = urllib.request.Request(url)
    token = cluster_token(state_dir)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=120) as answer:  # loopback, our own cluster
        return len(answer.read())


def run(cluster: LocalCluster, state_dir: Path, quick: bool) -> tuple[dict[str, Any], list[Row]]:
    sizes = (1000,) if quick else (1000, 10000)
    rounds = 3 if quick else 5
    env = bench_env(state_dir)
    driver = subprocess.Popen(
        [PYTHON, "-c", DRIVER, cluster.gcs_address],
        env=env,
        stdin=subprocess.PIPE,
        text=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    pids = head_pids(cluster, exclude={driver.pid})
    ray_cli = [str(BIN / "ray"), "list", "actors", "--detail", "--limit", str(LIST_LIMIT), "--format", "json"]
    ray_env = {**env, "RAY_ADDRESS": cluster.dashboard_url}
    doc: dict[str, Any] = {"rounds": rounds, "head_pids": len(pids), "sizes": {}}
    rows: list[Row] = []
    try:
        for n in sizes:
            assert driver.stdin is not None
            driver.stdin.write(f"{n}\n")
            driver.stdin.flush()

            async def measure(n: int = n) -> dict[str, list[float] | float]:
                token = cluster_token(state_dir)
                async with DashboardClient(cluster.dashboard_url, token=token) as client:
                    waited = await _wait_for(client, n)
                    await _cockpit_fetch(client, steady=False)  # warm-up
                    samples: dict[str, list[float]] = {
                        f"{side}_{what}": [] for side in SIDES for what in WHAT
                    }
                    for k in range(rounds):
                        for side in SIDES[k % 3 :] + SIDES[: k % 3]:  # the order rotates every round
                            before = head_cpu(pids)
                            start = time.perf_counter()
                            if side == "ray":
                                _took, out = await asyncio.to_thread(timed_run, ray_cli, ray_env, 300.0)
                                listed = out.count('"actor_id"')
                            else:
                                listed = await _cockpit_fetch(client, steady=side == "steady")
                            samples[f"{side}_wall_s"].append(time.perf_counter() - start)
                            samples[f"{side}_head_cpu_s"].append(head_cpu(pids) - before)
                            if listed < min(n, LIST_LIMIT):
                                raise RuntimeError(f"{side}: listed {listed} of {n} actors")
                    return {"listed_after_s": waited, **samples}

            samples = asyncio.run(measure())
            samples["answer_bytes"] = _answer_bytes(cluster, state_dir)
            stats = {key: Stats.of(value) for key, value in samples.items() if isinstance(value, list)}
            steady_wall, steady_cpu = stats["steady_wall_s"], stats["steady_head_cpu_s"]
            cadence = max(LIST_SECONDS, HEAD_SHARE * steady_wall.median)
            samples["feed_cadence_s"] = cadence
            samples["head_load_while_shown"] = steady_cpu.median / cadence
            samples["ratio_ray_over_steady_head_cpu"] = ratio(
                stats["ray_head_cpu_s"].median, steady_cpu.median
            )
            doc["sizes"][str(n)] = samples

            def fmt(side: str, stats: dict[str, Stats] = stats) -> str:
                wall, cpu = stats[f"{side}_wall_s"], stats[f"{side}_head_cpu_s"]
                return f"{wall.median * 1000:.0f} ms wall, head CPU {cpu.median * 1000:.0f} ms"

            rows += [
                Row(
                    NAME,
                    f"{n} actors: cockpit, first fetch (list+summary+pending)",
                    fmt("first"),
                    f"n={rounds}",
                ),
                Row(
                    NAME,
                    f"{n} actors: cockpit, each later fetch (list, report from it)",
                    fmt("steady"),
                    f"n={rounds}; answer {samples['answer_bytes'] / 1e6:.1f} MB",
                ),
                Row(NAME, f"{n} actors: ray list actors --detail (process)", fmt("ray"), f"n={rounds}"),
                Row(
                    NAME,
                    f"{n} actors: head load while the Actors screen is shown",
                    f"{100 * samples['head_load_while_shown']:.1f}% of a core",
                    f"one fetch every {cadence:.1f} s",
                ),
            ]
    finally:
        os.killpg(driver.pid, 9)
        driver.wait(timeout=30)
    doc["note"] = json.dumps(
        {"limit": LIST_LIMIT, "cadence_rule": f"max({LIST_SECONDS}, {HEAD_SHARE} x fetch)"}
    )
    return doc, rows
