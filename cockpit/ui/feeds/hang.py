"""Provides the hang watch in the TUI: is each running job making progress, wherever the user is.

For each running job (the newest `MAX_JOBS`, `cockpit.core.snapshots.running_jobs`: the first is the one
the driver-log pane and the training curves follow), a `HangWatch`, the one `cockpit watch` uses, fed
with the job's driver log from the shared driver-log feed (one stream per job, whoever reads it), where
the job runs (its nodes and its actors' roles, looked up every minute) and, every tick, the GPU readings
of the last poll. What counts as progress and how long a silence is a hang come from the job's profile
(`progress:`, `hang_after:`; the job's metadata names its profile), else any driver-log line or GPU
activity, and 10 minutes (`cockpit.core.doctor.hang`).

A job seen hung for the first time rings the bell and raises a banner; the status bar says so on every
screen until progress comes back, and `S` takes the job's stacks.
"""

from __future__ import annotations

import asyncio
import functools
import time
from typing import TYPE_CHECKING

from cockpit.core.doctor.hang import hang_policy
from cockpit.core.doctor.progress import describe_policy, job_place, job_policy
from cockpit.core.doctor.watch import HangWatch
from cockpit.core.errors import CockpitError
from cockpit.core.snapshots import running_jobs
from cockpit.ui.feeds import ConnectedFeed, start_worker
from cockpit.ui.state import CockpitState, JobWatch, StateChanged

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from textual.app import App
    from textual.timer import Timer
    from textual.worker import Worker

    from cockpit.core.connect.connection import Connection
    from cockpit.core.snapshots import JobRow
    from cockpit.ui.feeds.driver_logs import DriverLogs, LogReader

MAX_JOBS = 4
"""Jobs watched at once: each holds one log stream on the dashboard (shared with whatever shows it)."""


class _Followed:
    """One job: its watch (once its policy is read) and its place among the driver log's readers."""

    def __init__(self, job: JobRow) -> None:
        self.job = job
        self.watch: HangWatch | None = None
        self.reader: LogReader | None = None
        self.worker: Worker[None] | None = None
        self.problem = ""
        """Why the job's profile could not be read (the default policy is used)."""
        self.announced = False


class HangFeed(ConnectedFeed):
    def __init__(
        self,
        app: App[int],
        state: CockpitState,
        connection: Callable[[], Awaitable[Connection]],
        logs: DriverLogs,
    ) -> None:
        super().__init__(app, state, connection)
        self.logs = logs
        self._timer: Timer | None = None
        self._followed: dict[str, _Followed] = {}
        self._places_busy = False

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
            self._drop(followed)
        self._followed.clear()

    def watched(self) -> list[JobRow]:
        """The jobs watched now, newest first."""
        return [f.job for f in self._followed.values()]

    def watch_of(self, job_key: str) -> HangWatch | None:
        """JOB_KEY's watch (None before its policy is read, or when it is not watched)."""
        followed = self._followed.get(job_key)
        return followed.watch if followed is not None else None

    def tick(self) -> None:
        """Follow new running jobs, drop ended ones, look at the GPUs, and judge each job."""
        state = self.state
        snapshot = state.snapshot
        now = time.monotonic()
        if snapshot is None or state.connection.phase != "connected":
            # Blind: no verdict from stale data; the time blind is excused when the cluster is back.
            for followed in self._followed.values():
                if followed.watch is not None:
                    followed.watch.blind(now)
            return
        running = running_jobs(snapshot.jobs)[:MAX_JOBS]
        keys = {j.key for j in running}
        changed = False
        for key in list(self._followed):
            if key not in keys:
                self._drop(self._followed.pop(key))
                state.doctor.watches.pop(key, None)
                changed = True
        for job in running:
            if job.key not in self._followed:
                self._follow(job)
                changed = True
        self._followed = {j.key: self._followed[j.key] for j in running}  # newest first
        due = [f for f in self._followed.values() if f.watch is not None and f.watch.needs_place(now)]
        if due and not self._places_busy:
            self._places_busy = True
            start_worker(
                self.app, self._refresh_places, group="hang-places", description="Where the jobs run"
            )
        newly_hung: list[JobWatch] = []
        for key, followed in self._followed.items():
            entry = state.doctor.watches.get(key)
            if followed.watch is None or entry is None:
                continue
            verdict = followed.watch.check(snapshot.nodes, now)
            trouble = followed.reader.trouble if followed.reader is not None else ""
            before = (entry.hung, entry.line, entry.straggler, entry.last_progress, entry.error)
            entry.hung, entry.line, entry.straggler = verdict.hung, verdict.line, verdict.straggler
            entry.last_progress, entry.last_progress_age = verdict.last_progress, verdict.last_progress_age
            entry.error = f"cannot follow the driver log: {trouble}" if trouble else followed.problem
            if verdict.hung and not followed.announced:
                followed.announced = True
                newly_hung.append(entry)
            elif not verdict.hung:
                followed.announced = False
            after = (entry.hung, entry.line, entry.straggler, entry.last_progress, entry.error)
            changed = changed or before != after
        for entry in newly_hung:
            self.alarm(f"⚠ {entry.job.key}: {entry.line} (S: stacks)", title="Hang?")
        if changed or state.needs("jobs"):
            self.app.post_message(StateChanged("hang", "doctor"))

    async def _refresh_places(self) -> None:
        """Where each watched job runs (its actors' and driver's nodes, its actors' roles): its GPUs are
        the ones judged, and its roles' GPUs the ones compared for a straggler."""
        try:
            connection = await self.connection()
            rules = self.state.gpu_board.rules
            for followed in list(self._followed.values()):
                watch = followed.watch
                if watch is None or not watch.needs_place(time.monotonic()):
                    continue
                try:
                    watch.placed(await job_place(connection.client, followed.job, rules), time.monotonic())
                except CockpitError:
                    continue  # the next tick tries again
        except CockpitError:
            return
        finally:
            self._places_busy = False

    def _follow(self, job: JobRow) -> None:
        followed = self._followed[job.key] = _Followed(job)
        policy = hang_policy(None, default=self.state.config.hang_after)
        self.state.doctor.watches[job.key] = JobWatch(
            job=job, hang_after=policy.hang_after, watching=describe_policy(policy)
        )
        followed.worker = start_worker(
            self.app,
            functools.partial(self._start, followed),
            group=f"hang-{job.key}",
            description=f"Watching {job.key} for progress",
        )

    def _drop(self, followed: _Followed) -> None:
        if followed.worker is not None:
            followed.worker.cancel()
        if followed.reader is not None:
            followed.reader.leave()
            followed.reader = None

    async def _start(self, followed: _Followed) -> None:
        """The job's policy (its profile, read off the UI thread), then its watch, fed its driver log
        from the shared feed (its last line first: the line before the watch started is progress)."""
        job = followed.job
        config = self.state.config
        policy, problem = await asyncio.to_thread(
            functools.partial(job_policy, profile_dirs=config.profile_dirs, hang_after=config.hang_after), job
        )
        if self._followed.get(job.key) is not followed:
            return  # dropped meanwhile
        watch = followed.watch = HangWatch(job, policy, time.monotonic())
        followed.problem = problem
        entry = self.state.doctor.watches.get(job.key)
        if entry is not None:
            entry.hang_after, entry.watching, entry.error = (
                policy.hang_after,
                describe_policy(policy),
                problem,
            )

        def took(chunk: bytes, _history: bool) -> None:
            watch.feed_log(chunk, time.monotonic())

        followed.reader = self.logs.join(job, took, lines=1)
