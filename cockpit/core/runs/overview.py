"""Provides the runs overview: every target a user has, each looked at once, lightly.

Where the targets come from (`gather_targets`, in this order, each once): the `local` cluster when one
is recorded, the user's Slurm jobs that hold a cockpit-started Ray cluster (`squeue --me`, the comment
`cockpit slurm up` writes), the Host entries the config names (`runs.hosts`), and the targets used
recently (`recent`). A look (`look`) asks a target for its jobs and its node table (the GCS's, about
1 KB a node: not the 16 MB summary of a large cluster) and the last lines of the newest running job's
driver log (its last step) within `timeout` seconds, and says in one row: its state, its nodes and
GPUs, the newest running job and its step, and what is wrong now that one look can see (a
dead node, a job failed in the last hour, the walltime running out; a hang needs a watch over time:
`cockpit alerts`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from cockpit.core.alerts.rules import Observation, Thresholds, findings
from cockpit.core.errors import CockpitError
from cockpit.core.snapshots import newest_running
from cockpit.core.text import clean

if TYPE_CHECKING:
    from cockpit.core.cluster.dashboard import DashboardClient
    from cockpit.core.connect.connection import ConnectOptions
    from cockpit.core.slurm.queue import SlurmJob
    from cockpit.core.snapshots import JobRow

RECENT_FAILURE_S = 3600.0
"""A job failed this recently is an alert of the overview (older failures are history)."""
LOOK_TIMEOUT = 10.0
STEP_TIMEOUT = 3.0
STEP_LINES = 50
"""Lines of the newest running job's driver log read for its last step."""
CONCURRENCY = 8


@dataclass(frozen=True)
class RunTarget:
    raw: str
    source: str
    """`local`, `slurm`, `config` or `recent`: why it is listed."""


@dataclass(frozen=True)
class RunRow:
    """One target as one look saw it."""

    target: str
    source: str
    state: str
    """`running` (a job runs), `idle` (reachable, no job runs), `queued`, `starting`, `ended`, or
    `unreachable`."""
    detail: str = ""
    """Why it is not reachable, Slurm's queue line, or what the newest job runs."""
    nodes_alive: int | None = None
    nodes_dead: int | None = None
    gpus: float | None = None
    job: str = ""
    """The newest running job ("" when none)."""
    job_age: float | None = None
    """Seconds the newest running job has run."""
    running_jobs: int = 0
    step: int | None = None
    """The newest running job's last step, from the last lines of its driver log (None: none printed)."""
    time_left: float | None = None
    """The Slurm job's walltime left (seconds)."""
    alerts: tuple[str, ...] = field(default=())
    """What is wrong now, one line each."""

    def as_json(self) -> dict[str, Any]:
        return asdict(self) | {"alerts": list(self.alerts)}


def gather_targets(
    local: bool, slurm_jobs: Iterable[SlurmJob], hosts: Iterable[str], recent: Iterable[str]
) -> list[RunTarget]:
    """Every target to list, each once, in the order of the module's docstring."""
    seen: dict[str, RunTarget] = {}
    candidates = [
        *([RunTarget("local", "local")] if local else []),
        *(RunTarget(f"slurm:{job.job_id}", "slurm") for job in slurm_jobs),
        *(RunTarget(host, "config") for host in hosts),
        *(RunTarget(raw, "recent") for raw in recent),
    ]
    for target in candidates:
        seen.setdefault(target.raw, target)
    return list(seen.values())


async def my_slurm_clusters() -> list[SlurmJob]:
    """The user's Slurm jobs that hold a Ray cluster `cockpit slurm up` started (none without Slurm)."""
    from cockpit.core.slurm import queue as slurm

    try:
        out = await slurm.run("squeue", "--me", "-h", "-o", "%i|%T|%k")
    except CockpitError:
        return []
    jobs = []
    for line in out.splitlines():
        job_id, _, rest = line.partition("|")
        state, _, comment = rest.partition("|")
        if job_id.strip().isdigit() and comment.startswith("cockpit:"):
            jobs.append(slurm.SlurmJob(job_id.strip(), state=state.strip(), comment=comment))
    return jobs


async def look(target: RunTarget, options: ConnectOptions, timeout: float = LOOK_TIMEOUT) -> RunRow:
    """TARGET as one look sees it within TIMEOUT seconds (never raises: a failure is its row)."""
    from cockpit.core.targets import parse_target

    try:
        parsed = parse_target(target.raw)
        return await asyncio.wait_for(_look(target, parsed, options), timeout)
    except asyncio.TimeoutError:
        return RunRow(target.raw, target.source, "unreachable", f"no answer within {timeout:.0f} s")
    except CockpitError as exc:
        return _failed(target, exc)
    except ValueError as exc:  # a target that does not parse (a stale entry of the recent list)
        return RunRow(target.raw, target.source, "unreachable", clean(str(exc)))


async def _look(target: RunTarget, parsed: Any, options: ConnectOptions) -> RunRow:
    from cockpit.core.connect.connection import open_connection

    async with open_connection(parsed, options) as connection:
        client = connection.client
        jobs, table = await asyncio.gather(client.jobs(), client.node_table())
        slurm_job = connection.slurm
        running = newest_running(jobs)
        step = None
        if running is not None:  # a driver log of gigabytes must not cost the row: its step is a bonus
            with contextlib.suppress(asyncio.TimeoutError):
                step = await asyncio.wait_for(_last_step(client, running), STEP_TIMEOUT)
    now = time.time()
    nodes = table.rows
    alive = [n for n in nodes if n.state == "ALIVE"]
    recent = [j for j in jobs if j.status != "FAILED" or (j.end_time or 0) >= now - RECENT_FAILURE_S]
    seen = Observation(jobs=recent, nodes=nodes, slurm=slurm_job, now=now)
    limits = Thresholds(off=frozenset({"job_succeeded"}))
    alerts = tuple(f.message for f in findings(seen, limits))
    return RunRow(
        target=target.raw,
        source=target.source,
        state="running" if running is not None else "idle",
        detail=clean(running.entrypoint)[:120] if running is not None else "",
        nodes_alive=len(alive),
        nodes_dead=len(nodes) - len(alive),
        gpus=sum(n.logical_gpus for n in alive),
        job=running.key if running is not None else "",
        job_age=now - running.start_time if running is not None and running.start_time else None,
        running_jobs=sum(1 for j in jobs if j.status == "RUNNING"),
        step=step,
        time_left=slurm_job.seconds_left(now) if slurm_job is not None else None,
        alerts=alerts,
    )


async def _last_step(client: DashboardClient, job: JobRow) -> int | None:
    """JOB's last step in the last `STEP_LINES` lines of its driver log (one small read), None when
    none is there or the log cannot be read."""
    from cockpit.core.logs.sources import LogSource, last_lines
    from cockpit.core.metrics.lines import MetricsParser
    from cockpit.core.metrics.series import SeriesStore

    parser, store = MetricsParser("auto"), SeriesStore(max_points=8, max_keys=64)
    try:
        async for chunk in last_lines(client, LogSource.driver(job), STEP_LINES):
            store.extend(parser.feed(chunk))
    except CockpitError:
        return None
    store.extend(parser.flush())
    return store.last_step


def _failed(target: RunTarget, exc: CockpitError) -> RunRow:
    from cockpit.core.slurm.queue import SlurmNotRunning

    if isinstance(exc, SlurmNotRunning):
        job = exc.job
        state = "queued" if job.waiting else ("ended" if job.ended or job.ending else "starting")
        return RunRow(target.raw, target.source, state, clean(job.describe()))
    text = str(exc).rstrip(".")
    if "its Ray head is starting" in text:
        return RunRow(target.raw, target.source, "starting", clean(text))
    return RunRow(target.raw, target.source, "unreachable", clean(text))


async def overview(
    targets: Sequence[RunTarget], options: ConnectOptions, timeout: float = LOOK_TIMEOUT
) -> list[RunRow]:
    """Each of TARGETS looked at, `CONCURRENCY` at a time, in their order."""
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(target: RunTarget) -> RunRow:
        async with gate:
            return await look(target, options, timeout)

    return list(await asyncio.gather(*(one(t) for t in targets)))
