"""Provides the join gate's wait (`cockpit wait`): a TARGET polled until it has the shape a job expects.

Each round opens the connection if it is not open yet, reads the nodes and measures the `JoinProgress`.
What goes wrong is sorted by the one rule, `cockpit.core.errors.is_permanent`, the rule the TUI's
feeds follow too: a permanent error (a refused token or key, an unknown job, a bad target) ends the wait
at once, raised; a transient one (the head not up yet, a dropped link, a busy slurmctld, a Slurm job
still queued) is the round's problem, and the next round asks again. A `slurm:` target whose head does
not answer is looked up in Slurm (at most every `PENDING_POLL_SECONDS`), so a job that ended stops the
wait instead of running out its timeout.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass

from cockpit.core.cluster.join import JoinProgress
from cockpit.core.connect.connection import Connection, ConnectOptions, cluster_nodes, open_connection
from cockpit.core.errors import CockpitError, is_permanent
from cockpit.core.slurm import queue as slurm
from cockpit.core.targets import Target

Opener = Callable[[Target, ConnectOptions], AbstractAsyncContextManager[Connection]]
"""How a connection is opened (`open_connection`; a test may give another)."""


@dataclass(frozen=True)
class WaitRound:
    """One look at the cluster: how far it is, or why nothing could be counted."""

    waited: float
    """Seconds since the wait began."""
    progress: JoinProgress | None
    """The last progress measured (None until a round could count the nodes)."""
    problem: str = ""
    """Why this round counted nothing (the transient error's sentence); "" when it did."""

    @property
    def ready(self) -> bool:
        return self.progress is not None and self.progress.ready and not self.problem

    @property
    def line(self) -> str:
        """The round in one line: the problem, else the progress."""
        return self.problem or (self.progress.summary() if self.progress is not None else "")


@dataclass(frozen=True)
class WaitOutcome:
    """How the wait ended: ready, or out of time with the last round."""

    last: WaitRound
    expected_nodes: int
    expected_gpus: float | None

    @property
    def ready(self) -> bool:
        return self.last.ready


async def wait_for_shape(
    target: Target,
    options: ConnectOptions,
    nodes: int | None,
    gpus: float | None,
    timeout: float,
    interval: float = 2.0,
    on_round: Callable[[WaitRound], None] = lambda _round: None,
    opener: Opener = open_connection,
) -> WaitOutcome:
    """Poll TARGET every INTERVAL seconds until it has NODES nodes (and GPUS GPUs), or TIMEOUT passed.

    For a `slurm:` target, NODES and GPUS default to the allocation's. ON_ROUND is told every round.

    Raises:
        CockpitError: a permanent error (`is_permanent`), at once; a Slurm job that ended.
    """
    started = time.monotonic()
    progress: JoinProgress | None = None
    checked = 0.0
    """When Slurm was last asked whether a slurm: target's job still runs."""
    async with AsyncExitStack() as stack:
        connection: Connection | None = None
        while True:
            pause = interval
            problem = ""
            try:
                if connection is None:
                    # Over SSH the head's sshd may not be up yet either (the sbatch join gate): retried.
                    connection = await stack.enter_async_context(opener(target, options))
                    if connection.slurm is not None:  # the allocation's shape, unless given
                        nodes = nodes or connection.slurm.num_nodes
                        gpus = gpus if gpus is not None else connection.slurm.gpus
                # A head without its dashboard gives its nodes over SSH: the join gate works there too.
                progress = JoinProgress.of(await cluster_nodes(connection), nodes, gpus)
            except CockpitError as exc:
                if is_permanent(exc):
                    raise
                problem = str(exc)
                if isinstance(exc, (slurm.SlurmNotRunning, slurm.SlurmError)):
                    # Queued (its reason and estimate, refreshed) or slurmctld busy: Slurm's own pace.
                    pause = max(interval, slurm.PENDING_POLL_SECONDS / 2)
                else:  # the head may still be starting: keep waiting, but say why nothing is counted
                    checked = await _slurm_still_there(target, checked)
            now = WaitRound(waited=time.monotonic() - started, progress=progress, problem=problem)
            on_round(now)
            if now.ready or now.waited >= timeout:
                return WaitOutcome(last=now, expected_nodes=nodes or 0, expected_gpus=gpus)
            await asyncio.sleep(min(pause, max(0.1, timeout - now.waited)))


async def _slurm_still_there(target: Target, checked: float) -> float:
    """For a slurm target whose head does not answer (yet): raise if the job ended (no point waiting).
    Asks Slurm at most every PENDING_POLL_SECONDS (CHECKED: when it last did); returns when it last
    asked."""
    if target.kind != "slurm" or target.slurm_job is None:
        return checked
    if time.monotonic() - checked < slurm.PENDING_POLL_SECONDS:
        return checked
    checked = time.monotonic()
    try:
        job = await slurm.lookup(target.slurm_job)
    except slurm.SlurmError as exc:
        if is_permanent(exc):
            raise
        return checked  # slurmctld busy: a later round asks again
    if job.ended or job.ending:
        raise slurm.SlurmNotRunning(job)
    return checked
