"""The TUI on a real head started with `--include-dashboard=false`, over a real sshd on 127.0.0.1: the
Cluster screen shows its nodes and join progress (from the head's own Ray), the status bar says why in
one line on every screen, and Actors, Jobs and Logs say what is unavailable and why."""

from __future__ import annotations

from pathlib import Path

import pytest

from cockpit.core.connect.connection import ConnectOptions
from cockpit.core.connect.without_dashboard import sentence
from cockpit.core.targets import parse_target
from cockpit.ui.app import CockpitApp
from cockpit.ui.screens.actors import ActorsScreen
from cockpit.ui.screens.cluster import ClusterScreen
from cockpit.ui.screens.jobs import JobsScreen
from cockpit.ui.screens.logs import LogsScreen
from cockpit.ui.widgets.join_progress import JoinPanel
from cockpit.ui.widgets.node_table import NodeTable
from cockpit.ui.widgets.status_bar import StatusBar
from cockpit.ui.widgets.text_line import TextLine
from tests.harness.headless import GPUS_PER_NODE, HeadlessHead, none_left_on_head
from tests.harness.run import until

pytestmark = [pytest.mark.ssh, pytest.mark.cluster]


async def test_screens_of_a_head_without_dashboard(
    headless_head: HeadlessHead, headless_ssh_config: Path
) -> None:
    options = ConnectOptions(ssh_config=str(headless_ssh_config), dashboard_port=headless_head.dashboard_port)
    app = CockpitApp(parse_target("head-node"), options, expect_nodes=2, expect_gpus=2 * GPUS_PER_NODE)
    why = sentence("head-node")
    async with app.run_test(size=(400, 40)) as pilot:
        assert isinstance(app.screen, ClusterScreen)
        table = app.screen.query_one(NodeTable)
        await until(pilot, lambda: table.row_count == 2 and app.state.connection.phase == "connected")
        join = app.screen.query_one(JoinPanel)
        await until(pilot, lambda: join.has_class("ready"))
        assert "READY" in str(join.render())
        snapshot = app.state.snapshot
        assert snapshot is not None and sum(n.is_head for n in snapshot.nodes) == 1
        assert app.state.connection.without_dashboard == why
        assert why in str(app.screen.query_one(StatusBar).render())

        await pilot.press("3")
        assert isinstance(app.screen, ActorsScreen)
        counts = app.screen.query_one("#actor-counts", TextLine)
        assert str(counts.text) == f"actors unavailable: {why}"
        await pilot.press("4")
        assert isinstance(app.screen, JobsScreen)
        assert f"jobs unavailable: {why}" in str(app.screen.query_one("#jobs-hint").render())
        await pilot.press("5")
        assert isinstance(app.screen, LogsScreen)
        assert str(app.screen.query_one("#log-sources").render()) == f"logs unavailable: {why}"
        assert why in str(app.screen.query_one(StatusBar).render())
    none_left_on_head()  # the app stopped its program on the head as it closed the connection
