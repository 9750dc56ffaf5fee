"""Provides the GPU board: every GPU of the cluster with its node, its actors, its age and its history.

The board takes what the pollers bring (node snapshots from the dashboard, actor rows, samples of the
high-resolution agent) and hands the UI an immutable `GpuFleet`. Building one costs O(GPUs) with small
constants (8,192 GPUs in a few milliseconds); what a row looks like is left to the widget, which renders
only the rows on screen.

Ages are measured on the cluster's clock: a reading's age is the newest node timestamp minus its own, so a
login node whose clock is off does not make every sample look stale or from the future.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from cockpit.core.gpu_history import UtilHistory
from cockpit.core.roles import role_of
from cockpit.core.snapshots import NA, ActorRow, GpuSample, Metric, NodeSnapshot

IDLE_BELOW = 5.0
"""Percent: a GPU under this is idle (and stands out while a job runs)."""
STALE_AFTER = 20.0
"""Seconds: a dashboard reading older than this is stale (the reporter publishes every 5 s, the dashboard
caches 2 s, the cockpit polls every 5 s: 12 s is the usual worst case)."""
AGENT_STALE_AFTER = 5.0
"""Seconds: the high-resolution agent samples every second; older than this and the row falls back."""

Source = Literal["dashboard", "agent", "none"]
SortKey = Literal["node", "util", "memory"]
SORT_KEYS: tuple[SortKey, ...] = ("node", "util", "memory")


class ActorRef(NamedTuple):
    """An actor as the GPU view names it."""

    actor_id: str
    class_name: str
    name: str
    role: str
    pid: int | None
    gpus: float
    """The actor's `GPU` request (what Ray scheduled it on), 0 if none."""

    @property
    def label(self) -> str:
        shown = self.name or self.class_name
        if self.name and self.class_name and self.class_name not in self.name:
            shown = f"{self.class_name} {self.name}"
        return f"{shown} ({self.role})" if self.role else shown


class GpuRow(NamedTuple):
    """One GPU of one node. `gpu` is None for a logical GPU that no vendor library reports on."""

    node: NodeSnapshot
    gpu: GpuSample | None
    gpu_index: int
    key: str
    """Stable across polls: `node_id:index`; keys the history."""
    sample_time: float | None
    """Cluster-clock posix seconds of the reading; None without telemetry."""
    source: Source


@dataclass(frozen=True)
class GpuTotals:
    gpus: int
    """GPU rows on alive nodes (physical and logical)."""
    with_telemetry: int
    mean_utilization: Metric
    memory_used_mib: float
    memory_total_mib: float
    idle: int
    stale: int
    no_telemetry: int
    nodes_with_gpus: int
    nodes_without_gpus: int


@dataclass(frozen=True)
class GpuFleet:
    """One immutable view of every GPU, in node order (head first, then by join time)."""

    rows: tuple[GpuRow, ...]
    nodes: tuple[NodeSnapshot, ...]
    """Every node, GPU-less ones included."""
    totals: GpuTotals
    cluster_time: float
    """The cluster's clock when this fleet was built (newest node timestamp)."""
    local_time: float
    """The login node's clock at the same moment; `age` moves `cluster_time` on by the difference."""
    job_running: bool
    actors_by_pid: Mapping[tuple[str, int], ActorRef] = field(default_factory=dict)
    gpu_actors: Mapping[str, tuple[ActorRef, ...]] = field(default_factory=dict)
    """Per node, the alive actors holding GPU resources (what logical GPUs can be shown against)."""

    def now(self, local_now: float | None = None) -> float:
        """The cluster's clock now, estimated from the last fetch."""
        return self.cluster_time + ((local_now if local_now is not None else time.time()) - self.local_time)

    def age(self, row: GpuRow, now: float) -> float | None:
        return None if row.sample_time is None else max(0.0, now - row.sample_time)

    def stale(self, row: GpuRow, now: float) -> bool:
        return is_stale(row, now)

    def idle(self, row: GpuRow) -> bool:
        gpu = row.gpu
        return gpu is not None and gpu.utilization is not NA and gpu.utilization < IDLE_BELOW

    def actors_on(self, row: GpuRow) -> tuple[ActorRef, ...]:
        """Actors whose process holds memory on this GPU (by pid); for a logical GPU, none (see
        `gpu_actors`, which is per node: without telemetry no one knows which slot an actor has)."""
        if row.gpu is None:
            return ()
        node_id = row.node.node_id
        found = []
        for process in row.gpu.processes:
            actor = self.actors_by_pid.get((node_id, process.pid))
            if actor is not None:
                found.append(actor)
        return tuple(found)

    def ordered(self, sort: SortKey = "node", node_filter: str = "") -> list[GpuRow]:
        """Rows matching `node_filter` (host, IP, node id, or the class, name or role of an actor on the
        GPU), sorted: by node (grouped), by utilization (lowest first: idle GPUs are what one hunts),
        or by memory used (highest first)."""
        rows: Sequence[GpuRow] = self.rows
        needle = node_filter.strip().lower()
        if needle:
            rows = [row for row in rows if self._matches(row, needle)]
        if sort == "util":
            return sorted(rows, key=_util_key)
        if sort == "memory":
            return sorted(rows, key=_memory_key)
        return list(rows)

    def _matches(self, row: GpuRow, needle: str) -> bool:
        node = row.node
        if needle in node.hostname.lower() or needle in node.ip or node.node_id.startswith(needle):
            return True
        actors = self.actors_on(row) if row.gpu is not None else self.gpu_actors.get(node.node_id, ())
        return any(
            needle in a.class_name.lower() or needle in a.name.lower() or needle == a.role for a in actors
        )


def _util_key(row: GpuRow) -> float:
    gpu = row.gpu
    if gpu is None or gpu.utilization is NA or not row.node.alive:
        return 1000.0
    return float(gpu.utilization)


def _memory_key(row: GpuRow) -> float:
    gpu = row.gpu
    if gpu is None or gpu.memory_used_mib is NA or not row.node.alive:
        return 1.0
    return -float(gpu.memory_used_mib)


@dataclass
class _AgentReading:
    time: float
    gpus: tuple[GpuSample, ...]


class GpuBoard:
    """Keeps the history and the latest inputs; `fleet()` builds the view the UI shows."""

    def __init__(self) -> None:
        self.history = UtilHistory()
        self._nodes: tuple[NodeSnapshot, ...] = ()
        self._job_running = False
        self._cluster_time = 0.0
        self._local_time = 0.0
        self._actors_by_pid: dict[tuple[str, int], ActorRef] = {}
        self._gpu_actors: dict[str, tuple[ActorRef, ...]] = {}
        self._agent: dict[str, _AgentReading] = {}
        """Newest high-resolution reading per node id."""
        self._fleet: GpuFleet | None = None

    # -- inputs ------------------------------------------------------------------------------------

    def ingest_nodes(
        self, nodes: Sequence[NodeSnapshot], job_running: bool, local_time: float | None = None
    ) -> None:
        """A node poll: records each GPU reading in the history (once per reading)."""
        self._nodes = tuple(nodes)
        self._job_running = job_running
        self._local_time = local_time if local_time is not None else time.time()
        newest = max((n.sample_time for n in nodes if n.sample_time is not None), default=None)
        self._cluster_time = newest if newest is not None else self._local_time
        record = self.history.record
        for node in nodes:
            if not node.alive or node.sample_time is None:
                continue
            if node.node_id in self._agent:
                continue  # the agent's 1 Hz readings feed this node's history
            prefix = node.node_id + ":"
            when = node.sample_time
            for gpu in node.gpus:
                record(prefix + str(gpu.index), when, gpu.utilization)
        self._fleet = None

    def ingest_actors(self, actors: Iterable[ActorRow]) -> None:
        """Alive actors (from `/api/v0/actors`): their pids name the processes on GPUs."""
        by_pid: dict[tuple[str, int], ActorRef] = {}
        holding: dict[str, list[ActorRef]] = {}
        for actor in actors:
            if actor.state != "ALIVE":
                continue
            ref = ActorRef(
                actor_id=actor.actor_id,
                class_name=actor.class_name,
                name=actor.name,
                role=role_of(actor.class_name, actor.name),
                pid=actor.pid,
                gpus=actor.gpus,
            )
            if actor.pid is not None:
                by_pid[(actor.node_id, actor.pid)] = ref
            if actor.gpus > 0:
                holding.setdefault(actor.node_id, []).append(ref)
        self._actors_by_pid = by_pid
        self._gpu_actors = {node: tuple(refs) for node, refs in holding.items()}
        self._fleet = None

    def ingest_agent(self, node_id: str, when: float, gpus: Sequence[GpuSample]) -> None:
        """One reading of the high-resolution agent on `node_id` (its clock)."""
        self._agent[node_id] = _AgentReading(time=when, gpus=tuple(gpus))
        prefix = node_id + ":"
        for gpu in gpus:
            self.history.record(prefix + str(gpu.index), when, gpu.utilization)
        self._fleet = None

    def forget_agent(self, node_ids: Iterable[str]) -> None:
        """The agent on these nodes stopped: their rows go back to the dashboard's readings."""
        for node_id in node_ids:
            self._agent.pop(node_id, None)
        self._fleet = None

    def stop_agent(self) -> None:
        """High-resolution mode is off: rows go back to the dashboard's readings."""
        self._agent.clear()
        self._fleet = None

    # -- output ------------------------------------------------------------------------------------

    def fleet(self) -> GpuFleet:
        if self._fleet is None:
            self._fleet = self._build()
        return self._fleet

    def _build(self) -> GpuFleet:
        rows: list[GpuRow] = []
        agent = self._agent
        for node in self._nodes:
            prefix = node.node_id + ":"
            reading = agent.get(node.node_id)
            if (
                reading is not None
                and node.alive
                and reading.gpus
                and (node.sample_time is None or reading.time >= node.sample_time)
            ):
                for gpu in reading.gpus:
                    rows.append(GpuRow(node, gpu, gpu.index, prefix + str(gpu.index), reading.time, "agent"))
            elif node.gpus:
                when = node.sample_time
                for gpu in node.gpus:
                    rows.append(GpuRow(node, gpu, gpu.index, prefix + str(gpu.index), when, "dashboard"))
            elif node.logical_gpus > 0:
                for index in range(int(node.logical_gpus + 0.999)):
                    rows.append(GpuRow(node, None, index, prefix + str(index), None, "none"))
        return GpuFleet(
            rows=tuple(rows),
            nodes=self._nodes,
            totals=_totals(rows, self._nodes, self._cluster_time),
            cluster_time=self._cluster_time,
            local_time=self._local_time,
            job_running=self._job_running,
            actors_by_pid=self._actors_by_pid,
            gpu_actors=self._gpu_actors,
        )


def is_stale(row: GpuRow, now: float) -> bool:
    """A reading on an alive node older than its source's cadence allows."""
    if row.sample_time is None or not row.node.alive:
        return False
    return now - row.sample_time > (AGENT_STALE_AFTER if row.source == "agent" else STALE_AFTER)


def _totals(rows: Sequence[GpuRow], nodes: Sequence[NodeSnapshot], now: float) -> GpuTotals:
    gpus = with_telemetry = idle = stale = no_telemetry = 0
    util_sum = 0.0
    util_count = 0
    mem_used = mem_total = 0.0
    gpu_nodes: set[str] = set()
    for row in rows:
        if not row.node.alive:
            continue
        gpus += 1
        gpu_nodes.add(row.node.node_id)
        gpu = row.gpu
        if gpu is None:
            no_telemetry += 1
            continue
        with_telemetry += 1
        if gpu.utilization is not NA:
            util_sum += gpu.utilization
            util_count += 1
            if gpu.utilization < IDLE_BELOW:
                idle += 1
        if gpu.memory_used_mib is not NA and gpu.memory_total_mib is not NA:
            mem_used += gpu.memory_used_mib
            mem_total += gpu.memory_total_mib
        if is_stale(row, now):
            stale += 1
    alive_nodes = sum(1 for n in nodes if n.alive)
    return GpuTotals(
        gpus=gpus,
        with_telemetry=with_telemetry,
        mean_utilization=util_sum / util_count if util_count else NA,
        memory_used_mib=mem_used,
        memory_total_mib=mem_total,
        idle=idle,
        stale=stale,
        no_telemetry=no_telemetry,
        nodes_with_gpus=len(gpu_nodes),
        nodes_without_gpus=alive_nodes - len(gpu_nodes),
    )
