"""Provides `TargetWatch`: one target (`local`, a head over SSH, `http://`, `slurm:JOB`) watched headless
for `cockpit alerts`, its findings turned into alerts by its own `AlertBook`.

Every `interval` seconds it lists the jobs (one small request); every `nodes_every` seconds the nodes
(the summary, which grows with the cluster: 16 MB at 2,000 nodes, so not every look); every
`pending_every` seconds what is pending (a few GCS reads) and the workers Ray's memory monitor killed
(one filtered read of the worker table). Each running job (the newest `max_jobs`)
gets the hang watch `cockpit watch` and the TUI use (`HangWatch`, its policy from the job's profile)
and a metrics parser, fed by one stream of its driver log; when the job ends, the rest of its log is
read to its end (a NaN printed just before the exit is not missed), and a job that began and ended
between two looks has the last `ENDED_LINES` lines of its log read once. A `slurm:` target's job is
looked up every `interval` while it waits or starts, every `SLURM_EVERY` seconds while its cluster runs
(walltime, its end), and its cluster watched while it runs.

A target that cannot be reached is tried again (5 s, doubling to a minute): a cluster not started yet,
a head restarted, a dropped SSH link all mend by themselves, and `unreachable` says so once it lasted.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from cockpit.core.alerts.book import DEFAULT_REMIND_EVERY, Alert, AlertBook
from cockpit.core.alerts.rules import Observation, Thresholds, findings, looked_at
from cockpit.core.doctor.hang import DEFAULT_HANG_AFTER, HangPolicy
from cockpit.core.doctor.progress import job_metrics_format, job_place, job_policy
from cockpit.core.doctor.watch import HangWatch
from cockpit.core.errors import CockpitError
from cockpit.core.snapshots import running_jobs

if TYPE_CHECKING:
    from cockpit.core.actors.pending import PendingReport
    from cockpit.core.actors.roles import RoleRules
    from cockpit.core.cluster.dashboard import DashboardClient
    from cockpit.core.connect.connection import Connection, ConnectOptions
    from cockpit.core.logs.sources import LogTail
    from cockpit.core.memory.report import OomKill
    from cockpit.core.metrics.lines import MetricsParser
    from cockpit.core.metrics.series import NonFinite, SeriesStore
    from cockpit.core.slurm.queue import SlurmJob
    from cockpit.core.snapshots import JobRow, NodeSnapshot
    from cockpit.core.targets import Target

ENDED_LINES = 2000
"""Lines of a job's log read once when it began and ended between two looks."""
SLURM_EVERY = 60.0
OOM_ROWS = 200
"""Workers killed for memory read per look (the newest are what is new)."""
RETRY_FIRST, RETRY_MOST = 5.0, 60.0
MAX_POINTS, MAX_KEYS = 64, 256
"""What the metrics parser keeps per job: only the NaN alarm is wanted (counted over every value)."""


@dataclass(frozen=True)
class WatchSettings:
    interval: float = 10.0
    nodes_every: float = 30.0
    pending_every: float = 60.0
    max_jobs: int = 8
    remind_every: float = DEFAULT_REMIND_EVERY
    thresholds: Thresholds = field(default_factory=Thresholds)
    hang_after: float = DEFAULT_HANG_AFTER
    """The hang default of jobs whose profile says none (the config's `hang_after`)."""
    hang_override: float | None = None
    """`--hang-after`: wins over every profile."""
    profile_dirs: tuple[Path, ...] = ()
    roles: RoleRules | None = None


class _Followed:
    """One running job: its hang watch and its metrics, fed by one stream of its driver log."""

    def __init__(self, job: JobRow, policy: HangPolicy, parser: MetricsParser, store: SeriesStore) -> None:
        self.job = job
        self.watch = HangWatch(job, policy, time.monotonic())
        self.parser = parser
        self.store = store
        self.tail: LogTail | None = None
        self.task: asyncio.Task[None] | None = None

    def feed(self, chunk: bytes) -> None:
        self.watch.feed_log(chunk, time.monotonic())
        self.store.extend(self.parser.feed(chunk))


class TargetWatch:
    """One target watched for alerts (see the module's docstring); EMIT hears each alert, SAY one line
    about the watch itself (reached, lost, a problem with a job's profile)."""

    def __init__(
        self,
        target: Target,
        options: ConnectOptions,
        settings: WatchSettings,
        emit: Callable[[Alert], None],
        say: Callable[[str], None],
    ) -> None:
        self.target = target
        self.options = options
        self.settings = settings
        self.emit = emit
        self.say = say
        self.book = AlertBook(str(target), settings.remind_every)
        self.state = "connecting"
        """One word or line for `cockpit runs`: connecting, watching, queued, ended, or why not reachable."""
        self._followed: dict[str, _Followed] = {}
        self._known_ended: set[str] = set()
        self._nonfinite: dict[str, tuple[NonFinite, ...]] = {}
        """Job key -> its metrics gone NaN: the followed jobs' and, for one look, those that just ended."""
        self._nodes: tuple[NodeSnapshot, ...] | None = None
        self._nodes_at = 0.0
        self._pending: PendingReport | None = None
        self._pending_at = 0.0
        self._kills: tuple[OomKill, ...] | None = None
        self._slurm: SlurmJob | None = None
        self._slurm_at = 0.0
        self._first_jobs = True
        self._reason = ""
        """The last reason the cluster could not be seen, as said ("" while it is seen)."""
        self._delay = RETRY_FIRST
        self._kill_baseline: set[str] | None = None
        """The OOM-killed workers listed at the first read of the worker table: over before the watch."""
        self._told_profile: set[str] = set()
        """Jobs whose profile could not be read, said once (a job is started again when it ends)."""

    # -- the loop ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Watch until cancelled (or until a `slurm:` target's job has ended and been told)."""
        from cockpit.core.connect.connection import open_connection

        self._delay = RETRY_FIRST
        try:
            while True:
                try:
                    if self.target.kind == "slurm" and not await self._slurm_running():
                        if self._slurm is not None and self._slurm.ended:
                            return
                        await asyncio.sleep(self.settings.interval)  # one squeue-sized look
                        continue
                    try:
                        async with open_connection(self.target, self.options) as connection:
                            await self._watch(connection)
                    finally:
                        self._pause_following()  # whatever ended the link: the jobs' reads stop with it
                    if self._slurm is not None and self._slurm.ended:
                        return
                except CockpitError as exc:
                    self._lost(str(exc).rstrip("."))
                except Exception as exc:  # a bug must not end the watch of every target
                    self._lost(f"unexpected {type(exc).__name__}: {exc}")
                await asyncio.sleep(self._delay)
                self._delay = min(self._delay * 2, RETRY_MOST)
        finally:
            self._stop_following()

    def _lost(self, reason: str) -> None:
        """The cluster could not be seen: said once an outage (and again if the reason changes)."""
        if reason != self._reason:
            self._reason = reason
            self.say(f"{self.target}: {reason}; trying again")
        self.state = f"unreachable: {reason}"
        self._look(Observation(unreachable=reason, now=time.time()))

    def _reached(self) -> None:
        """A whole look succeeded: the watch runs (said once), and the next outage is tried again soon."""
        if self.state != "watching":
            self.say(f"{self.target}: watching")
        self.state, self._reason, self._delay = "watching", "", RETRY_FIRST

    async def _slurm_running(self) -> bool:
        """The Slurm job looked up (when due); whether its cluster can be watched now."""
        from cockpit.core.slurm import queue as slurm

        assert self.target.slurm_job is not None
        job = await slurm.lookup(self.target.slurm_job)
        self._slurm, self._slurm_at = job, time.monotonic()
        if not job.running:
            self.state = "queued" if job.waiting else ("ended" if job.ended else job.state.lower())
        self._look(Observation(slurm=job, now=time.time()))
        return job.running and not job.port_pending

    async def _watch(self, connection: Connection) -> None:
        client = connection.client
        while True:
            now = time.monotonic()
            due = self.target.kind == "slurm" and now - self._slurm_at >= SLURM_EVERY
            if due and not await self._slurm_running():
                return
            jobs = await client.jobs()
            if self._nodes is None or now - self._nodes_at >= self.settings.nodes_every:
                self._nodes, self._nodes_at = await client.nodes(), now
            if now - self._pending_at >= self.settings.pending_every:
                from cockpit.core.actors.pending import fetch_pending

                self._pending_at = now
                try:  # an older head without one of its endpoints: the other rules still hold
                    self._pending = await fetch_pending(client, nodes=self._nodes)
                except CockpitError:
                    self._pending = None
                self._kills = await self._oom_kills(client)
            await self._follow(client, jobs)
            hangs = {}
            for key, followed in self._followed.items():
                if followed.watch.needs_place(now) and self.settings.roles is not None:
                    with contextlib.suppress(CockpitError):
                        followed.watch.placed(await job_place(client, followed.job, self.settings.roles), now)
                hangs[key] = followed.watch.check(self._nodes or (), time.monotonic())
                self._nonfinite[key] = tuple(followed.store.nonfinite())
            ended = [key for key in self._nonfinite if key not in self._followed]
            self._look(
                Observation(
                    jobs=jobs,
                    nodes=self._nodes,
                    hangs=hangs,
                    nonfinite=self._nonfinite,
                    stuck=self._pending,
                    oom_kills=self._kills,
                    slurm=self._slurm,
                    now=time.time(),
                )
            )
            for key in ended:  # told (or not worth it) once: the book remembers the event
                self._nonfinite.pop(key, None)
            self._reached()
            await asyncio.sleep(self.settings.interval)

    async def _oom_kills(self, client: DashboardClient) -> tuple[OomKill, ...] | None:
        """The workers Ray's memory monitor killed (one filtered read of the worker table); None when
        the head could not say."""
        from cockpit.core.memory.report import oom_kills

        try:
            listing = await client.workers(filters=[("exit_type", "=", "NODE_OUT_OF_MEMORY")], limit=OOM_ROWS)
        except CockpitError:
            return None
        kills = oom_kills(listing.rows, ())
        if self._kill_baseline is None:  # the first read that worked: what it lists is history
            self._kill_baseline = {k.worker_id for k in kills}
        return tuple(k for k in kills if k.worker_id not in self._kill_baseline)

    def _look(self, seen: Observation) -> None:
        for alert in self.book.update(findings(seen, self.settings.thresholds), seen.now, looked_at(seen)):
            self.emit(alert)

    # -- the running jobs ----------------------------------------------------------------------

    async def _follow(self, client: DashboardClient, jobs: tuple[JobRow, ...]) -> None:
        """Follow the newest running jobs; read to its end the log of each that ended."""
        running = running_jobs(jobs)[: self.settings.max_jobs]
        keys = {j.key for j in running}
        ended = {j.key: j for j in jobs if j.terminal}
        for key in [k for k in self._followed if k not in keys]:
            await self._finish(client, self._followed.pop(key))
        for job in running:
            known = self._followed.get(job.key)
            entry = known if known is not None else await self._start(job)
            self._followed[job.key] = entry
            entry.job = job
            if entry.task is None or entry.task.done():  # new, or its link was lost: (re)started
                entry.task = asyncio.get_running_loop().create_task(self._read(client, entry))
        fresh = [j for k, j in ended.items() if k not in self._known_ended]
        self._known_ended = set(ended)  # what Ray lists (it keeps a bounded number of jobs)
        if self._first_jobs:
            self._first_jobs = False
            return  # jobs over before the watch began are not read
        for job in fresh:
            if job.key not in self._nonfinite and job.submission_id and job.driver_node_id:
                # began and ended between two looks: never followed
                followed = await self._start(job)
                await self._finish(client, followed, lines=ENDED_LINES)

    async def _start(self, job: JobRow) -> _Followed:
        from cockpit.core.metrics.lines import MetricsParser
        from cockpit.core.metrics.series import SeriesStore

        settings = self.settings
        policy, problem = await asyncio.to_thread(
            job_policy, job, profile_dirs=settings.profile_dirs, hang_after=settings.hang_after
        )
        if settings.hang_override is not None:
            policy = HangPolicy(hang_after=settings.hang_override, progress=policy.progress)
        form, form_problem = await asyncio.to_thread(job_metrics_format, job, settings.profile_dirs)
        # Both read the same profile: its one problem is said once a job, not once a reader and a start.
        said = problem or form_problem
        if said and job.key not in self._told_profile:
            self._told_profile.add(job.key)
            self.say(f"{self.target}: {job.key}: {said}")
        return _Followed(
            job, policy, MetricsParser(form), SeriesStore(max_points=MAX_POINTS, max_keys=MAX_KEYS)
        )

    async def _read(self, client: DashboardClient, followed: _Followed) -> None:
        """The job's driver log from its first byte, and after a lost link on the same tail, from where
        it stopped (no line read twice: a reconnect is not progress, a NaN is not told twice)."""
        from cockpit.core.logs.sources import LogSource, LogTail

        if followed.tail is None:
            followed.tail = LogTail(client, LogSource.driver(followed.job), lines=-1, interval=1.0)
        followed.tail.client = client
        try:
            async for chunk in followed.tail.chunks():
                followed.feed(chunk)
        except Exception as exc:  # a log that cannot be read: said, tried again later
            self.say(f"{self.target}: {followed.job.key}: its driver log cannot be followed ({exc})")
            await asyncio.sleep(RETRY_MOST)

    async def _finish(self, client: DashboardClient, followed: _Followed, lines: int = -1) -> None:
        """FOLLOWED's stream stopped and the rest of its log read (the last LINES lines when it was never
        followed), so that its metrics are judged to the end."""
        from cockpit.core.logs.sources import LogSource, LogTail, last_lines

        if followed.task is not None:
            followed.task.cancel()
            await asyncio.gather(followed.task, return_exceptions=True)
        source = LogSource.driver(followed.job)
        if followed.tail is not None:
            followed.tail.client = client
            rest = followed.tail.rest()
        else:  # never followed: its last LINES lines in one read at the end (the whole file for -1)
            rest = last_lines(client, source, lines) if lines >= 0 else LogTail(client, source, lines).rest()
        with contextlib.suppress(CockpitError):
            async for chunk in rest:
                followed.feed(chunk)
        followed.store.extend(followed.parser.flush())
        self._nonfinite[followed.job.key] = tuple(followed.store.nonfinite())

    def _pause_following(self) -> None:
        """The link is lost: each job's reading stops, its watch kept (the time blind is not silence)."""
        now = time.monotonic()
        for followed in self._followed.values():
            followed.watch.blind(now)
            if followed.task is not None:
                followed.task.cancel()

    def _stop_following(self) -> None:
        for followed in self._followed.values():
            if followed.task is not None:
                followed.task.cancel()
        self._followed.clear()
