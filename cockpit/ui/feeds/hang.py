"""Provides the hang watch: is each running job making progress, wherever the user is in the cockpit.

For each running job (the newest `MAX_JOBS`), one followed stream of its driver log (one of the
dashboard's concurrent requests, held while the job runs), and every `TICK_SECONDS` the GPU readings the
cockpit already has (the dashboard's, or the high-resolution agents'). What counts as progress and how
long a silence is a hang come from the job's profile (`progress:`, `hang_after:`; the job's metadata
names its profile), else any driver-log line or GPU activity, and 10 minutes (`cockpit.core.hang`).

A job seen hung for the first time rings the bell and raises a banner; the status bar says so on every
screen until progress comes back, and `S` takes the job's stacks.
"""

from __future__ import annotations

import asyncio
import functools
import time
from typing import TYPE_CHECKING

from cockpit.core.errors import CockpitError
from cockpit.core.hang import HangPolicy, ProgressWatch, hang_policy
from cockpit.core.progress import describe_policy, follow_driver, gpu_readings, job_policy
from cockpit.core.snapshots import NA
from cockpit.ui.feeds import start_worker
from cockpit.ui.state import CockpitState, JobWatch, StateChanged
from cockpit.ui.widgets.safe_text import clean

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from textual.app import App
    from textual.timer import Timer
    from textual.worker import Worker

    from cockpit.core.connection import Connection
    from cockpit.core.snapshots import JobRow

TICK_SECONDS = 5.0
MAX_JOBS = 4
"""Jobs followed at once: each holds one log stream on the dashboard."""


def role_readings(state: CockpitState) -> Mapping[str, list[float | None]]:
    """Utilization per role, from the GPU fleet where it knows which actor is on which GPU."""
    fleet = state.gpu_fleet
    if fleet is None:
        return {}
    by_role: dict[str, list[float | None]] = {}
    for row in fleet.rows:
        gpu = row.gpu
        if gpu is None or not row.node.alive:
            continue
        roles = set()
        for process in gpu.processes:
            actor = fleet.actors_by_pid.get((row.node.ip, process.pid))
            if actor is not None and actor.role:
                roles.add(actor.role)
        for role in roles:
            by_role.setdefault(role, []).append(None if gpu.utilization is NA else float(gpu.utilization))
    return by_role


class _Followed:
    """One job's watch and the worker following its driver log."""

    def __init__(self, job: JobRow, watch: ProgressWatch, policy: HangPolicy) -> None:
        self.job = job
        self.watch = watch
        self.policy = policy
        self.worker: Worker[None] | None = None
        self.announced = False


class HangFeed:
    def __init__(
        self, app: App[int], state: CockpitState, connection: Callable[[], Awaitable[Connection]]
    ) -> None:
        self.app = app
        self.state = state
        self.connection = connection
        self._timer: Timer | None = None
        self._followed: dict[str, _Followed] = {}

    def start(self) -> None:
        if self._timer is None:
            self._timer = self.app.set_interval(TICK_SECONDS, self.tick, name="hang-watch")

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        for followed in self._followed.values():
            if followed.worker is not None:
                followed.worker.cancel()
        self._followed.clear()

    def tick(self) -> None:
        """Follow new running jobs, drop ended ones, feed the GPU readings, and judge each job."""
        state = self.state
        snapshot = state.snapshot
        if snapshot is None:
            return
        running = sorted(
            (j for j in snapshot.jobs if j.status == "RUNNING" and j.submission_id and j.driver_node_id),
            key=lambda j: j.start_time or 0.0,
            reverse=True,
        )[:MAX_JOBS]
        keys = {j.key for j in running}
        changed = False
        for key in list(self._followed):
            if key not in keys:
                followed = self._followed.pop(key)
                if followed.worker is not None:
                    followed.worker.cancel()
                state.doctor.watches.pop(key, None)
                changed = True
        for job in running:
            if job.key not in self._followed:
                self._follow(job)
                changed = True
        now = time.monotonic()
        gpus = gpu_readings(snapshot.nodes)
        roles = role_readings(state)
        newly_hung: list[JobWatch] = []
        for key, followed in self._followed.items():
            if gpus:
                followed.watch.feed_gpus(gpus, now)
            if roles:
                followed.watch.feed_roles(roles, now)
            verdict = followed.watch.verdict(now)
            entry = state.doctor.watches.get(key)
            if entry is None:
                continue
            before = (entry.hung, entry.line, entry.straggler, entry.last_progress)
            entry.hung, entry.line, entry.straggler = verdict.hung, verdict.line, verdict.straggler
            entry.last_progress, entry.last_progress_age = verdict.last_progress, verdict.last_progress_age
            if verdict.hung and not followed.announced:
                followed.announced = True
                newly_hung.append(entry)
            elif not verdict.hung:
                followed.announced = False
            changed = changed or before != (entry.hung, entry.line, entry.straggler, entry.last_progress)
        for entry in newly_hung:
            self.app.bell()
            self.app.notify(
                clean(f"⚠ {entry.job.key}: {entry.line} (S: stacks)"),
                title="Hang?",
                severity="error",
                timeout=15,
                markup=False,
            )
        if changed or state.needs("jobs"):
            self.app.post_message(StateChanged("hang", "doctor"))

    def _follow(self, job: JobRow) -> None:
        policy = hang_policy(None)
        followed = _Followed(job, ProgressWatch(policy, time.monotonic()), policy)
        self._followed[job.key] = followed
        self.state.doctor.watches[job.key] = JobWatch(
            job=job, hang_after=policy.hang_after, watching=describe_policy(policy)
        )
        followed.worker = start_worker(
            self.app,
            functools.partial(self._read, followed),
            group=f"hang-{job.key}",
            description=f"Following {job.key} for progress",
            exclusive=True,
        )

    async def _read(self, followed: _Followed) -> None:
        """The job's policy (its profile, read off the UI thread), then its driver log, followed."""
        job = followed.job
        policy, problem = await asyncio.to_thread(job_policy, job)
        followed.policy = policy
        followed.watch = ProgressWatch(policy, time.monotonic())
        entry = self.state.doctor.watches.get(job.key)
        if entry is not None:
            entry.hang_after, entry.watching, entry.error = (
                policy.hang_after,
                describe_policy(policy),
                problem,
            )
        while True:
            try:
                connection = await self.connection()
                await follow_driver(connection.client, job, followed.watch)
                if entry is not None:
                    entry.error = ""
            except asyncio.CancelledError:
                raise
            except CockpitError as exc:
                if entry is not None:
                    entry.error = f"cannot follow the driver log: {exc}"
            await asyncio.sleep(10.0)
