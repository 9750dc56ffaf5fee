"""Provides the Cluster screen (key 1): join progress, the node table and the newest jobs."""

from __future__ import annotations

from collections.abc import Callable

from textual.app import ComposeResult
from textual.widget import Widget

from cockpit.core.join import JoinProgress
from cockpit.ui.screens.base import CockpitScreen
from cockpit.ui.widgets.jobs_strip import JobsStrip
from cockpit.ui.widgets.join_progress import JoinPanel
from cockpit.ui.widgets.node_table import NodeTable


class ClusterScreen(CockpitScreen):
    TITLE = "1 Cluster"

    def compose_body(self) -> ComposeResult:
        app = self.cockpit
        panes: dict[str, Callable[[], Widget]] = {
            "join": lambda: JoinPanel(app.expect_nodes, app.expect_gpus, id="join"),
            "nodes": lambda: NodeTable(id="nodes"),
            "jobs": lambda: JobsStrip(id="jobs"),
        }
        for name in app.layout.cluster:
            yield panes[name]()

    def refresh_view(self) -> None:
        snapshot = self.cockpit.snapshot
        stale = self.cockpit.connection_state != "connected"
        for table in self.query(NodeTable):
            table.set_class(stale, "stale")
        if snapshot is None:
            return
        progress = JoinProgress.of(snapshot.nodes, self.cockpit.expect_nodes, self.cockpit.expect_gpus)
        for panel in self.query(JoinPanel):
            panel.show(progress)
        for table in self.query(NodeTable):
            table.show(snapshot.nodes)
        for strip in self.query(JobsStrip):
            strip.show(snapshot.jobs)
