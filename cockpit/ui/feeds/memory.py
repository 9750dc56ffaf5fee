"""Provides the memory feed: the pre-OOM warning, riding on the node poll that already runs.

Each new summary updates `state.memory` (no request of its own). Three asks, each bounded: the head's
raylet.out once per connection (the kill threshold its memory monitor logged, assumed cluster-wide: Ray
is started with one environment; read beside the polls, taken by the poll after it came); a flagged
node's own raylet.out, once; and a flagged node's biggest processes (`/nodes/{id}`), at most every
`BIGGEST_EVERY_S`, for the first `BIGGEST_NODES` flagged.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING

from cockpit.core.errors import CockpitError
from cockpit.core.memory.report import biggest_processes, read_threshold

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cockpit.core.cluster.dashboard import DashboardClient
    from cockpit.core.memory.watch import Threshold
    from cockpit.core.snapshots import NodeSnapshot
    from cockpit.ui.state import CockpitState

BIGGEST_EVERY_S = 30.0
"""A flagged node's processes are read again at most this often."""
BIGGEST_NODES = 3
"""Flagged nodes whose processes are read (the nearest to a kill first)."""


class MemoryFeed:
    def __init__(self, state: CockpitState) -> None:
        self.state = state
        self._session = ""
        """The Ray session the thresholds were read for (a restarted head logs anew)."""
        self._read: set[str] = set()
        """Nodes whose raylet.out was read (found or not): never read twice in a session."""
        self._biggest_at: dict[str, float] = {}
        self._head_read: asyncio.Task[Threshold | None] | None = None
        """The head's raylet.out under way: read beside the polls, never holding up the first nodes."""
        self._head_id = ""

    def cancel(self) -> None:
        """Stop a read of the head's raylet.out under way (the app ends, or a new session began)."""
        if self._head_read is not None:
            self._head_read.cancel()
            self._head_read = None

    async def after_poll(self, client: DashboardClient, nodes: Sequence[NodeSnapshot], fresh: bool) -> bool:
        """Take one poll's nodes; True when the memory view changed (a new summary came)."""
        state = self.state
        session = state.info.session_name if state.info is not None else ""
        if session != self._session:
            self._session, self._read, self._biggest_at = session, set(), {}
            state.memory_biggest.clear()
            self.cancel()
        if client.without_dashboard is not None:
            return False
        head = next((n for n in nodes if n.is_head and n.alive), None)
        if head is not None and head.node_id not in self._read:
            # Taken by a later poll once read: the first nodes are not kept waiting on a log read (a round
            # trip to a distant head); until then the threshold is Ray's default.
            self._read.add(head.node_id)
            self._head_id = head.node_id
            self._head_read = asyncio.ensure_future(read_threshold(client, head))
        if self._head_read is not None and self._head_read.done():
            came, self._head_read = self._head_read, None
            found = None if came.cancelled() else came.result()
            if found is not None:
                state.memory.set_threshold(self._head_id, found, cluster_wide=True)
                fresh = True
        if not fresh:
            return False
        state.memory.update(nodes)
        by_id = {n.node_id: n for n in nodes}
        flagged = state.memory.flagged()
        read = False
        for memory in flagged[:BIGGEST_NODES]:
            node = by_id.get(memory.node_id)
            if node is None:
                continue
            if node.node_id not in self._read:
                self._read.add(node.node_id)
                own = await read_threshold(client, node)
                if own is not None:
                    state.memory.set_threshold(node.node_id, own)
                    read = True
            now = time.monotonic()
            if now - self._biggest_at.get(node.node_id, -BIGGEST_EVERY_S) >= BIGGEST_EVERY_S:
                self._biggest_at[node.node_id] = now
                with contextlib.suppress(CockpitError):  # the warning stands without them; asked again
                    state.memory_biggest[node.node_id] = tuple(await biggest_processes(client, node, {}))
        if read:
            state.memory.update(nodes)  # again, with the thresholds just read
        shown = {m.node_id for m in state.memory.flagged()}
        for gone in [k for k in state.memory_biggest if k not in shown]:
            del state.memory_biggest[gone]
        return True
