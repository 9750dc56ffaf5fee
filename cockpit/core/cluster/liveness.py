"""Provides `NodeSilence`: which nodes Ray still lists as alive but that stopped reporting.

A node cut off from the head (a partition, a hung host) stays `ALIVE` in the GCS until its health
checks run out (about 30 s with Ray's defaults, longer where the cluster raises them); meanwhile the
dashboard goes on serving its last host and GPU readings as if they were current. Its reporter's sample
time is what stops: a node whose sample time has not moved for `SILENT_AFTER` seconds is not answering.
The time is measured on the caller's clock between polls, never against the node's own clock, so a
node whose clock is off is not taken for a silent one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from cockpit.core.snapshots import NodeSnapshot

SILENT_AFTER = 20.0
"""Seconds without a new reading: the reporter publishes every few seconds and the dashboard caches 2 s,
so 12 s is the usual worst case for a node that answers (the GPU board's `STALE_AFTER` as well)."""


class NodeSilence:
    """Fed every poll's nodes; says which alive nodes have sent no new reading for `after` seconds."""

    def __init__(self, after: float = SILENT_AFTER) -> None:
        self.after = after
        self._last: dict[str, tuple[float | None, float]] = {}
        """Per node: its latest sample time, and when (caller's clock) that value was first seen."""

    def update(self, nodes: Iterable[NodeSnapshot], now: float) -> Mapping[str, float]:
        """The alive nodes among NODES that are not answering, by node id: seconds since their last new
        reading (on the caller's clock, NOW). A node that never reported (no reporter, no reading to go
        stale) and a dead one (Ray's to describe) are left out."""
        silent: dict[str, float] = {}
        seen: dict[str, tuple[float | None, float]] = {}
        for node in nodes:
            previous = self._last.get(node.node_id)
            if previous is None or previous[0] != node.sample_time:
                seen[node.node_id] = (node.sample_time, now)
                continue
            seen[node.node_id] = previous
            quiet = now - previous[1]
            if node.alive and node.sample_time is not None and quiet >= self.after:
                silent[node.node_id] = quiet
        self._last = seen
        return silent
