"""Provides the Cluster screen (key 1): join progress, the node table and the newest jobs."""

from __future__ import annotations

from collections.abc import Callable

from textual.app import ComposeResult
from textual.widget import Widget

from cockpit.ui.screens.base import CockpitScreen
from cockpit.ui.widgets.jobs_strip import JobsStrip
from cockpit.ui.widgets.join_progress import JoinPanel
from cockpit.ui.widgets.node_table import NodeTable


class ClusterScreen(CockpitScreen):
    TITLE = "1 Cluster"

    def compose_body(self) -> ComposeResult:
        state = self.state
        panes: dict[str, Callable[[], Widget]] = {
            "join": lambda: JoinPanel(state.expect_nodes, state.expect_gpus, id="join"),
            "nodes": lambda: NodeTable(id="nodes"),
            "jobs": lambda: JobsStrip(id="jobs"),
        }
        for name in state.layout.cluster:
            yield panes[name]()

    def refresh_view(self) -> None:
        state = self.state
        for table in self.composed(NodeTable):
            table.set_class(state.connection.stale, "stale")
        snapshot, progress = state.snapshot, state.join_progress()
        job = state.slurm
        if job is not None and (not job.running or snapshot is None):  # queued, starting, or over
            for panel in self.composed(JoinPanel):
                panel.show_slurm(job)
        if snapshot is None or progress is None:
            return
        for panel in self.composed(JoinPanel):
            if job is None or job.running:
                panel.show(progress)
        for table in self.composed(NodeTable):
            table.show(snapshot.nodes, snapshot.silent, memory=self.state.memory.by_node)
        requested = state.requested_node
        if requested is not None:  # `n` on the Actors screen: the cursor on that node
            state.requested_node = None
            for table in self.composed(NodeTable):
                table.select(requested)
        for strip in self.composed(JobsStrip):
            strip.show(snapshot.jobs)
