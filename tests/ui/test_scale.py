"""The TUI against a synthetic head of 2,000 nodes x 8 GPUs and 12,000 actors (`tests/harness/
synthetic_head.py`; no Ray): every main screen renders, the Actors screen says "showing N of M" where
Ray's 10,000-row cap cuts the list, and the app survives a 500 and a stall, the status bar saying how old
the data shown is. Behaviour only: no timing is asserted (the head-load figures are `bench/scale.py`'s).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cockpit.core.connect.connection import ConnectOptions
from cockpit.core.targets import parse_target
from cockpit.ui.app import CockpitApp
from cockpit.ui.navigation import MAIN_SCREENS
from cockpit.ui.widgets.node_table import NodeTable
from cockpit.ui.widgets.status_bar import StatusBar
from cockpit.ui.widgets.text_line import TextLine
from tests.harness.run import until
from tests.harness.synthetic_head import HeadShape, SyntheticHead

SHAPE = HeadShape(nodes=2_000, gpus=8, actors=12_000, jobs=3, dead=20, log_rate=20.0, log_lines=500)


@pytest.fixture(scope="module")
def big_head() -> Iterator[SyntheticHead]:
    with SyntheticHead(SHAPE) as head:
        yield head


async def test_every_screen_at_2000_nodes_and_survives_a_500_and_a_stall(big_head: SyntheticHead) -> None:
    head = big_head
    app = CockpitApp(parse_target(head.url), ConnectOptions(timeout=5.0))
    async with app.run_test(size=(160, 45)) as pilot:
        bar = app.screen.query_one(StatusBar)
        await until(pilot, lambda: app.state.snapshot is not None, timeout=60)
        assert app.state.snapshot is not None
        assert len(app.state.snapshot.nodes) == SHAPE.nodes + SHAPE.dead
        table = app.screen.query_one(NodeTable)
        await until(pilot, lambda: table.row_count == SHAPE.nodes + SHAPE.dead, timeout=30)

        for screen in MAIN_SCREENS:
            await pilot.press(screen.key)
            await until(pilot, lambda s=screen: isinstance(app.screen, s.screen), timeout=30)
            await pilot.pause()
            assert app.screen.query_one(StatusBar).render().plain.startswith(app.screen.TITLE)
            if screen.mode == "gpus":
                await until(pilot, lambda: app.state.gpu_fleet is not None, timeout=60)
                fleet = app.state.gpu_fleet
                assert fleet is not None and len(fleet.rows) >= (SHAPE.nodes - 1) * SHAPE.gpus
            if screen.mode == "actors":
                showing = app.screen.query_one("#actor-showing", TextLine)
                await until(pilot, lambda w=showing: "showing" in w.render().plain, timeout=60)
                line = showing.render().plain
                assert "showing 10000 of" in line, line
                assert "the cluster lists only 10000 of 12000" in line, line
                assert app.state.actor_table is not None
                assert len(app.state.actor_table.listing.rows) == 10_000

        await pilot.press("1")
        bar = app.screen.query_one(StatusBar)
        head.fail = ("/",)  # every answer a 500
        await until(pilot, lambda: "HTTP 500" in app.state.connection.detail, timeout=60)
        await pilot.pause()
        text = bar.render().plain
        assert "unreachable" in text and "data" in text and " old" in text, text
        head.fail = ()
        await until(pilot, lambda: app.state.connection.phase == "connected", timeout=30)

        head.stats.reset()
        client = await app.cluster_feed.dashboard()
        client.most_in_flight.clear()
        head.set_stall(True)
        try:
            await until(pilot, lambda: "did not answer" in app.state.connection.detail, timeout=60)
            await until(pilot, lambda: " · retry 2 " in app.state.connection.detail, timeout=60)
            await pilot.pause()
            text = bar.render().plain
            assert "unreachable" in text and " old" in text, text
            assert app.state.snapshot is not None and table.row_count == SHAPE.nodes + SHAPE.dead  # kept
            held = head.stats.snapshot()["endpoints"]
            most = dict(client.most_in_flight)
        finally:
            head.set_stall(False)
        # Nothing piles up on a stalled head: a request that timed out is not left open beside its retry
        # (two of a kind at most: the node table and the status are also read by the stuck watch). Counted
        # where the requests are held open, in the client: the head notices a hung-up asker only a poll
        # later, later still on a loaded machine.
        assert most and all(n <= 2 for n in most.values()), (most, held)
        await until(pilot, lambda: app.state.connection.phase == "connected", timeout=60)
        assert head.stats.by_endpoint["/api/v0/nodes"].requests > held["/api/v0/nodes"]["requests"]
        await pilot.press("q")
