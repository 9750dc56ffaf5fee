"""Provides the discovery of workers paused in the post-mortem debugger, and their grouping.

A worker that raises with `RAY_DEBUG_POST_MORTEM=1` pauses in debugpy and counts one paused thread in
the GCS worker table. One filtered request finds them all (`num_paused_threads != 0`; `debugger_port`
stays set for the worker's lifetime, so it says nothing). Each newly seen worker costs one more request,
for the task it runs (its name, actor and job). That is all the dashboard knows: the exception is not in
any log before a debugger attaches (Ray logs only "Ray debugger is listening on ..."), so it is filled in
by a peek (`debug_session.peek`), which attaches, reads it and pauses the worker again.

Workers crashing with the same error (64 rollout workers on one bad batch) are grouped: same exception
type, same raising place, same message once numbers are masked.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from cockpit.core.snapshots import TaskRow, WorkerRow
from cockpit.core.units import duration

if TYPE_CHECKING:
    from cockpit.core.cluster.dashboard import DashboardClient

MAX_PAUSED = 1000
"""The list limit of the paused-worker request; more than that is said, never hidden."""
LOOKUP_CONCURRENCY = 4
"""Task lookups in flight at once for newly paused workers (bounded load on the head)."""

RETRY_PEEK_SECONDS = 30.0
_NUMBER = re.compile(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?")


@dataclass(frozen=True, slots=True)
class ExceptionSummary:
    """What a paused worker raised: from a debugger peek (debugpy) or the pdb banner (legacy)."""

    type_name: str
    message: str
    where: str = ""
    """The raising frame, `file.py:42 in generate` (file name only)."""
    traceback: str = ""

    def one_line(self) -> str:
        text = f"{self.type_name}: {self.message}" if self.message else self.type_name
        return " ".join(text.split())

    def group_key(self) -> tuple[str, str, str]:
        """Identical for the same error raised at the same place, whatever rank or step it names."""
        return (self.type_name, self.where, _NUMBER.sub("N", " ".join(self.message.split())))


@dataclass(frozen=True, slots=True)
class PausedWorker:
    """A worker stopped in a post-mortem debugger, waiting for a client."""

    mode: str
    """`debugpy` (Ray's default debugger) or `legacy` (`RAY_DEBUG=legacy`, a pdb console)."""
    worker_id: str
    node_id: str
    ip: str
    pid: int | None
    port: int
    """debugpy: the adapter's port on the node IP. legacy: the pdb socket's port on the node's 127.0.0.1
    (or its IP with `--ray-debugger-external`)."""
    host: str = ""
    """Where the port listens, as the node sees it (legacy: `localhost` unless external)."""
    job_id: str = ""
    task_id: str = ""
    task_name: str = ""
    """`RolloutWorker.generate` for an actor method, the function name for a task."""
    actor_id: str = ""
    since: float | None = None
    """When the cockpit first saw it paused (posix seconds)."""
    exception: ExceptionSummary | None = None
    note: str = ""
    """Why the exception is not known (peek failed, another client holds it ...)."""
    note_at: float = 0.0
    """When the note was written: a failed peek is tried again after `RETRY_PEEK_SECONDS`."""

    @property
    def key(self) -> str:
        return self.worker_id if self.mode == "debugpy" else f"legacy:{self.ip}:{self.port}"

    @property
    def address(self) -> str:
        return f"{self.host or self.ip}:{self.port}"

    def label(self) -> str:
        """Actor method or task, then pid: `RolloutWorker.generate pid 13902`."""
        name = self.task_name or "task"
        return f"{name} pid {self.pid}" if self.pid is not None else name

    def as_dict(self) -> dict[str, object]:
        exc = self.exception
        return {
            "mode": self.mode,
            "worker_id": self.worker_id,
            "node_id": self.node_id,
            "ip": self.ip,
            "pid": self.pid,
            "port": self.port,
            "address": self.address,
            "job_id": self.job_id,
            "task_id": self.task_id,
            "task_name": self.task_name,
            "actor_id": self.actor_id or None,
            "first_seen": self.since,
            "exception": None
            if exc is None
            else {"type": exc.type_name, "message": exc.message, "where": exc.where},
            "note": self.note or None,
        }


@dataclass(frozen=True, slots=True)
class PausedGroup:
    """Paused workers that raised the same error; `exception` is the first member's."""

    exception: ExceptionSummary | None
    members: tuple[PausedWorker, ...]

    @property
    def first(self) -> PausedWorker:
        return self.members[0]


def group_paused(workers: Iterable[PausedWorker]) -> tuple[PausedGroup, ...]:
    """Groups by identical exception (see `ExceptionSummary.group_key`), oldest pause first in each group
    and groups by their oldest member. A worker whose exception is not known yet is a group of its own,
    unless it shares the task and job of others not known either (a burst of pauses before any peek)."""
    groups: dict[tuple[str, ...], list[PausedWorker]] = {}
    for worker in workers:
        if worker.exception is not None:
            key: tuple[str, ...] = ("exc", worker.mode, *worker.exception.group_key())
        else:
            key = ("task", worker.mode, worker.job_id, worker.task_name or worker.key)
        groups.setdefault(key, []).append(worker)

    def since(w: PausedWorker) -> float:
        return w.since if w.since is not None else 0.0

    built = []
    for members in groups.values():
        members.sort(key=lambda w: (since(w), w.ip, w.pid or 0))
        known = next((m.exception for m in members if m.exception is not None), None)
        built.append(PausedGroup(exception=known, members=tuple(members)))
    built.sort(key=lambda g: since(g.first))
    return tuple(built)


@dataclass
class PausedCache:
    """What was learnt about each paused worker, kept between polls so a poll costs one request.

    Keyed by `PausedWorker.key`; an entry is dropped as soon as its worker is no longer paused.
    """

    known: dict[str, PausedWorker] = field(default_factory=dict)
    missed: dict[str, int] = field(default_factory=dict)

    def forget_missing(self, keys: Iterable[str], mode: str = "debugpy") -> None:
        """Forget the workers of MODE not in KEYS for two polls in a row: a peek unpauses a worker for a
        moment, and it must not come back as "new" (a second bell) right after."""
        keep = set(keys)
        for key in [k for k, w in self.known.items() if w.mode == mode and k not in keep]:
            self.missed[key] = self.missed.get(key, 0) + 1
            if self.missed[key] >= 2:
                del self.known[key]
                del self.missed[key]
        for key in keep:
            self.missed.pop(key, None)

    def learn(self, worker: PausedWorker) -> None:
        self.known[worker.key] = worker


@dataclass(frozen=True, slots=True)
class PausedListing:
    workers: tuple[PausedWorker, ...]
    total_paused: int
    """How many the head counts (more than `len(workers)` only past MAX_PAUSED)."""
    fetched_at: float
    new: tuple[str, ...] = ()
    """Keys first seen in this poll (the UI rings the bell for them)."""


def _from_row(row: WorkerRow, task: TaskRow | None, now: float) -> PausedWorker:
    return PausedWorker(
        mode="debugpy",
        worker_id=row.worker_id,
        node_id=row.node_id,
        ip=row.ip,
        pid=row.pid,
        port=row.debugger_port or 0,
        host=row.ip,
        job_id=task.job_id if task else "",
        task_id=task.task_id if task else "",
        task_name=task.name if task else "",
        actor_id=task.actor_id if task else "",
        since=now,
    )


UNFINISHED = ("RUNNING", "SUBMITTED_TO_WORKER", "PENDING_ARGS_AVAIL", "PENDING_NODE_ASSIGNMENT")
"""A paused task's state, best first: RUNNING on Ray 2.60; Ray 2.44 leaves it at SUBMITTED_TO_WORKER."""


def unfinished_task(rows: Iterable[TaskRow]) -> TaskRow | None:
    """The task a worker is in: the most advanced of its tasks that is not over."""
    ranked = [(UNFINISHED.index(r.state), r) for r in rows if r.state in UNFINISHED]
    return min(ranked, key=lambda pair: pair[0])[1] if ranked else None


async def running_task_of(client: DashboardClient, worker_id: str) -> TaskRow | None:
    """The task a worker is running (paused in), or None when the head does not know one."""
    listing = await client.tasks(
        filters=[("worker_id", "=", worker_id), ("state", "!=", "FINISHED")], limit=100
    )
    return unfinished_task(listing.rows)


async def find_paused(client: DashboardClient, cache: PausedCache | None = None) -> PausedListing:
    """The workers paused in debugpy now: one filtered request, plus one task lookup per new worker.

    Raises:
        DashboardError: the head cannot be asked.
    """
    cache = cache if cache is not None else PausedCache()
    listing = await client.workers(filters=[("num_paused_threads", "!=", "0")], limit=MAX_PAUSED)
    rows = [r for r in listing.rows if r.is_alive and r.num_paused_threads > 0 and r.debugger_port]
    now = time.time()
    # New workers, and those whose task the head did not report yet (its task events come in batches).
    fresh = [r for r in rows if r.worker_id not in cache.known or not cache.known[r.worker_id].task_id]
    limit = asyncio.Semaphore(LOOKUP_CONCURRENCY)

    async def lookup(row: WorkerRow) -> PausedWorker:
        async with limit:
            task = await running_task_of(client, row.worker_id)
        return _from_row(row, task, now)

    for worker in await asyncio.gather(*(lookup(r) for r in fresh)):
        before = cache.known.get(worker.worker_id)
        if before is not None:  # keep what was learnt (since, exception); take the task now reported
            worker = replace(
                before,
                job_id=worker.job_id,
                task_id=worker.task_id,
                task_name=worker.task_name,
                actor_id=worker.actor_id,
            )
        cache.learn(worker)
    cache.forget_missing(r.worker_id for r in rows)
    workers = []
    for row in rows:
        known = cache.known[row.worker_id]
        if known.port != row.debugger_port:  # the same worker, a new adapter: keep what was learnt
            known = replace(known, port=row.debugger_port or 0, host=row.ip)
            cache.learn(known)
        workers.append(known)
    total = max(listing.meta.num_filtered, len(workers))
    return PausedListing(
        workers=tuple(workers),
        total_paused=total,
        fetched_at=now,
        new=tuple(r.worker_id for r in fresh),
    )


def frame_where(path: str, line: int, function: str) -> str:
    """`trainer.py:42 in generate` from a frame (the file name only: node paths are long)."""
    name = path.replace("\\", "/").rsplit("/", 1)[-1] or path
    return f"{name}:{line} in {function}" if function else f"{name}:{line}"


def user_frame(frames: Sequence[tuple[str, int, str]]) -> tuple[str, int, str] | None:
    """The raising frame that is the user's: the first not inside Ray's or debugpy's own code."""
    for path, line, function in frames:
        if not _is_ray_internal(path, function):
            return path, line, function
    return frames[0] if frames else None


def _is_ray_internal(path: str, function: str) -> bool:
    p = path.replace("\\", "/")
    return (
        "/ray/_private/" in p
        or "/ray/util/tracing/" in p
        or "/ray/util/debugpy" in p
        or "/ray/util/rpdb" in p
        or p.endswith(".pyx")
        or "/debugpy/" in p
        or "/pydevd" in p
        or function.startswith("ray._raylet.")
    )


def describe_age(since: float | None, now: float | None = None) -> str:
    """`42s`, `3m05s`, `2h10m`: how long a worker has been paused (`?` when not known)."""
    if since is None:
        return "?"
    return duration((now if now is not None else time.time()) - since)
