"""Provides the memory watch: each node's host memory against the threshold at which Ray's memory monitor
kills workers, its trend, and the flag raised before a kill.

Fed by the node poll that already runs (its summary carries each node's memory): no request of its own.
The threshold is the one the cluster logged (a node's raylet.out: "ThresholdMemoryMonitor initialized
with usage threshold at N bytes"), or the one an OOM kill's text named for that node, or Ray's default
(95% of the node's memory) until one of those is known. A node is flagged when its memory is over the
threshold, within `MARGIN` of it, or (past `RISING_FROM` of it) rising fast enough to cross it within
`HORIZON_S` at the slope of its last `WINDOW_S` of readings.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from cockpit.core.cluster.oom import RAY_DEFAULT_THRESHOLD
from cockpit.core.snapshots import NA, Metric, NodeSnapshot
from cockpit.core.units import duration, human_bytes

WINDOW_S = 120.0
"""Readings whose slope is the node's trend (the reporter sends one every 5 s: about 24)."""
MIN_SPAN_S = 9.0
"""A trend needs readings this far apart (three reports), else none is given."""
HORIZON_S = 600.0
"""Rising to cross the threshold within this long at the current slope: flagged (from `RISING_FROM`)."""
RISING_FROM = 0.75
"""A rising node is flagged only once it holds this share of its threshold: a cluster starting up (a
few GB in a minute, from little) is not a node about to be killed."""
MARGIN = 0.05
"""Within this share of the node's memory below the threshold: flagged, whatever the trend."""
HISTORY = 48
"""Readings kept per node (bounded memory at any cluster size)."""
SLOPE_POINTS = 12
"""The newest readings a trend is fitted to (a minute at the reporter's 5 s; a summary of 2,000 nodes
comes every 20-100 s, so a trend costs the same at any size: 2,000 nodes in about 30 ms)."""

Flag = Literal["", "over", "near", "rising"]
ThresholdSource = Literal["raylet.out", "OOM kill", "Ray's default"]


@dataclass(frozen=True, slots=True)
class Threshold:
    bytes: float
    fraction: float
    source: ThresholdSource
    where: str = ""
    """Whose raylet.out or kill said it ("" for the default); another node's, when assumed cluster-wide."""


@dataclass(frozen=True, slots=True)
class NodeMemory:
    node_id: str
    ip: str
    hostname: str
    alive: bool
    used_bytes: Metric
    total_bytes: Metric
    threshold: Threshold | None
    """None while the node's total is unknown (no summary yet)."""
    slope_bytes_per_s: float | None
    """Least-squares slope of the last `WINDOW_S` of readings; None with too few of them."""
    seconds_left: float | None
    """At this slope, until the threshold; None when not rising (or no trend yet)."""
    sample_time: float | None
    object_store_used_bytes: Metric = NA
    object_store_total_bytes: Metric = NA
    flag: Flag = ""

    @property
    def used_fraction(self) -> float | None:
        if self.used_bytes is NA or self.total_bytes is NA or not float(self.total_bytes):
            return None
        return float(self.used_bytes) / float(self.total_bytes)

    def warning(self) -> str:
        """One line for the status bar (empty when not flagged); every figure with its unit, the ones
        that matter first (at 80 columns the end of the line is cut): `OOM risk: vm at 2.8 GiB of 3.6
        GiB, 40s left (Ray kills at 15%), +2.3 GiB/min`."""
        if not self.flag or self.threshold is None or self.used_bytes is NA:
            return ""
        name = self.hostname or self.ip or self.node_id[:8]
        used = human_bytes(self.used_bytes)
        limit = human_bytes(self.threshold.bytes)
        kills = f"(Ray kills at {self.threshold.fraction:.0%})"
        rate = ""
        if self.slope_bytes_per_s is not None and self.slope_bytes_per_s > 0:
            rate = f", +{human_bytes(self.slope_bytes_per_s * 60)}/min"
        if self.flag == "over":
            return f"OOM risk: {name} at {used}, over {limit} {kills}{rate}"
        left = f", {duration(self.seconds_left)} left" if self.seconds_left is not None else ""
        return f"OOM risk: {name} at {used} of {limit}{left} {kills}{rate}"


class MemoryWatch:
    """Per node, the last readings of its host memory and the threshold in force; `update` per summary."""

    def __init__(self) -> None:
        self._readings: dict[str, deque[tuple[float, float]]] = {}
        self._thresholds: dict[str, Threshold] = {}
        self._cluster_threshold: Threshold | None = None
        """A threshold one node logged, assumed for the others until theirs is read."""
        self.nodes: tuple[NodeMemory, ...] = ()
        self.by_node: dict[str, NodeMemory] = {}
        """The same, by node id."""
        self._flagged: tuple[NodeMemory, ...] = ()

    def set_threshold(self, node_id: str, threshold: Threshold, cluster_wide: bool = False) -> None:
        """The threshold NODE_ID's raylet logged or a kill on it named (and, if CLUSTER_WIDE, the one to
        assume on nodes whose own is not known: Ray is started with one environment cluster-wide)."""
        self._thresholds[node_id] = threshold
        if cluster_wide:
            self._cluster_threshold = threshold

    def known_threshold(self, node_id: str) -> bool:
        return node_id in self._thresholds

    def threshold_for(self, node: NodeSnapshot) -> Threshold | None:
        own = self._thresholds.get(node.node_id)
        if own is not None:
            return own
        if node.mem_total_bytes is NA:
            return None
        total = float(node.mem_total_bytes)
        assumed = self._cluster_threshold
        if assumed is not None:
            return Threshold(total * assumed.fraction, assumed.fraction, assumed.source, assumed.where)
        return Threshold(total * RAY_DEFAULT_THRESHOLD, RAY_DEFAULT_THRESHOLD, "Ray's default")

    def update(self, nodes: Sequence[NodeSnapshot]) -> tuple[NodeMemory, ...]:
        """Take one poll's nodes (readings recorded once per new summary); return every node's memory."""
        out = []
        listed = set()
        for node in nodes:
            listed.add(node.node_id)
            readings = self._readings.get(node.node_id)
            if node.alive and node.sample_time is not None and node.mem_used_bytes is not NA:
                if readings is None:
                    readings = self._readings[node.node_id] = deque(maxlen=HISTORY)
                if not readings or node.sample_time > readings[-1][0]:
                    readings.append((node.sample_time, float(node.mem_used_bytes)))
            out.append(self._memory(node, readings))
        for gone in [k for k in self._readings if k not in listed]:
            del self._readings[gone]
        self.nodes = tuple(out)
        self.by_node = {m.node_id: m for m in out}
        # Sorted once per summary: the status bar asks on every state message (twice a second).
        self._flagged = tuple(sorted((m for m in out if m.flag), key=_urgency))
        return self.nodes

    def _memory(self, node: NodeSnapshot, readings: deque[tuple[float, float]] | None) -> NodeMemory:
        threshold = self.threshold_for(node)
        slope = _slope(readings) if readings else None
        left: float | None = None
        flag: Flag = ""
        if node.alive and threshold is not None and node.mem_used_bytes is not NA:
            used = float(node.mem_used_bytes)
            room = threshold.bytes - used
            total = float(node.mem_total_bytes) if node.mem_total_bytes is not NA else threshold.bytes
            if slope is not None and slope > 0 and room > 0:
                left = room / slope
            if room <= 0:
                flag = "over"
            elif room <= MARGIN * total:
                flag = "near"
            elif left is not None and left <= HORIZON_S and used >= RISING_FROM * threshold.bytes:
                flag = "rising"
        return NodeMemory(
            node_id=node.node_id,
            ip=node.ip,
            hostname=node.hostname,
            alive=node.alive,
            used_bytes=node.mem_used_bytes,
            total_bytes=node.mem_total_bytes,
            threshold=threshold,
            slope_bytes_per_s=slope,
            seconds_left=left,
            sample_time=node.sample_time,
            object_store_used_bytes=node.object_store_used_bytes,
            object_store_total_bytes=node.object_store_total_bytes,
            flag=flag,
        )

    def flagged(self) -> list[NodeMemory]:
        """Flagged nodes, the nearest to a kill first (over, then the least time or room left)."""
        return list(self._flagged)


def _urgency(node: NodeMemory) -> tuple[int, float]:
    order = {"over": 0, "near": 1, "rising": 2}[node.flag or "rising"]
    return order, node.seconds_left if node.seconds_left is not None else float("inf")


def _slope(readings: deque[tuple[float, float]]) -> float | None:
    """Bytes per second over the last `WINDOW_S` of (time, bytes) readings (`SLOPE_POINTS` at most), by
    least squares, in one pass (times taken from the newest, so the sums stay small)."""
    if len(readings) < 3:
        return None
    newest = readings[-1][0]
    n = 0
    sx = sy = sxx = sxy = 0.0
    oldest = newest
    for when, used in reversed(readings):
        if newest - when > WINDOW_S or n == SLOPE_POINTS:
            break
        x = when - newest
        n += 1
        sx += x
        sy += used
        sxx += x * x
        sxy += x * used
        oldest = when
    if n < 3 or newest - oldest < MIN_SPAN_S:
        return None
    spread = n * sxx - sx * sx
    if spread <= 0:
        return None
    return (n * sxy - sx * sy) / spread
