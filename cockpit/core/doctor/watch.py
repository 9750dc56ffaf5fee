"""Provides the hang watch of one running job, the one `cockpit watch` and the TUI's hang feed share.

`HangWatch` is fed the job's driver log as it comes (bytes, cut anywhere), where the job runs
(`JobPlace`, looked up every `NODES_EVERY` seconds) and, at each look, the nodes' GPU readings, from which
it takes the job's GPUs as a whole (progress, the GPU summary) and per role (the straggler hint); it
gives the `Verdict` of the rule in `cockpit.core.doctor.hang`. Time the caller could not see the cluster
(`blind`) is not counted as silence. Both callers feed it the same things, so they cannot disagree.

`watch_job` is `cockpit watch`'s loop around it (the CLI keeps its flags and its printing):
`follow_log` feeds the driver log from one `LogTail` of its own, and every `interval` seconds the job and
the nodes are asked for; it ends with the job, or with a hang and the grouped stacks of the job's
processes (`take_evidence`, saved by `save_evidence`).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cockpit.core.cluster.errors import DashboardError
from cockpit.core.cluster.liveness import NodeSilence
from cockpit.core.doctor.hang import HangPolicy, ProgressWatch, Verdict
from cockpit.core.doctor.progress import NODES_EVERY, JobPlace, gpu_readings, job_place, role_readings
from cockpit.core.errors import CockpitError, is_permanent
from cockpit.core.snapshots import JobRow, NodeSnapshot

if TYPE_CHECKING:
    from pathlib import Path

    from cockpit.core.actors.roles import RoleRules
    from cockpit.core.cluster.dashboard import DashboardClient
    from cockpit.core.connect.connection import Connection
    from cockpit.core.doctor.stacks import StacksReport

MAX_CHUNK_LINES = 5000
"""Lines looked at per chunk of log (a flood is progress whatever its content)."""
MAX_PARTIAL = 65536
"""A line longer than this without its end is judged by its tail."""
LOG_PAUSE = 5.0
"""Seconds before a driver log that could not be followed at all is tried again."""


class HangWatch:
    """One running job watched for progress: fed its driver log, where it runs and its nodes' GPUs."""

    def __init__(self, job: JobRow, policy: HangPolicy, now: float) -> None:
        self.job = job
        self.policy = policy
        self.progress = ProgressWatch(policy, now)
        self.place = JobPlace(nodes=frozenset({job.driver_node_id} - {""}))
        """Where the job runs, as last looked up (until then: its driver's node)."""
        self.placed_at: float | None = None
        self.silence = NodeSilence()
        """Nodes still listed alive that stopped reporting: their last readings are not progress."""
        self._partial = b""
        self._blind_since: float | None = None

    def feed_log(self, chunk: bytes, now: float) -> None:
        """Bytes of the driver log, in order, cut anywhere: each complete line is judged once."""
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()[-MAX_PARTIAL:]
        if lines:
            texts = [raw.decode("utf-8", "replace") for raw in lines[-MAX_CHUNK_LINES:]]
            self.progress.feed_lines(texts, now)

    def needs_place(self, now: float) -> bool:
        """Whether where the job runs is due to be looked up (`job_place`)."""
        return self.placed_at is None or now - self.placed_at >= NODES_EVERY

    def placed(self, place: JobPlace, now: float) -> None:
        self.place, self.placed_at = place, now

    def blind(self, now: float) -> bool:
        """The caller cannot see the cluster from NOW on; True the first time (to say so once)."""
        if self._blind_since is not None:
            return False
        self._blind_since = now
        return True

    def seeing(self, now: float) -> bool:
        """The caller sees the cluster again: the time blind is excused; True if it was blind."""
        if self._blind_since is None:
            return False
        self.progress.excuse(now - self._blind_since, now)
        self._blind_since = None
        return True

    def check(self, nodes: Iterable[NodeSnapshot], now: float) -> Verdict:
        """One look at the cluster: the job's GPUs and each role's, on NODES, fed in; then the verdict.
        The GPUs of a node that stopped reporting (`NodeSilence`) read as not known: the dashboard goes on
        serving its last readings, which are no evidence either way."""
        nodes = tuple(nodes)
        silent = self.silence.update(nodes, now).keys()
        self.seeing(now)
        gpus = gpu_readings(nodes, self.place.nodes, silent)
        if gpus:
            self.progress.feed_gpus(gpus, now)
        roles = role_readings(nodes, self.place, silent)
        if roles:
            self.progress.feed_roles(roles, now)
        return self.progress.verdict(now)


async def follow_log(
    client_of: Callable[[], Awaitable[DashboardClient]],
    watch: HangWatch,
    on_break: Callable[[str], None] | None = None,
    pause: float = LOG_PAUSE,
) -> None:
    """Feed the job's driver log into WATCH until cancelled: its last line first, then every byte as it
    is written (a dropped stream resumes with no line lost or repeated, so a reconnect is no progress).
    A log that cannot be followed at all is tried again after PAUSE seconds with CLIENT_OF's client
    (perhaps a new one); ON_BREAK hears why, and "" once bytes come again."""
    from cockpit.core.logs.sources import LogSource, LogTail

    tail: LogTail | None = None
    broken = False
    while True:
        try:
            client = await client_of()
            if tail is None:
                tail = LogTail(client, LogSource.driver(watch.job), lines=1, interval=1.0)
            tail.client = client
            async for chunk in tail.chunks():
                if broken and on_break is not None:
                    on_break("")
                broken = False
                watch.feed_log(chunk, time.monotonic())
        except CockpitError as exc:
            broken = True
            if on_break is not None:
                on_break(str(exc))
            if is_permanent(exc):
                return  # the job's loop meets the same refusal and ends the watch with it
        await asyncio.sleep(pause)


@dataclass(frozen=True)
class WatchEnd:
    """How a watch ended: with its job (`verdict` None), or with a hang."""

    job: JobRow
    """The job as last seen."""
    verdict: Verdict | None


async def watch_job(
    client: DashboardClient,
    job: JobRow,
    policy: HangPolicy,
    rules: RoleRules,
    *,
    interval: float,
    say: Callable[[str], None],
) -> WatchEnd:
    """`cockpit watch`: wait for JOB to run (a queue or a setup is no hang), then watch it until it ends
    or hangs. SAY hears, one line each, the dashboard lost and back, and a straggler hint as it appears
    or changes."""
    while job.status != "RUNNING":
        if job.terminal:
            return WatchEnd(job, None)
        await asyncio.sleep(interval)
        job = await client.job(job.key)
    watch = HangWatch(job, policy, time.monotonic())

    async def same() -> DashboardClient:
        return client

    follower = asyncio.create_task(follow_log(same, watch))
    straggler = ""
    try:
        while True:
            await asyncio.sleep(interval)
            try:
                now_job = await client.job(job.key)
                if now_job.terminal:
                    return WatchEnd(now_job, None)
                if watch.needs_place(time.monotonic()):
                    watch.placed(await job_place(client, now_job, rules), time.monotonic())
                nodes = await client.nodes()
            except DashboardError as exc:  # the head or the link away for a while: not the job's silence
                if is_permanent(exc):
                    raise  # a refused token, a job gone: waiting cannot cure it (the one rule, as `wait`)
                if watch.blind(time.monotonic()):
                    say(f"lost the dashboard ({exc}); trying again")
                continue
            now = time.monotonic()
            if watch.seeing(now):
                say("the dashboard answers again")
            verdict = watch.check(nodes, now)
            if verdict.hung:
                return WatchEnd(now_job, verdict)
            if verdict.straggler != straggler:
                straggler = verdict.straggler
                if straggler:
                    say(f"{job.key}: {straggler}")
    finally:
        follower.cancel()
        await asyncio.gather(follower, return_exceptions=True)


async def take_evidence(connection: Connection, job: JobRow, native: bool, local: bool) -> StacksReport:
    """The grouped stacks of every process of JOB (what a hang leaves behind).

    Raises:
        CockpitError: the job's processes could not be chosen (one line why).
    """
    from cockpit.core.doctor.gather import take
    from cockpit.core.doctor.selection import SelectionError, select

    try:
        selection = await select(connection.client, job=job.key)
    except SelectionError as exc:
        raise CockpitError(str(exc)) from None
    return await take(connection, selection, native=native, local=local)


def save_evidence(out: Path, report: StacksReport, headline: str) -> None:
    """REPORT under HEADLINE into OUT (JSON for a `.json`, else text), never over an existing file."""
    from cockpit.core.doctor.stacks import render_text, report_json
    from cockpit.core.text import clean

    if out.suffix == ".json":
        text = json.dumps({"hang": headline, **report_json(report)}, indent=2)
    else:
        text = clean(headline) + "\n\n" + render_text(report, full=True, clean=clean) + "\n"
    with open(out, "x", encoding="utf-8") as handle:
        handle.write(text)
