"""The Actors screen (key 3) on the real local cluster: the demo job's actors by role, node and state,
filter terms, sort, details and the `l`/`g`/`n` jumps; dead actors with their causes after a job ended;
and a job whose placement groups can never be placed, explained on the screen with the numbers."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from cockpit.core.targets import parse_target
from cockpit.ui.app import CockpitApp
from cockpit.ui.screens.actors import ActorsScreen
from cockpit.ui.screens.cluster import ClusterScreen
from cockpit.ui.screens.gpus import GpuScreen
from cockpit.ui.screens.logs import LogsScreen
from cockpit.ui.widgets.actor_table import ActorTableView
from cockpit.ui.widgets.gpu_list import GpuList
from cockpit.ui.widgets.node_table import NodeTable
from tests.harness.cluster import ClusterHandle
from tests.harness.jobs import DEMO_ROLES, finished_job_with_dead_actors, unplaceable_job
from tests.harness.run import until

pytestmark = pytest.mark.cluster


def table_of(app: CockpitApp) -> ActorTableView:
    return app.screen.query_one(ActorTableView)


def shown_views(app: CockpitApp) -> list:  # type: ignore[type-arg]
    table = table_of(app)
    assert table.index is not None
    return [table.index.rows[i] for i in table.order]


def demo_rows(app: CockpitApp) -> list:  # type: ignore[type-arg]
    return [v for v in shown_views(app) if v.actor.class_name in DEMO_ROLES and v.actor.state == "ALIVE"]


async def test_demo_actors_filter_sort_details_and_jumps(ray_cluster: ClusterHandle, demo_job: str) -> None:
    app = CockpitApp(parse_target("local"))
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.press("3")
        assert isinstance(app.screen, ActorsScreen)
        screen = app.screen
        await until(pilot, lambda: app.state.actor_table is not None and len(demo_rows(app)) >= 8, timeout=60)
        assert app.state.snapshot is not None
        hosts = {n.node_id: (n.hostname or n.ip) for n in app.state.snapshot.nodes}
        for view in demo_rows(app):
            assert view.role == DEMO_ROLES[view.actor.class_name]
            assert view.host == hosts[view.actor.node_id] and view.actor.pid
        lines = "\n".join(table_of(app).text_lines())
        assert "RolloutWorker" in lines and "rollout" in lines and "ALIVE" in lines
        counts = str(screen.query_one("#actor-counts").render())
        assert "ALIVE" in counts and "rollout" in counts and "policy" in counts

        # Filter terms, typed as a person does.
        await pilot.press("slash", *f"role:rollout job:{demo_job}", "enter")
        await until(pilot, lambda: {v.role for v in shown_views(app)} == {"rollout"})
        assert len(shown_views(app)) == 4
        assert app.state.actor_query == f"role:rollout job:{demo_job}"

        # Sort by node (state -> role -> class -> name -> node), then reversed.
        for _ in range(4):
            await pilot.press("s")
        assert screen.sort == "node"
        keys = [(v.host, v.actor.node_id) for v in shown_views(app)]
        assert keys == sorted(keys)
        await pilot.press("S")
        assert [(v.host, v.actor.node_id) for v in shown_views(app)] == sorted(keys, reverse=True)

        # Details of the actor under the cursor: its resources, node and runtime env.
        await pilot.press("down")
        chosen = table_of(app).current()
        assert chosen is not None
        await pilot.press("enter")
        await pilot.pause()
        details = str(screen.query_one("#actor-details").render())
        assert chosen.actor.actor_id in details and "GPU: 0.5" in details and "rollout" in details
        # The demo job's runtime env as the cluster recorded it: none (its settings are entrypoint overrides).
        assert re.search(r"^Runtime env +none$", details, re.MULTILINE), details

        # A refresh keeps filter, sort and cursor.
        before = app.state.actor_table
        await until(pilot, lambda: app.state.actor_table is not before, timeout=30)
        await pilot.pause()
        current = table_of(app).current()
        assert current is not None and current.actor.actor_id == chosen.actor.actor_id
        assert screen.sort == "node" and screen.reverse

        # `l`: its stdout and stderr on the Logs screen.
        await pilot.press("l")
        await until(pilot, lambda: isinstance(app.screen, LogsScreen))
        logs = app.screen
        assert isinstance(logs, LogsScreen)
        assert {(s.actor_id, s.suffix) for s in logs.sources} == {
            (chosen.actor.actor_id, "out"),
            (chosen.actor.actor_id, "err"),
        }

        # Back on the Actors screen: filter and cursor are where they were. `g`: its node's GPUs.
        await pilot.press("3")
        await pilot.pause()
        current = table_of(app).current()
        assert current is not None and current.actor.actor_id == chosen.actor.actor_id
        await pilot.press("g")
        await until(pilot, lambda: isinstance(app.screen, GpuScreen))
        gpus = app.screen
        assert isinstance(gpus, GpuScreen)
        assert gpus.node_filter == chosen.actor.node_id[:12] and gpus.view == "list"
        await until(pilot, lambda: gpus.query_one(GpuList).fleet is not None)
        gpu_list = gpus.query_one(GpuList)
        fleet = gpu_list.fleet
        assert fleet is not None
        assert {fleet.rows[i].node.node_id for i in gpu_list._order} == {chosen.actor.node_id}

        # `n`: its node under the Cluster screen's cursor.
        await pilot.press("3", "n")
        await until(pilot, lambda: isinstance(app.screen, ClusterScreen))
        nodes = app.screen.query_one(NodeTable)
        await pilot.pause()
        row_key, _ = nodes.coordinate_to_cell_key(nodes.cursor_coordinate)
        assert row_key.value == chosen.actor.node_id

        # Away from the Actors screen the list is not fetched (the head is not asked for it).
        await until(pilot, lambda: not app.actors_feed.listing, timeout=15)
        table = app.state.actor_table
        await pilot.pause(7)  # longer than the list's 5 s cadence
        assert app.state.actor_table is table and not app.actors_feed.listing


async def test_dead_actors_show_their_death_cause(ray_cluster: ClusterHandle, tmp_path: Path) -> None:
    job_id = await asyncio.to_thread(finished_job_with_dead_actors, ray_cluster, tmp_path)
    app = CockpitApp(parse_target("local"))
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.press("3", "slash", *f"state:DEAD job:{job_id}", "enter")
        await until(
            pilot, lambda: app.state.actor_table is not None and len(shown_views(app)) >= 2, timeout=60
        )
        dead = {v.actor.class_name: v.actor for v in shown_views(app)}
        assert set(dead) == {"DoomedWorker", "CrashingRollout"}
        assert "ray.kill" in dead["DoomedWorker"].death_cause
        assert "CUDA out of memory (test)" in dead["CrashingRollout"].death_cause
        lines = "\n".join(table_of(app).text_lines())
        assert "DEAD" in lines and "ValueError: rollout engine failed" in lines  # the cause in its column
        counts = str(app.screen.query_one("#actor-counts").render())
        assert "DEAD" in counts


async def test_unplaceable_job_is_explained_with_the_numbers(
    ray_cluster: ClusterHandle, tmp_path: Path
) -> None:
    job = unplaceable_job(ray_cluster, tmp_path)
    await asyncio.to_thread(job.__enter__)  # the harness runs its own event loop: not on this one
    try:
        app = CockpitApp(parse_target("local"))
        async with app.run_test(size=(200, 50)) as pilot:
            await pilot.press("3")

            def pane() -> str:
                return str(app.screen.query_one("#actor-pending").render())

            await until(pilot, lambda: "cockpit_test_spread" in pane(), timeout=60)
            text = pane()
            assert "`cockpit_test_big` PENDING: 1 bundle of {GPU: 8}" in text
            assert "no node has GPU 8 (the most on one node: 2)" in text
            assert "4 bundles of {GPU: 1} (STRICT_SPREAD)" in text and "needs 4 different nodes" in text
            assert "HugeLearner" in text
            assert app.screen.query_one("#actor-pending").has_class("never")
            pending = [v for v in shown_views(app) if v.actor.class_name == "HugeLearner"]
            assert pending and pending[0].actor.state == "PENDING_CREATION"
            # The next fetch reads the pending actors from the list it got (the list held every actor):
            # the same sentences.
            first = app.state.actor_table
            assert first is not None and first.listing.complete
            await until(pilot, lambda: app.state.actor_table is not first, timeout=30)
            await pilot.pause()
            assert pane().splitlines()[1:] == text.splitlines()[1:]  # the first line says how long
    finally:
        await asyncio.to_thread(job.__exit__, None, None, None)
