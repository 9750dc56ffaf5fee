"""Provides the frozen snapshots the core hands to the UI: nodes, GPUs, actors, tasks, workers, jobs.

Every snapshot is immutable and self-contained, so a UI can keep the last one while the next is fetched
and mark it stale by its age. A metric the cluster did not report is `NA`, never a made-up zero.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

from cockpit.core.errors import CockpitError

T = TypeVar("T")


class _NotAvailable(enum.Enum):
    NA = "N/A"

    def __repr__(self) -> str:
        return "NA"

    def __str__(self) -> str:
        return "N/A"

    def __bool__(self) -> bool:
        return False


NA = _NotAvailable.NA
"""A metric the cluster or the GPU vendor did not report (AMD temperature, a node with no agent yet ...)."""

NAType = Literal[_NotAvailable.NA]
Metric = float | NAType


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """Versions and identity of the cluster, for the header."""

    ray_version: str
    python_version: str | NAType = NA
    session_name: str = ""
    git_commit: str = ""


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """A process holding memory on a GPU, as Ray's reporter saw it."""

    pid: int
    memory_mib: Metric
    utilization: Metric


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One GPU (or MIG slice) of a node, from the dashboard's node summary or the cockpit's own sampler."""

    index: int
    name: str
    uuid: str
    utilization: Metric
    """Percent busy; NA when NVML failed (`-1`) or the vendor gave nothing (`null`)."""
    memory_used_mib: Metric
    memory_total_mib: Metric
    power_w: Metric
    temperature_c: Metric
    """NA on AMD and on MIG slices, which report none."""
    processes: tuple[GpuProcess, ...] = ()


@dataclass(frozen=True, slots=True)
class ProcessStat:
    """One process of a node as its reporter saw it (`/nodes/{id}`'s `workers`: psutil's figures)."""

    node_id: str
    pid: int
    name: str
    """The process title's first word: `ray::ClassName` for an actor, `ray::IDLE`, `ray::task_name`."""
    rss_bytes: Metric
    cpu_percent: Metric = NA
    sample_time: float | None = None
    """When the node's reporter read it (posix seconds, the node's clock)."""
    actor_id: str = ""
    """The actor this worker process runs ("" for a task worker, a driver or an agent)."""
    job_id: str = ""


@dataclass(frozen=True, slots=True)
class NodeSnapshot:
    """One Ray node: membership from the GCS node table, host and GPU stats from the node's reporter."""

    node_id: str
    ip: str
    hostname: str
    is_head: bool
    state: str
    """`ALIVE` or `DEAD`."""
    state_message: str
    """Why a node died, in Ray's words ("health check failed due to missing too many heartbeats")."""
    start_time: float | None
    """When the node joined (posix seconds)."""
    end_time: float | None
    """When it died (posix seconds); None while alive."""
    logical_cpus: float
    logical_gpus: float
    """The node's `GPU` resource: what Ray schedules on, physical or not."""
    resources_total: Mapping[str, float] = field(default_factory=dict)
    cpu_percent: Metric = NA
    mem_used_bytes: Metric = NA
    mem_total_bytes: Metric = NA
    object_store_used_bytes: Metric = NA
    object_store_total_bytes: Metric = NA
    gpus: tuple[GpuSample, ...] = ()
    """GPUs the node's reporter saw. Empty for logical-only GPUs (`ray start --num-gpus` without hardware)."""
    sample_time: float | None = None
    """When the host stats were sampled on the node (posix seconds); None before the first report."""
    python: str = ""
    """The Python the node runs Ray workers with (from its raylet's command line); "" if unknown."""

    @property
    def alive(self) -> bool:
        return self.state == "ALIVE"

    @property
    def has_gpu_telemetry(self) -> bool:
        return bool(self.gpus)


@dataclass(frozen=True, slots=True)
class ListMeta:
    """How much of a state-API list came back: truncation is shown to the user, never hidden."""

    total: int
    """Rows in the cluster."""
    num_after_truncation: int
    """Rows left after the data source's own cap (10,000 by default)."""
    num_filtered: int
    """Rows matching the filters."""
    returned: int
    """Rows in this response (after `limit`)."""

    @property
    def truncated_at_source(self) -> bool:
        return self.total > self.num_after_truncation

    @property
    def limited(self) -> bool:
        return self.num_filtered > self.returned

    @property
    def complete(self) -> bool:
        return not (self.truncated_at_source or self.limited)

    def describe(self) -> str:
        """A short phrase for the UI: "" when complete, else what was left out."""
        parts = []
        if self.limited:
            parts.append(f"showing {self.returned} of {self.num_filtered}")
        if self.truncated_at_source:
            parts.append(f"the cluster dropped {self.total - self.num_after_truncation} of {self.total}")
        return "; ".join(parts)


@dataclass(frozen=True, slots=True)
class Listing(Generic[T]):
    """Rows of a state-API list, with the truncation funnel."""

    rows: tuple[T, ...]
    meta: ListMeta
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ActorRow:
    actor_id: str
    class_name: str
    name: str
    state: str
    job_id: str
    node_id: str
    pid: int | None
    num_restarts: int
    required_resources: Mapping[str, float] = field(default_factory=dict)
    death_cause: str = ""
    repr_name: str = ""
    placement_group_id: str = ""
    start_time: float | None = None
    """When the actor started (posix seconds), where the cluster says; None otherwise."""
    runtime_env: str = field(default="", repr=False)
    """The cluster's `serialized_runtime_env` (JSON text) as is: its env_vars may hold secrets, so it is
    kept out of repr and out of `cockpit actors --json`, and shown only masked."""

    @property
    def gpus(self) -> float:
        return self.required_resources.get("GPU", 0.0)


@dataclass(frozen=True, slots=True)
class ActorSummary:
    """Actor counts from `/api/v0/actors/summarize`: complete even when the actor list is cut."""

    by_class: Mapping[str, Mapping[str, int]]
    """Class name -> {state: count}."""
    total: int
    meta: ListMeta

    def by_state(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for states in self.by_class.values():
            for state, count in states.items():
                counts[state] = counts.get(state, 0) + count
        return counts


@dataclass(frozen=True, slots=True)
class PlacementGroupRow:
    placement_group_id: str
    name: str
    creator_job_id: str
    state: str
    """`PENDING`, `CREATED`, `REMOVED` or `RESCHEDULING`."""
    bundles: tuple[Mapping[str, float], ...]
    """Each bundle's resources, in bundle order."""
    bundle_nodes: tuple[str, ...] = ()
    """The node each bundle is placed on ("" while unplaced)."""
    scheduling_state: str = ""


@dataclass(frozen=True, slots=True)
class NodeUsage:
    """A node's resources as the autoscaler last saw them: {resource: (used, total)}."""

    node_id: str
    used_total: Mapping[str, tuple[float, float]]

    def free(self) -> dict[str, float]:
        return {res: max(total - used, 0.0) for res, (used, total) in self.used_total.items()}


@dataclass(frozen=True, slots=True)
class TaskRow:
    task_id: str
    attempt_number: int
    name: str
    state: str
    job_id: str
    type: str
    actor_id: str
    node_id: str
    worker_id: str
    error_type: str = ""
    error_message: str = ""
    worker_pid: int | None = None


@dataclass(frozen=True, slots=True)
class WorkerRow:
    worker_id: str
    worker_type: str
    is_alive: bool
    node_id: str
    ip: str
    pid: int | None
    debugger_port: int | None = None
    num_paused_threads: int = 0
    exit_type: str = ""
    start_time: float | None = None
    """When the worker process started (posix seconds); None if the cluster did not say."""
    exit_detail: str = ""
    """Why it exited, in Ray's words (an OOM kill's figures among them); "" while alive."""
    end_time: float | None = None
    """When it exited (posix seconds); None while alive or if the cluster did not say."""


@dataclass(frozen=True, slots=True)
class JobRow:
    """A Ray job: a submission (has `submission_id`) or a plain driver (`ray.init` from a shell)."""

    submission_id: str
    job_id: str
    type: str
    status: str
    """PENDING, RUNNING, STOPPED, SUCCEEDED or FAILED."""
    entrypoint: str
    message: str
    start_time: float | None
    end_time: float | None
    driver_node_id: str = ""
    error_type: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)
    debugger: str = ""
    """The job's `RAY_DEBUG` (runtime_env env_vars): `legacy` for the pdb debugger, else "" or `1`."""
    driver_pid: int | None = None
    """The driver's process id on its node (`driver_info.pid`), once the driver runs."""

    @property
    def key(self) -> str:
        """The id the Jobs API accepts for this job."""
        return self.submission_id or self.job_id

    @property
    def terminal(self) -> bool:
        return self.status in ("STOPPED", "SUCCEEDED", "FAILED")


class JobNotFound(CockpitError):
    """No job, or more than one, answers to the id the user gave."""


def running_jobs(jobs: Iterable[JobRow]) -> list[JobRow]:
    """The jobs running with a driver log (a submission whose driver has a node), newest first: the one
    rule for "the newest running job" (`newest_running`), which the driver-log pane, the training curves
    and the hang watch all follow. Ties in start time go by key, so every caller picks the same job."""
    running = [j for j in jobs if j.status == "RUNNING" and j.submission_id and j.driver_node_id]
    return sorted(running, key=lambda j: (j.start_time or 0.0, j.key), reverse=True)


def newest_running(jobs: Iterable[JobRow]) -> JobRow | None:
    """The newest running job with a driver log (None when none runs)."""
    running = running_jobs(jobs)
    return running[0] if running else None


def job_to_show(jobs: Iterable[JobRow]) -> JobRow | None:
    """The job a log or curves view shows when the user chose none: the newest running one, else the
    newest job with a driver log (an ended job's log still reads), else None."""
    jobs = list(jobs)
    running = newest_running(jobs)
    if running is not None:
        return running
    with_log = [j for j in jobs if j.submission_id and j.driver_node_id]
    return max(with_log, key=lambda j: (j.start_time or 0.0, j.key), default=None)


def match_job(jobs: Iterable[JobRow], wanted: str) -> JobRow:
    """The job WANTED names: a submission id or Ray job id exactly, else the one key it begins.

    Raises:
        JobNotFound: none, or several, answer to it (one line saying which).
    """
    jobs = list(jobs)
    exact = [j for j in jobs if wanted in (j.submission_id, j.job_id)]
    found = exact or [j for j in jobs if j.key.startswith(wanted)]
    if not found:
        raise JobNotFound(f"no job {wanted} on the cluster (`cockpit jobs TARGET` lists them).")
    if len(found) > 1:
        raise JobNotFound(f"{wanted} matches {len(found)} jobs; give more of its id.")
    return found[0]


@dataclass(frozen=True, slots=True)
class ClusterStatus:
    """What `ray status` prints, fetched over HTTP."""

    text: str


@dataclass(frozen=True, slots=True)
class LogIndex:
    """The log files of one node, grouped by kind as the dashboard groups them."""

    node_id: str
    files: Mapping[str, tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """Everything the Cluster screen shows, fetched together: nodes, jobs and when they were fetched."""

    nodes: tuple[NodeSnapshot, ...]
    jobs: tuple[JobRow, ...]
    fetched_at: float
    """Posix seconds when the answer arrived (the UI shows its age)."""
    silent: Mapping[str, float] = field(default_factory=dict)
    """Alive nodes that stopped reporting, by node id: seconds since their last new reading
    (`cockpit.core.cluster.liveness.NodeSilence`). Ray still calls them ALIVE until its health checks
    give up on them."""
