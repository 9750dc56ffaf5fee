"""The first screen's first poll against a synthetic head (no Ray): the cluster's info and its nodes are
asked together, one round trip to a distant head rather than three, and the head's raylet.out (the memory
monitor's threshold) is read beside the polls, never holding up the first nodes. Behaviour only: which
requests are under way together while the head holds its answers; no time is asserted."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cockpit.core.connect.connection import ConnectOptions
from cockpit.core.targets import parse_target
from cockpit.ui.app import CockpitApp
from tests.harness.run import until
from tests.harness.synthetic_head import HeadShape, SyntheticHead

FIRST_POLL = ("/api/version", "/api/v0/cluster_metadata", "/api/v0/nodes", "/nodes?view=summary")


@pytest.fixture
def head() -> Iterator[SyntheticHead]:
    with SyntheticHead(HeadShape(nodes=3, gpus=1)) as running:
        yield running


def under_way(head: SyntheticHead, endpoint: str) -> int:
    return int(head.stats.snapshot()["endpoints"].get(endpoint, {}).get("in_flight", 0))


async def test_the_first_poll_asks_all_at_once_and_no_log_read_holds_the_nodes(head: SyntheticHead) -> None:
    head.set_stall(True)  # every answer held: what the cockpit asks before any answer is under way at once
    # Requests may wait 60 s: a first poll that waited on the held log read would not show nodes in 30.
    app = CockpitApp(parse_target(head.url), ConnectOptions(timeout=60.0))
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: all(under_way(head, e) for e in FIRST_POLL), timeout=30)
        # Only the log reads held from here: the nodes come while the head's raylet.out is still asked.
        head.stall_only = ("/api/v0/logs",)
        await until(pilot, lambda: under_way(head, "/api/v0/logs/file") > 0, timeout=30)
        await until(pilot, lambda: app.state.snapshot is not None and len(app.state.snapshot.nodes) == 3, 30)
        assert under_way(head, "/api/v0/logs/file") > 0
        assert app.state.info is not None and app.state.info.ray_version
        head.set_stall(False)
        await until(pilot, lambda: under_way(head, "/api/v0/logs/file") == 0, timeout=30)
        assert app.state.connection.phase == "connected"
