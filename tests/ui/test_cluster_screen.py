"""Pilot tests of the Cluster screen against the real local cluster, including a node killed mid-run."""

from __future__ import annotations

import signal

import pytest

from cockpit.core.local import processes
from cockpit.core.targets import parse_target
from cockpit.ui.app import CockpitApp
from cockpit.ui.screens.cluster import ClusterScreen
from cockpit.ui.screens.gpus import GpuScreen
from cockpit.ui.screens.help import HelpScreen
from cockpit.ui.state import StateChanged
from cockpit.ui.widgets.join_progress import JoinPanel
from cockpit.ui.widgets.node_table import NodeTable
from cockpit.ui.widgets.status_bar import StatusBar
from tests.harness.cluster import ClusterHandle
from tests.harness.run import until

pytestmark = pytest.mark.cluster


def cell(table: NodeTable, node_id: str, column: str) -> str:
    return str(table.get_cell(node_id, column))


def alive_rows(table: NodeTable) -> list[str]:
    return [key.value for key in table.rows if key.value and cell(table, key.value, "state") == "ALIVE"]


async def test_cluster_screen_shows_nodes_and_join_progress(
    ray_cluster: ClusterHandle, demo_job: str
) -> None:
    messages: list[object] = []
    app = CockpitApp(parse_target("local"), expect_nodes=3, expect_gpus=6)
    async with app.run_test(size=(120, 40), message_hook=messages.append) as pilot:
        table = app.screen.query_one(NodeTable)
        await until(pilot, lambda: len(alive_rows(table)) >= 3)
        assert isinstance(app.screen, ClusterScreen)
        assert any(isinstance(m, StateChanged) and "snapshot" in m.topics for m in messages)
        snapshot = app.state.snapshot
        assert snapshot is not None
        head = next(n for n in snapshot.nodes if n.is_head)
        assert cell(table, head.node_id, "node").endswith("★")
        assert cell(table, head.node_id, "gpus") == "2 (logical)"
        join = app.screen.query_one(JoinPanel)
        assert join.has_class("ready") and "READY" in str(join.render())
        bar = app.screen.query_one(StatusBar)
        await until(pilot, lambda: bar.ray_version != "")
        header = str(bar.render())
        assert "local" in header and f"Ray {bar.ray_version}" in header and "connected" in header
        # Running jobs come first in the strip, however many finished jobs are newer.
        await until(pilot, lambda: demo_job in str(app.screen.query_one("#jobs").render()))
        assert "RUNNING" in str(app.screen.query_one("#jobs").render())


async def test_node_killed_mid_run_turns_dead_with_reason(ray_cluster: ClusterHandle) -> None:
    app = CockpitApp(parse_target("local"))
    async with app.run_test(size=(160, 40)) as pilot:
        table = app.screen.query_one(NodeTable)
        await until(pilot, lambda: len(alive_rows(table)) >= 3)
        before = set(alive_rows(table))
        node = processes.add_node(gpus=2, cpus=1, directory=ray_cluster.state_dir)
        await until(pilot, lambda: len(set(alive_rows(table)) - before) == 1, timeout=30)
        (new_id,) = set(alive_rows(table)) - before
        processes.kill_node(node.index, signal.SIGKILL, directory=ray_cluster.state_dir)
        # Ray marks a SIGKILLed node DEAD after its missed heartbeats (about 13 s here).
        await until(pilot, lambda: cell(table, new_id, "state") == "DEAD", timeout=90)
        assert "health check failed" in cell(table, new_id, "reason")
        assert set(alive_rows(table)) == before  # the others stay ALIVE, the dead one stays listed
        # The screen keeps working: navigate away and back, open help.
        await pilot.press("2")
        assert isinstance(app.screen, GpuScreen)
        await pilot.press("1")
        assert isinstance(app.screen, ClusterScreen)
        assert cell(app.screen.query_one(NodeTable), new_id, "state") == "DEAD"
        join = str(app.screen.query_one(JoinPanel).render())
        assert "1 dead node" in join


async def test_unreachable_dashboard_is_shown_and_retried() -> None:
    app = CockpitApp(parse_target("http://127.0.0.1:9"))
    async with app.run_test(size=(100, 30)) as pilot:
        bar = app.screen.query_one(StatusBar)
        await until(pilot, lambda: "retry 2 " in str(bar.render()), timeout=20)
        header = str(bar.render())
        assert "unreachable" in header and "cannot reach the Ray dashboard" in header and "retry" in header
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running


async def test_number_keys_and_help(ray_cluster: ClusterHandle) -> None:
    app = CockpitApp(parse_target("local"))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("5")
        assert getattr(app.screen, "TITLE", "") == "5 Logs"
        await pilot.press("4")
        assert getattr(app.screen, "TITLE", "") == "4 Jobs"
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        jobs_help = app.screen.plain
        assert "New job" in jobs_help and "Resubmit" in jobs_help  # screen keys live in help, not the footer
        await pilot.press("escape")
        await pilot.press("3")
        assert getattr(app.screen, "TITLE", "") == "3 Actors"
        await pilot.press("6")
        assert getattr(app.screen, "TITLE", "") == "6 Debugger"
        assert "paused in the post-mortem debugger" in str(app.screen.query_one("#debugger-summary").render())
        await pilot.press("1")
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = app.screen.plain
        assert "Cluster" in text and "Quit" in text
        await pilot.press("escape")
        assert isinstance(app.screen, ClusterScreen)


async def test_each_resource_is_fetched_only_while_a_shown_screen_needs_it(
    ray_cluster: ClusterHandle, demo_job: str
) -> None:
    """The Cluster screen needs nodes (jobs every third poll); the GPU view's fleet and the alive actors
    are built and fetched only once the GPU screen, which declares them, is shown. The GPU history is
    recorded on every poll whichever screen is shown."""
    app = CockpitApp(parse_target("local"))
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.state.snapshot is not None)
        assert app.state.snapshot is not None
        first = app.state.snapshot.fetched_at
        await until(pilot, lambda: app.state.snapshot is not None and app.state.snapshot.fetched_at > first)
        assert isinstance(app.screen, ClusterScreen)
        assert app.state.shown_needs == ClusterScreen.NEEDS
        assert app.state.gpu_fleet is None and not app.gpu_feed._actors_loaded
        recorded = app.state.gpu_board.generation
        assert recorded > 0  # the board took every poll's nodes
        await pilot.press("2")
        await until(pilot, lambda: app.state.gpu_fleet is not None and app.gpu_feed._actors_loaded)
        assert app.state.shown_needs == GpuScreen.NEEDS and "actors" in GpuScreen.NEEDS
