"""Provides the memory report: every node's memory against Ray's kill threshold, the biggest processes
of the fullest nodes (with their roles and the GPU memory they hold), and every out-of-memory kill.

`cockpit memory` prints it; the TUI's memory warning asks for the pieces it needs (`read_threshold`,
`biggest_processes`) only for the nodes it flags. Kills come from the cluster's worker table (Ray keeps
the dead workers' rows): NODE_OUT_OF_MEMORY is the memory monitor, whose text names the figures; a
SYSTEM_ERROR exit "with a connection error code 2" is a SIGKILL or a crash, which is the kernel's OOM
killer only where the node's kernel log says so (read on this machine for a local cluster).
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from cockpit.core.actors.roles import DEFAULT_RULES, RoleRules
from cockpit.core.cluster.dashboard import DashboardClient
from cockpit.core.cluster.oom import (
    LABELS,
    KernelKill,
    OomKind,
    first_line,
    kernel_kills,
    monitor_threshold,
    ray_oom_figures,
)
from cockpit.core.errors import CockpitError
from cockpit.core.memory.watch import MemoryWatch, NodeMemory, Threshold
from cockpit.core.snapshots import NA, ActorRow, Listing, Metric, NodeSnapshot, ProcessStat, WorkerRow

T = TypeVar("T")

RAYLET_HEAD_BYTES = 256 * 1024
"""How much of a raylet.out is read for its memory monitor's start line (logged in its first second)."""
TOP_NODES = 8
"""Nodes whose processes a report lists: the fullest, by share of their kill threshold."""
PER_NODE = 5
"""Processes listed per node, the biggest first."""
NO_KERNEL_LOG = "not read (the nodes' kernel logs are not reachable from here)"
AT_ONCE = 8
"""Requests to the head at once for the per-node reads (raylet.out, process tables)."""
KILL_ROWS = 1000
"""Dead workers read per exit type (the worker table keeps the most recent ones)."""


@dataclass(frozen=True, slots=True)
class ProcessMemory:
    node_id: str
    ip: str
    pid: int
    name: str
    rss_bytes: Metric
    gpu_memory_bytes: Metric
    """GPU memory this process has allocated, summed over the node's GPUs (NVML/amdsmi); N/A without."""
    role: str
    actor_id: str
    class_name: str
    actor_name: str
    job_id: str
    sample_time: float | None


@dataclass(frozen=True, slots=True)
class OomKill:
    time: float | None
    kind: OomKind
    label: str
    node_id: str
    ip: str
    pid: int | None
    worker_id: str
    actor_id: str
    class_name: str
    actor_name: str
    role: str
    job_id: str
    task_name: str
    rss_bytes: int | None
    """The process's memory when last seen: Ray's measure when it chose it, or the kernel's, or None."""
    node_used_bytes: int | None
    threshold_bytes: int | None
    limit_bytes: int | None
    message: str
    """Ray's own first line (or the kernel's line), as the cluster wrote it."""


@dataclass(frozen=True, slots=True)
class MemoryReport:
    time: float
    nodes: tuple[NodeMemory, ...]
    processes: tuple[ProcessMemory, ...]
    kills: tuple[OomKill, ...]
    kernel_log: str
    """Where kernel kills were looked for ("this machine's dmesg"), or why they could not be."""
    warnings: tuple[str, ...] = ()


async def read_threshold(client: DashboardClient, node: NodeSnapshot) -> Threshold | None:
    """The kill threshold NODE's raylet logged at its start (the first `RAYLET_HEAD_BYTES` of its
    raylet.out); None where the monitor is off or the log cannot be read."""
    seen = b""
    try:
        where = [("node_id", node.node_id), ("filename", "raylet.out")]
        stream = client.read_log(where)
        async with contextlib.aclosing(stream):  # type: ignore[type-var]
            async for chunk in stream:
                seen += chunk
                found = monitor_threshold(seen.decode("utf-8", "replace"))
                if found is not None:
                    return Threshold(
                        float(found.threshold_bytes), found.fraction, "raylet.out", node.hostname or node.ip
                    )
                if len(seen) >= RAYLET_HEAD_BYTES:
                    return None
    except CockpitError:
        return None
    return None


def _gpu_memory(node: NodeSnapshot) -> dict[int, float]:
    """Per pid, the GPU memory the node's GPUs say it holds (bytes)."""
    held: dict[int, float] = {}
    for gpu in node.gpus:
        for process in gpu.processes:
            if process.memory_mib is not NA:
                held[process.pid] = held.get(process.pid, 0.0) + float(process.memory_mib) * 2**20
    return held


def process_rows(
    node: NodeSnapshot,
    stats: Iterable[ProcessStat],
    actors: Mapping[tuple[str, int], ActorRow],
    rules: RoleRules = DEFAULT_RULES,
    limit: int = PER_NODE,
) -> list[ProcessMemory]:
    """NODE's biggest processes by RSS, each with its actor (by pid) and role."""
    gpu = _gpu_memory(node)
    rows = []
    for stat in sorted(stats, key=lambda s: -float(s.rss_bytes) if s.rss_bytes is not NA else 0.0)[:limit]:
        actor = actors.get((node.node_id, stat.pid))
        class_name = actor.class_name if actor else stat.name.removeprefix("ray::") if stat.actor_id else ""
        rows.append(
            ProcessMemory(
                node_id=node.node_id,
                ip=node.ip,
                pid=stat.pid,
                name=stat.name,
                rss_bytes=stat.rss_bytes,
                gpu_memory_bytes=gpu.get(stat.pid, NA),
                role=rules.role(class_name, actor.name if actor else "") or "" if class_name else "",
                actor_id=actor.actor_id if actor else stat.actor_id,
                class_name=class_name,
                actor_name=actor.name if actor else "",
                job_id=actor.job_id if actor else stat.job_id,
                sample_time=stat.sample_time,
            )
        )
    return rows


async def biggest_processes(
    client: DashboardClient,
    node: NodeSnapshot,
    actors: Mapping[tuple[str, int], ActorRow],
    rules: RoleRules = DEFAULT_RULES,
    limit: int = PER_NODE,
) -> list[ProcessMemory]:
    return process_rows(node, await client.node_processes(node.node_id), actors, rules, limit)


def local_kernel_log() -> tuple[str | None, str]:
    """This machine's kernel log (`dmesg`), and where it came from or why it could not be read."""
    try:
        done = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=10, errors="replace")
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"the kernel log could not be read here ({exc})"
    if done.returncode != 0:
        why = first_line(done.stderr) or f"dmesg exited {done.returncode}"
        return None, f"the kernel log could not be read here ({why[:200]})"
    return done.stdout, "this machine's kernel log (dmesg)"


def oom_kills(
    workers: Iterable[WorkerRow],
    actors: Iterable[ActorRow],
    rules: RoleRules = DEFAULT_RULES,
    kernel: Mapping[int, KernelKill] | None = None,
    job: str = "",
) -> list[OomKill]:
    """Every worker the memory monitor killed, and every SIGKILL or crash (the kernel's OOM killer where
    KERNEL, the node's kernel kills by pid, names it), with its actor and role; the newest first."""
    by_worker_pid = {(a.node_id, a.pid): a for a in actors if a.pid}
    by_id = {a.actor_id: a for a in actors}
    kills = []
    for worker in workers:
        text = worker.exit_detail
        if worker.exit_type == "NODE_OUT_OF_MEMORY":
            kind: OomKind = "ray"
        elif worker.exit_type == "SYSTEM_ERROR" and "connection error code 2" in text:
            kind = "kernel" if kernel is not None and worker.pid in kernel else "kernel?"
        else:
            continue
        figures = ray_oom_figures(text) if kind == "ray" else None
        actor = by_id.get(figures.actor_id or "") if figures else None
        if actor is None and worker.pid:
            actor = by_worker_pid.get((worker.node_id, worker.pid))
        job_id = (figures.job_id if figures else None) or (actor.job_id if actor else "")
        if job and job_id != job:
            continue
        rss: int | None = figures.rss_bytes if figures else None
        message = first_line(text)
        if kind == "kernel" and kernel is not None and worker.pid is not None:
            rss = kernel[worker.pid].rss_bytes
            message = kernel[worker.pid].line
        kills.append(
            OomKill(
                time=worker.end_time,
                kind=kind,
                label=LABELS[kind],
                node_id=worker.node_id,
                ip=worker.ip,
                pid=worker.pid,
                worker_id=worker.worker_id,
                actor_id=actor.actor_id if actor else (figures.actor_id or "" if figures else ""),
                class_name=actor.class_name if actor else "",
                actor_name=actor.name if actor else "",
                role=(rules.role(actor.class_name, actor.name) or "") if actor else "",
                job_id=job_id,
                task_name=(figures.task_name or "") if figures else "",
                rss_bytes=rss,
                node_used_bytes=figures.used_bytes if figures else None,
                threshold_bytes=figures.threshold_bytes if figures else None,
                limit_bytes=figures.limit_bytes if figures else None,
                message=message,
            )
        )
    kills.sort(key=lambda k: -(k.time or 0.0))
    return kills


async def memory_report(
    client: DashboardClient,
    *,
    job: str = "",
    rules: RoleRules = DEFAULT_RULES,
    top_nodes: int = TOP_NODES,
    kernel_log: Callable[[], tuple[str | None, str]] | None = None,
) -> MemoryReport:
    """The whole report: the nodes (one summary), the fullest nodes' processes (one request each), the
    kills (two worker-table reads), the actors that name them (one read), and the thresholds the
    fullest nodes' raylets logged. KERNEL_LOG reads the nodes' kernel log where it can be read (a local
    cluster: this machine's)."""
    nodes = await client.nodes(fresh=True)  # without the nodes there is no report: its error is the answer
    warnings: list[str] = []

    async def listed(what: str, ask: Awaitable[Listing[T]]) -> tuple[T, ...]:
        """A list the report can do without: its failure is a warning, not the end of the report."""
        try:
            listing = await ask
        except CockpitError as exc:
            warnings.append(f"{what} could not be read ({exc})")
            return ()
        warnings.extend(listing.warnings)
        return listing.rows

    oom_workers, crashed, actors = await asyncio.gather(
        listed(
            "the workers the memory monitor killed",
            client.workers(filters=[("exit_type", "=", "NODE_OUT_OF_MEMORY")], limit=KILL_ROWS),
        ),
        listed(
            "the workers that died by a signal or a crash",
            client.workers(filters=[("exit_type", "=", "SYSTEM_ERROR")], limit=KILL_ROWS),
        ),
        listed("the actors", client.actors(limit=10_000)),
    )
    kernel_text, kernel_where = kernel_log() if kernel_log else (None, NO_KERNEL_LOG)
    kernel = kernel_kills(kernel_text) if kernel_text is not None else None
    kills = oom_kills([*oom_workers, *crashed], actors, rules, kernel, job)

    watch = MemoryWatch()
    for kill in kills:  # the thresholds Ray named when it killed
        if kill.threshold_bytes and kill.limit_bytes:
            fraction = kill.threshold_bytes / kill.limit_bytes
            watch.set_threshold(
                kill.node_id, Threshold(float(kill.threshold_bytes), fraction, "OOM kill", kill.ip)
            )
    watch.update(nodes)
    fullest = sorted(
        (n for n in watch.nodes if n.alive and n.used_bytes is not NA and n.threshold is not None),
        key=lambda n: -float(n.used_bytes) / n.threshold.bytes if n.threshold else 0.0,  # type: ignore[arg-type]
    )[:top_nodes]
    by_id = {n.node_id: n for n in nodes}
    read = [by_id[n.node_id] for n in fullest if not watch.known_threshold(n.node_id)]
    gate = asyncio.Semaphore(AT_ONCE)

    async def gated(work: Awaitable[T]) -> T:
        async with gate:
            return await work

    logged = await asyncio.gather(*(gated(read_threshold(client, n)) for n in read))
    assumed = False
    for snapshot, threshold in zip(read, logged, strict=True):
        if threshold is not None:  # the first one read stands for the nodes not read (one environment)
            watch.set_threshold(snapshot.node_id, threshold, cluster_wide=not assumed)
            assumed = True
    memory = watch.update(nodes)
    alive_actors = by_node_and_pid(actors)
    if job:
        alive_actors = {k: a for k, a in alive_actors.items() if a.job_id == job}
    answers = await asyncio.gather(
        *(gated(biggest_processes(client, by_id[n.node_id], alive_actors, rules)) for n in fullest),
        return_exceptions=True,
    )
    processes: list[ProcessMemory] = []
    for full, answer in zip(fullest, answers, strict=True):
        if isinstance(answer, CockpitError):
            warnings.append(f"{full.hostname or full.ip}: its processes could not be read ({answer})")
        elif isinstance(answer, BaseException):
            raise answer
        else:
            processes.extend(p for p in answer if not job or p.job_id == job or not p.actor_id)
    return MemoryReport(
        time=time.time(),
        nodes=memory,
        processes=tuple(processes),
        kills=tuple(kills),
        kernel_log=kernel_where,
        warnings=tuple(warnings),
    )


def by_node_and_pid(actors: Sequence[ActorRow]) -> dict[tuple[str, int], ActorRow]:
    """Alive actors by (node id, pid): what names a process."""
    return {(a.node_id, a.pid): a for a in actors if a.pid and a.state != "DEAD"}
