"""Provides the GPU feed: every poll's nodes into the GPU board, alive actors while a screen needs them,
and the fleet (what the GPU views draw) rebuilt off the UI thread while a screen needs it.

The board records every poll whichever screen is shown (the 10-minute history must have no holes);
the fleet, O(GPUs) to build (41 ms at 1,024 x 8), is built only while a shown screen needs `gpus`, and
once more when such a screen comes back into view. Agent readings between polls (high-resolution mode)
redraw at most once a second.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from cockpit.core.cluster.dashboard import MAX_LIMIT
from cockpit.core.errors import CockpitError
from cockpit.core.gpu.board import GpuFleet
from cockpit.ui.feeds import start_worker
from cockpit.ui.state import CockpitState, StateChanged

if TYPE_CHECKING:
    from textual.app import App
    from textual.timer import Timer

    from cockpit.core.cluster.dashboard import DashboardClient
    from cockpit.core.snapshots import NodeSnapshot

ACTOR_POLL_EVERY = 3
"""Alive actors (who is on which GPU) with every third new summary while a screen needs them: the
dashboard refreshes worker stats every 15 s, and listing actors costs the head O(actors) (the summary's
cadence slows with the cluster's size, and the actors' with it)."""
GPU_REDRAW_SECONDS = 1.0
"""High-resolution readings redraw the GPU views at most this often."""


class GpuFeed:
    def __init__(self, app: App[int], state: CockpitState) -> None:
        self.app = app
        self.state = state
        self._actors_loaded = False
        self._summaries = 0
        """Polls that brought a new summary (the actors are refreshed with every third)."""
        self._redraw: Timer | None = None

    async def after_poll(
        self,
        client: DashboardClient,
        nodes: tuple[NodeSnapshot, ...],
        poll: int,
        job_running: bool,
        fresh_stats: bool = True,
    ) -> GpuFleet | None:
        """Feed the board (on a thread, so a 1,024-node poll leaves the UI free) and return the new fleet
        when a shown screen needs one. `poll` numbers the polls: a cancelled one that ends late is ignored.
        `fresh_stats`: the nodes carry a new summary (else the last one's readings, recorded already)."""
        board = self.state.gpu_board
        await asyncio.to_thread(board.ingest_nodes, nodes, job_running, time.time(), poll)
        if fresh_stats:
            self._summaries += 1
        due = fresh_stats and self._summaries % ACTOR_POLL_EVERY == 0
        if self.state.needs("actors") and (not self._actors_loaded or due):
            try:
                actors = await client.actors(filters=[("state", "=", "ALIVE")], limit=MAX_LIMIT)
            except CockpitError:
                pass  # the GPU rows show pids instead of actor names until the next try
            else:
                await asyncio.to_thread(board.ingest_actors, actors.rows)
                self._actors_loaded = True
        if not self.state.needs("gpus"):
            return None
        return await asyncio.to_thread(board.fleet)

    def shown(self) -> None:
        """A screen came into view: one that needs GPUs gets a fleet of what the board has now."""
        if not self.state.needs("gpus") or self.state.snapshot is None:
            return
        fleet = self.state.gpu_fleet
        if fleet is None or fleet.generation != self.state.gpu_board.generation:
            self._rebuild()

    def changed(self, coalesce: bool = False) -> None:
        """The board changed outside a poll (GPU agents): rebuild, at most once a second with `coalesce`."""
        if coalesce:
            if self._redraw is None:
                self._redraw = self.app.set_timer(GPU_REDRAW_SECONDS, self._redraw_now, name="gpu-redraw")
            return
        self._redraw_now()

    def _redraw_now(self) -> None:
        self._redraw = None
        if self.state.snapshot is not None and self.state.needs("gpus"):
            self._rebuild()

    def _rebuild(self) -> None:
        start_worker(self.app, self._build, group="gpu-redraw", description="Updating the GPU view")

    async def _build(self) -> None:
        if self.state.offer_fleet(await asyncio.to_thread(self.state.gpu_board.fleet)):
            self.app.post_message(StateChanged("gpus"))
