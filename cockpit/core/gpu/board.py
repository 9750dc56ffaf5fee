"""Provides the GPU board: every GPU of the cluster with its node, its actors, its age and its history.

The board takes what the pollers bring (node snapshots from the dashboard, actor rows, samples of the
high-resolution agent) and hands the UI an immutable `GpuFleet`. Building one costs O(GPUs) with small
constants (8,192 GPUs in a few milliseconds); what a row looks like is left to the widget, which renders
only the rows on screen.

Ages are measured on the cluster's clock: a reading's age is the newest node timestamp minus its own, so a
login node whose clock is off does not make every sample look stale or from the future.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from cockpit.core.actors.roles import DEFAULT_RULES, RoleRules
from cockpit.core.gpu.history import UtilHistory
from cockpit.core.snapshots import NA, ActorRow, GpuSample, Metric, NodeSnapshot

IDLE_BELOW = 5.0
"""Percent: a GPU under this is idle (and stands out while a job runs)."""
STALE_AFTER = 20.0
"""Seconds: a dashboard reading older than this is stale (the reporter publishes every 5 s, the dashboard
caches 2 s, the cockpit polls every 5 s: 12 s is the usual worst case)."""
AGENT_STALE_AFTER = 5.0
"""Seconds: the high-resolution agent samples every second; older than this and the row falls back."""

UTIL_BANDS = (IDLE_BELOW, 25.0, 50.0, 75.0, 90.0)
"""Utilization band edges, percent: a reading's state is U0 + the number of edges it reaches."""

# The state of one GPU row, one byte each in `GpuFleet.states` (the heatmap colours by it).
DEAD, NO_TELEMETRY, STALE, NO_READING, IDLE_IN_JOB, U0 = range(6)
"""U0 .. U0 + 5: the utilization bands, lowest first (U0 is idle while no job runs)."""

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
    """When the reading was taken, on the login node's clock (the node's clock moved by its offset);
    None without telemetry."""
    source: Source


@dataclass(frozen=True)
class GpuTotals:
    gpus: int
    """GPU rows on alive nodes (physical and logical)."""
    with_telemetry: int
    mean_utilization: Metric
    memory_used_mib: Metric
    memory_total_mib: Metric
    """NA when no GPU reported memory."""
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
    built_at: float
    """The login node's clock when this fleet was built. Every time in a fleet is on this clock: each
    node's readings are moved onto it by that node's own offset (see `_NodeClock`)."""
    job_running: bool
    actors_by_pid: Mapping[tuple[str, int], ActorRef] = field(default_factory=dict)
    """Alive actors by (node IP, pid)."""
    gpu_actors: Mapping[str, tuple[ActorRef, ...]] = field(default_factory=dict)
    """Per node, the alive actors holding GPU resources (what logical GPUs can be shown against)."""
    states: bytes = b""
    """One state per row (DEAD ... U0 + 5), computed with the fleet, off the UI thread."""
    groups: tuple[int, ...] = (0,)
    """Where each node's rows start in `rows`, and the end: node g is rows[groups[g]:groups[g + 1]]."""
    models: tuple[str, ...] = ()
    """Per node group, its GPU model ("mixed GPUs" if several, "" without telemetry)."""
    by_util: tuple[int, ...] = ()
    """Row indices by utilization, lowest first (no reading and dead nodes last)."""
    by_memory: tuple[int, ...] = ()
    """Row indices by memory used, highest first."""
    generation: int = 0
    """The board's change count when this fleet was built: a higher one is newer."""
    search: tuple[str, ...] = ()
    """Per row, lower-case text a filter matches: host, IP, node id, and the actors on the GPU."""
    agent_failed: Mapping[str, str] = field(default_factory=dict)
    """Per node id, why its high-resolution agent ended (an SSH refusal, a changed host key, no GPU
    library): that node's rows say it, the others' are unaffected."""

    def now(self) -> float:
        """The login node's clock now (what ages are measured against)."""
        return time.time()

    def age(self, row: GpuRow, now: float) -> float | None:
        return None if row.sample_time is None else max(0.0, now - row.sample_time)

    def idle(self, row: GpuRow) -> bool:
        gpu = row.gpu
        return gpu is not None and gpu.utilization is not NA and gpu.utilization < IDLE_BELOW

    def actors_on(self, row: GpuRow) -> tuple[ActorRef, ...]:
        """Actors whose process holds memory on this GPU (by pid); for a logical GPU, none (see
        `gpu_actors`, which is per node: without telemetry no one knows which slot an actor has)."""
        if row.gpu is None:
            return ()
        ip = row.node.ip
        found = []
        for process in row.gpu.processes:
            actor = self.actors_by_pid.get((ip, process.pid))
            if actor is not None:
                found.append(actor)
        return tuple(found)

    def ordered(self, sort: SortKey = "node", node_filter: str = "") -> list[GpuRow]:
        """The rows `order` picks, as rows."""
        rows = self.rows
        return [rows[i] for i in self.order(sort, node_filter)]

    def order(self, sort: SortKey = "node", node_filter: str = "") -> Sequence[int]:
        """Indices of the rows matching `node_filter` (host, IP, node id, or the class, name or role of
        an actor on the GPU), sorted: by node (grouped), by utilization (lowest first: idle GPUs are what
        one hunts) or by memory used (highest first). Without a filter this allocates nothing per row."""
        base: Sequence[int] = (
            self.by_util if sort == "util" else self.by_memory if sort == "memory" else range(len(self.rows))
        )
        needle = node_filter.strip().lower()
        if not needle:
            return base
        search = self.search
        return [i for i in base if needle in search[i]]


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


FORGET_EVERY = 60
"""Polls between sweeps of the history for GPUs whose node left the cluster (5 min at 5 s)."""
OFFSET_WINDOW = 24
"""Fresh readings per node whose smallest lag is that node's clock offset."""


class _NodeClock:
    """How far a node's clock is behind the login node's: the smallest lag (login time when a reading
    arrived minus the node's own time on it) over its last fresh readings. A repeated reading adds
    nothing, so when readings stop the offset stays and they visibly age."""

    __slots__ = ("lags", "last", "offset")

    def __init__(self) -> None:
        self.lags: deque[float] = deque(maxlen=OFFSET_WINDOW)
        self.last: float | None = None
        self.offset = 0.0

    def observe(self, sample_time: float, arrived: float) -> None:
        if sample_time != self.last:
            self.last = sample_time
            self.lags.append(arrived - sample_time)
            self.offset = min(self.lags)


class GpuBoard:
    """Keeps the history and the latest inputs; `fleet()` builds the view the UI shows.

    Thread-safe: the poller feeds it and builds fleets on a thread while the UI loop hands it agent
    readings. One lock guards the inputs (held for microseconds per change); a fleet is built from a copy
    of them outside it, and `generation` counts the changes, so a fleet built before a change is known
    to be older than one built after it and is never cached over it.
    """

    def __init__(self) -> None:
        self.history = UtilHistory()
        self._lock = threading.Lock()
        self.generation = 0
        self._poll = -1
        self._ingested = 0
        self._nodes: tuple[NodeSnapshot, ...] = ()
        self._job_running = False
        self._clocks: dict[str, _NodeClock] = {}
        self._local_time = 0.0
        self._actors: tuple[tuple[str, ActorRef], ...] = ()
        """Alive actors with their node ids (roles worked out once per actor poll, not per build)."""
        self.rules: RoleRules = DEFAULT_RULES
        """How actors get their role (the user's role table on top of the built-in one)."""
        self._agent: dict[str, _AgentReading] = {}
        self._agent_failed: dict[str, str] = {}
        """Per node id, why its high-resolution agent ended (shown in that node's GPU rows)."""
        """Newest high-resolution reading per node id (times on the node's clock)."""
        self._fleet: GpuFleet | None = None

    def _changed(self) -> None:
        self.generation += 1
        self._fleet = None

    def _clock(self, node_id: str) -> _NodeClock:
        clock = self._clocks.get(node_id)
        if clock is None:
            clock = self._clocks[node_id] = _NodeClock()
        return clock

    # -- inputs ------------------------------------------------------------------------------------

    def ingest_nodes(
        self,
        nodes: Sequence[NodeSnapshot],
        job_running: bool,
        local_time: float | None = None,
        poll: int | None = None,
    ) -> None:
        """A node poll that arrived at `local_time`: records each new GPU reading in the history. A poll
        numbered below the last one taken (a cancelled poll finishing late) is ignored."""
        local_time = local_time if local_time is not None else time.time()
        with self._lock:
            if poll is not None:
                if poll < self._poll:
                    return
                self._poll = poll
            self._nodes = tuple(nodes)
            self._job_running = job_running
            self._local_time = local_time
            record = self.history.record
            for node in nodes:
                if not node.alive or node.sample_time is None:
                    continue
                clock = self._clock(node.node_id)
                if node.sample_time == clock.last:
                    # Recorded already: between two summaries every poll carries the last one's readings
                    # (16,000 GPUs at 2,000 nodes), and writing a reading again changes nothing.
                    continue
                clock.observe(node.sample_time, local_time)
                if node.node_id in self._agent:
                    continue  # an agent's 1 Hz readings feed the history of its node
                prefix = node.node_id + ":"
                when = node.sample_time + clock.offset
                for gpu in node.gpus:
                    record(prefix + str(gpu.index), when, gpu.utilization)
            self._ingested += 1
            if self._ingested % FORGET_EVERY == 0:
                # Memory stays bounded by the cluster's size: nodes gone from Ray's tables lose their
                # history (and their clocks); dead nodes Ray still lists keep theirs.
                listed = {node.node_id for node in nodes}
                self.history.forget_unless(lambda key: key.partition(":")[0] in listed)
                self._clocks = {k: v for k, v in self._clocks.items() if k in listed}
            self._changed()

    def ingest_actors(self, actors: Iterable[ActorRow]) -> None:
        """Alive actors (from `/api/v0/actors`): their pids name the processes on GPUs."""
        refs = tuple(
            (actor.node_id, ActorRef(
                actor_id=actor.actor_id,
                class_name=actor.class_name,
                name=actor.name,
                role=self.rules.role(actor.class_name, actor.name) or "",
                pid=actor.pid,
                gpus=actor.gpus,
            ))
            for actor in actors
            if actor.state == "ALIVE"
        )  # fmt: skip
        with self._lock:
            self._actors = refs
            self._changed()

    def ingest_agent(
        self, node_ids: Iterable[str], when: float, gpus: Sequence[GpuSample], arrived: float | None = None
    ) -> None:
        """One reading of the high-resolution agent (taken at `when` on its node's clock, arrived at
        `arrived` on the login node's), for the Ray nodes of its host."""
        reading = _AgentReading(time=when, gpus=tuple(gpus))
        arrived = arrived if arrived is not None else time.time()
        with self._lock:
            for node_id in node_ids:
                self._agent[node_id] = reading
                self._agent_failed.pop(node_id, None)
                clock = self._clock(node_id)
                clock.observe(when, arrived)
                prefix = node_id + ":"
                for gpu in gpus:
                    self.history.record(prefix + str(gpu.index), when + clock.offset, gpu.utilization)
            self._changed()

    def forget_agent(self, node_ids: Iterable[str], reason: str = "") -> None:
        """The agent on these nodes stopped: their rows go back to the dashboard's readings, and REASON
        (why it stopped, one line) is shown with them until high-resolution mode is off."""
        with self._lock:
            for node_id in node_ids:
                self._agent.pop(node_id, None)
                if reason:
                    self._agent_failed[node_id] = reason
            self._changed()

    def stop_agent(self) -> None:
        """High-resolution mode is off: rows go back to the dashboard's readings."""
        with self._lock:
            self._agent.clear()
            self._agent_failed.clear()
            self._changed()

    # -- output ------------------------------------------------------------------------------------

    def fleet(self) -> GpuFleet:
        """The current view: built once per change, from a copy of the inputs, outside the lock (O(GPUs):
        call it off the UI thread at scale)."""
        with self._lock:
            if self._fleet is not None:
                return self._fleet
            generation = self.generation
            inputs = _Inputs(
                nodes=self._nodes,
                job_running=self._job_running,
                local_time=self._local_time,
                offset=_cluster_offset(self._clocks, self._nodes),
                actors=self._actors,
                agent=dict(self._agent),
                agent_failed=dict(self._agent_failed),
            )
        fleet = _build(inputs, generation)
        with self._lock:
            if self.generation == generation:
                self._fleet = fleet
        return fleet


@dataclass(frozen=True)
class _Inputs:
    nodes: tuple[NodeSnapshot, ...]
    job_running: bool
    local_time: float
    offset: float
    actors: tuple[tuple[str, ActorRef], ...]
    agent: Mapping[str, _AgentReading]
    agent_failed: Mapping[str, str] = field(default_factory=dict)


def _build(inputs: _Inputs, generation: int) -> GpuFleet:
    by_pid, holding = _actor_maps(inputs.actors, inputs.nodes)
    rows: list[GpuRow] = []
    search: list[str] = []
    agent = inputs.agent
    offset = inputs.offset
    for node in inputs.nodes:
        prefix = node.node_id + ":"
        where = f"{node.hostname}|{node.ip}|{node.node_id}".lower()
        reading = agent.get(node.node_id)
        if (
            reading is not None
            and node.alive
            and reading.gpus
            and (node.sample_time is None or reading.time >= node.sample_time)
        ):
            taken = reading.time + offset
            for gpu in reading.gpus:
                rows.append(GpuRow(node, gpu, gpu.index, prefix + str(gpu.index), taken, "agent"))
                search.append(where + _actor_text(by_pid, node.ip, gpu))
        elif node.gpus:
            when = None if node.sample_time is None else node.sample_time + offset
            for gpu in node.gpus:
                rows.append(GpuRow(node, gpu, gpu.index, prefix + str(gpu.index), when, "dashboard"))
                search.append(where + _actor_text(by_pid, node.ip, gpu))
        elif node.logical_gpus > 0:
            actors = holding.get(node.node_id, ())
            held = "".join(_actor_words(a) for a in actors)
            for index in range(int(node.logical_gpus + 0.999)):
                rows.append(GpuRow(node, None, index, prefix + str(index), None, "none"))
                search.append(where + held)
    now = inputs.local_time
    states = bytes(_state(row, now, inputs.job_running) for row in rows)
    groups = [0]
    models = []
    for index in range(1, len(rows) + 1):
        if index == len(rows) or rows[index].node is not rows[index - 1].node:
            names = {row.gpu.name for row in rows[groups[-1] : index] if row.gpu is not None}
            models.append(names.pop() if len(names) == 1 else "mixed GPUs" if names else "")
            groups.append(index)
    return GpuFleet(
        rows=tuple(rows),
        nodes=inputs.nodes,
        totals=_totals(rows, inputs.nodes, states),
        built_at=now,
        job_running=inputs.job_running,
        actors_by_pid=by_pid,
        gpu_actors=holding,
        states=states,
        groups=tuple(groups) if rows else (0,),
        models=tuple(models) if rows else (),
        by_util=tuple(sorted(range(len(rows)), key=lambda i: _util_key(rows[i]))),
        by_memory=tuple(sorted(range(len(rows)), key=lambda i: _memory_key(rows[i]))),
        generation=generation,
        search=tuple(search),
        agent_failed=inputs.agent_failed,
    )


def _cluster_offset(clocks: Mapping[str, _NodeClock], nodes: Sequence[NodeSnapshot]) -> float:
    """The cluster's clock offset: the median of the alive nodes' own offsets. Cluster clocks are kept in
    step (NTP), so one offset serves all; the median ignores a node whose readings were stuck from the
    start (its lag is its age: it must show as stale) or whose clock is off."""
    offsets = sorted(clocks[n.node_id].offset for n in nodes if n.alive and n.node_id in clocks)
    return offsets[(len(offsets) - 1) // 2] if offsets else 0.0


def _actor_words(actor: ActorRef) -> str:
    """What a filter matches of an actor, lower case, each word after a `|`."""
    return f"|{actor.class_name}|{actor.name}|{actor.role}".lower()


def _actor_text(by_pid: Mapping[tuple[str, int], ActorRef], ip: str, gpu: GpuSample) -> str:
    return "".join(_actor_words(a) for p in gpu.processes if (a := by_pid.get((ip, p.pid))) is not None)


def _actor_maps(
    actors: Sequence[tuple[str, ActorRef]], nodes: Sequence[NodeSnapshot]
) -> tuple[dict[tuple[str, int], ActorRef], dict[str, tuple[ActorRef, ...]]]:
    """Actors by (node IP, pid): raylets sharing a host share its GPUs and pid space, so an actor of one
    is found on the GPU rows of its siblings too. And per node, the actors holding GPU resources."""
    ip_of = {node.node_id: node.ip for node in nodes}
    by_pid: dict[tuple[str, int], ActorRef] = {}
    holding: dict[str, list[ActorRef]] = {}
    for node_id, ref in actors:
        if ref.pid is not None:
            by_pid[(ip_of.get(node_id, node_id), ref.pid)] = ref
        if ref.gpus > 0:
            holding.setdefault(node_id, []).append(ref)
    return by_pid, {node: tuple(refs) for node, refs in holding.items()}


def _state(row: GpuRow, now: float, job_running: bool) -> int:
    if not row.node.alive:
        return DEAD
    gpu = row.gpu
    if gpu is None:
        return NO_TELEMETRY
    if is_stale(row, now):
        return STALE
    if gpu.utilization is NA:
        return NO_READING
    util = float(gpu.utilization)
    if util < IDLE_BELOW and job_running:
        return IDLE_IN_JOB
    return U0 + sum(1 for edge in UTIL_BANDS if util >= edge)


def is_stale(row: GpuRow, now: float) -> bool:
    """A reading on an alive node older than its source's cadence allows."""
    if row.sample_time is None or not row.node.alive:
        return False
    return now - row.sample_time > (AGENT_STALE_AFTER if row.source == "agent" else STALE_AFTER)


def _totals(rows: Sequence[GpuRow], nodes: Sequence[NodeSnapshot], states: bytes) -> GpuTotals:
    """Totals over alive nodes. A physical GPU is counted once, however many raylets on its host report
    it (several Ray nodes on one machine each see all its GPUs); logical GPUs count per node."""
    gpus = with_telemetry = idle = stale = no_telemetry = 0
    util_sum = 0.0
    util_count = 0
    mem_used = mem_total = 0.0
    mem_count = 0
    gpu_nodes: set[str] = set()
    newest: dict[str, GpuRow] = {}
    """Per GPU uuid, the freshest of the rows that report it (raylets on one host all do)."""
    for row in rows:
        if row.node.alive and row.gpu is not None and row.gpu.uuid:
            seen = newest.get(row.gpu.uuid)
            if seen is None or (row.sample_time or 0.0) > (seen.sample_time or 0.0):
                newest[row.gpu.uuid] = row
    for row, state in zip(rows, states, strict=True):
        if not row.node.alive:
            continue
        gpu_nodes.add(row.node.node_id)
        gpu = row.gpu
        if gpu is None:
            gpus += 1
            no_telemetry += 1
            continue
        if gpu.uuid and newest[gpu.uuid] is not row:
            continue
        gpus += 1
        with_telemetry += 1
        if gpu.utilization is not NA:
            util_sum += gpu.utilization
            util_count += 1
            if gpu.utilization < IDLE_BELOW:
                idle += 1
        if gpu.memory_used_mib is not NA and gpu.memory_total_mib is not NA:
            mem_used += gpu.memory_used_mib
            mem_total += gpu.memory_total_mib
            mem_count += 1
        if state == STALE:
            stale += 1
    alive_nodes = sum(1 for n in nodes if n.alive)
    return GpuTotals(
        gpus=gpus,
        with_telemetry=with_telemetry,
        mean_utilization=util_sum / util_count if util_count else NA,
        memory_used_mib=mem_used if mem_count else NA,
        memory_total_mib=mem_total if mem_count else NA,
        idle=idle,
        stale=stale,
        no_telemetry=no_telemetry,
        nodes_with_gpus=len(gpu_nodes),
        nodes_without_gpus=alive_nodes - len(gpu_nodes),
    )
