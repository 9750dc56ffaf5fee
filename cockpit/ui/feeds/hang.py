"""Provides the hang watch: is each running job making progress, wherever the user is in the cockpit.

For each running job (the newest `MAX_JOBS`), one followed stream of its driver log (one of the
dashboard's concurrent requests, held while the job runs), and every `TICK_SECONDS` the GPU readings the
cockpit already has (the dashboard's, or the high-resolution agents'). What counts as progress and how
long a silence is a hang come from the job's profile (`progress:`, `hang_after:`; the job's metadata
names its profile), else any driver-log line or GPU activity, and 10 minutes (`cockpit.core.doctor.hang`).

A job seen hung for the first time rings the bell and raises a banner; the status bar says so on every
screen until progress comes back, and `S` takes the job's stacks.
"""

from __future__ import annotations

import asyncio
import functools
import time
from typing import TYPE_CHECKING

from cockpit.core.doctor.hang import ProgressWatch, hang_policy
from cockpit.core.doctor.progress import (
    NODES_EVERY,
    describe_policy,
    follow_driver,
    gpu_readings,
    job_nodes,
    job_policy,
)
from cockpit.core.errors import CockpitError
from cockpit.core.snapshots import NA
from cockpit.ui.feeds import ConnectedFeed, start_worker
from cockpit.ui.state import CockpitState, JobWatch, StateChanged

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Collection, Mapping

    from textual.app import App
    from textual.timer import Timer
    from textual.worker import Worker

    from cockpit.core.cluster.dashboard import DashboardClient
    from cockpit.core.connect.connection import Connection
    from cockpit.core.snapshots import JobRow

TICK_SECONDS = 5.0
MAX_JOBS = 4
"""Jobs followed at once: each holds one log stream on the dashboard."""


def role_readings(state: CockpitState, only: Collection[str]) -> Mapping[str, list[float | None]]:
    """Utilization per role on the nodes in ONLY (the job's), where the GPU fleet knows which actor is on
    which GPU."""
    fleet = state.gpu_fleet
    if fleet is None:
        return {}
    by_role: dict[str, list[float | None]] = {}
    for row in fleet.rows:
        gpu = row.gpu
        if gpu is None or not row.node.alive or row.node.node_id not in only:
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
    """One job's watch, the nodes it runs on, and the worker following its driver log."""

    def __init__(self, job: JobRow, watch: ProgressWatch) -> None:
        self.job = job
        self.watch = watch
        self.nodes: frozenset[str] = frozenset()
        self.nodes_at = 0.0
        self.worker: Worker[None] | None = None
        self.announced = False


class HangFeed(ConnectedFeed):
    def __init__(
        self, app: App[int], state: CockpitState, connection: Callable[[], Awaitable[Connection]]
    ) -> None:
        super().__init__(app, state, connection)
        self._timer: Timer | None = None
        self._followed: dict[str, _Followed] = {}
        self._blind_since: float | None = None
        """When the cockpit stopped seeing the cluster (None: it sees it): that time is not silence."""
        self._nodes_busy = False

    def start(self) -> None:
        if self._timer is None:
            self._timer = self.app.set_interval(
                self.state.config.refresh.hang_check, self.tick, name="hang-watch"
            )

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
        now = time.monotonic()
        if snapshot is None or state.connection.phase != "connected":
            # Blind: no verdict from stale data; the time blind is excused when the cluster is back.
            if self._blind_since is None:
                self._blind_since = now
            return
        if self._blind_since is not None:
            for followed in self._followed.values():
                followed.watch.excuse(now - self._blind_since, now)
            self._blind_since = None
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
        if not self._nodes_busy and any(now - f.nodes_at >= NODES_EVERY for f in self._followed.values()):
            self._nodes_busy = True
            start_worker(self.app, self._refresh_nodes, group="hang-nodes", description="Where the jobs run")
        newly_hung: list[JobWatch] = []
        for key, followed in self._followed.items():
            gpus = gpu_readings(snapshot.nodes, followed.nodes)
            if gpus:
                followed.watch.feed_gpus(gpus, now)
            roles = role_readings(state, followed.nodes)
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
            self.alarm(f"⚠ {entry.job.key}: {entry.line} (S: stacks)", title="Hang?")
        if changed or state.needs("jobs"):
            self.app.post_message(StateChanged("hang", "doctor"))

    async def _refresh_nodes(self) -> None:
        """Where each followed job runs (its actors' and driver's nodes): its GPUs are the ones judged."""
        try:
            connection = await self.connection()
            for followed in list(self._followed.values()):
                if time.monotonic() - followed.nodes_at < NODES_EVERY:
                    continue
                try:
                    followed.nodes = await job_nodes(connection.client, followed.job)
                except CockpitError:
                    continue  # the next tick tries again
                followed.nodes_at = time.monotonic()
        except CockpitError:
            return
        finally:
            self._nodes_busy = False

    def _follow(self, job: JobRow) -> None:
        policy = hang_policy(None, default=self.state.config.hang_after)
        followed = _Followed(job, ProgressWatch(policy, time.monotonic()))
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
        """The job's policy (its profile, read off the UI thread), then its driver log, followed again
        after a break (without counting the line seen before it as progress)."""
        job = followed.job
        config = self.state.config
        policy, problem = await asyncio.to_thread(
            functools.partial(job_policy, profile_dirs=config.profile_dirs, hang_after=config.hang_after), job
        )
        followed.watch = ProgressWatch(policy, time.monotonic())
        entry = self.state.doctor.watches.get(job.key)
        if entry is not None:
            entry.hang_after, entry.watching, entry.error = (
                policy.hang_after,
                describe_policy(policy),
                problem,
            )

        async def client() -> DashboardClient:
            return (await self.connection()).client

        def broke(reason: str) -> None:
            if entry is not None and (not reason or self.state.connection.phase == "connected"):
                entry.error = reason and f"cannot follow the driver log: {reason}"

        await follow_driver(client, job, followed.watch, on_break=broke, pause=10.0)
