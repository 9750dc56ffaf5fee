"""Provides the first-poll benchmark: how many round trips to the head stand between starting the cockpit
and its first nodes on screen, against a synthetic head (`tests/harness/synthetic_head.py`, 3 nodes x
8 GPUs, in a process of its own) that holds every answer for DELAY seconds, as a distant head (an SSH
link across sites) does.

In this process, alternating: the TUI started headless (`App.run_test`, 120x40) until its state holds
the nodes, and one bare request (`DashboardClient.version()` on a fresh client: connection and one GET),
each at DELAY 0 and at DELAY. The figure is the number of round trips on the first nodes' path: (the
TUI's time at DELAY - at 0) / (the request's time at DELAY - at 0). A first poll that asks its requests
one after the other pays one round trip each (the cluster's version, then its metadata, then its nodes,
then the head's raylet.out before the nodes were shown: 3 to 4); one that asks them together, 1.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from common import Row
from scale import _get, synthetic_head

from cockpit.core.cluster.dashboard import DashboardClient
from cockpit.core.targets import parse_target
from cockpit.ui.app import CockpitApp

NAME = "first_poll"
DELAY_S = 0.1


async def _first_nodes(url: str) -> float:
    app = CockpitApp(parse_target(url))
    started = time.perf_counter()
    async with app.run_test(size=(120, 40)):
        while app.state.snapshot is None or not app.state.snapshot.nodes:
            await asyncio.sleep(0.002)
        return time.perf_counter() - started


async def _one_request(url: str) -> float:
    started = time.perf_counter()
    async with DashboardClient(url) as client:
        await client.version()
    return time.perf_counter() - started


def run(quick: bool) -> tuple[dict[str, Any], list[Row]]:
    """Measure; return the JSON document and the table rows."""
    rounds = 3 if quick else 9
    samples: dict[str, list[float]] = {"tui_0": [], "tui_d": [], "get_0": [], "get_d": []}
    with synthetic_head(3) as url:  # a process of its own, as a head is
        asyncio.run(_first_nodes(url))  # warm-up: imports, the head's first answers
        for _ in range(rounds):
            for delay, suffix in ((0.0, "0"), (DELAY_S, "d")):
                _get(f"{url}/__control?delay={delay}")
                samples[f"tui_{suffix}"].append(asyncio.run(_first_nodes(url)))
                samples[f"get_{suffix}"].append(asyncio.run(_one_request(url)))
    median = {key: statistics.median(values) for key, values in samples.items()}
    trips = (median["tui_d"] - median["tui_0"]) / (median["get_d"] - median["get_0"])
    ms = {key: round(value * 1000, 1) for key, value in median.items()}
    rows = [
        Row(NAME, "first nodes, head answering at once", f"{ms['tui_0']:.0f} ms", f"median of {rounds}"),
        Row(NAME, f"first nodes, head {DELAY_S * 1000:.0f} ms away", f"{ms['tui_d']:.0f} ms", ""),
        Row(NAME, "one request, fresh client: at once; away", f"{ms['get_0']:.0f}; {ms['get_d']:.0f} ms"),
        Row(NAME, "round trips before the first nodes", f"{trips:.2f}", "target: 1 (all asked together)"),
    ]
    return {"rounds": rounds, "delay_s": DELAY_S, "median_ms": ms, "round_trips": trips}, rows
