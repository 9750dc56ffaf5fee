"""Provides what watching a running job for progress takes, shared by the hang feed and `cockpit watch`:
the job's profile (its metadata names it) and policy, the GPU readings of the nodes, and the driver log
followed into a `ProgressWatch`."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from cockpit.core.doctor.hang import DEFAULT_HANG_AFTER, HangPolicy, ProgressWatch, hang_policy
from cockpit.core.errors import CockpitError
from cockpit.core.snapshots import NA, JobRow, NodeSnapshot

if TYPE_CHECKING:
    from cockpit.core.cluster.dashboard import DashboardClient
    from cockpit.core.jobs.profiles import Profile

MAX_CHUNK_LINES = 5000
"""Lines looked at per chunk of log (a flood is progress whatever its content)."""
MAX_PARTIAL = 65536
"""A line longer than this without its end is judged by its tail."""


def job_profile(job: JobRow, *, profile_dirs: Sequence[Path] = ()) -> tuple[Profile | None, str]:
    """The profile JOB's metadata names (None when none, or when it cannot be read), looked up with the
    config's PROFILE_DIRS, and one line saying why it could not be read."""
    from cockpit.core.jobs import profiles
    name = job.metadata.get("cockpit_profile", "")
    if not name:
        return None, ""
    if not PROFILE_NAME.fullmatch(name) or name.endswith((".yaml", ".yml")):  # a name, never a path
        return None, f"the job's profile name {name[:60]!r} is not a profile name"
    try:
        return profiles.load(profiles.find(name, dirs=profile_dirs)), ""
    except (CockpitError, OSError, ValueError) as exc:
        return None, f"profile {name}: {exc}"


def job_policy(
    job: JobRow, *, profile_dirs: Sequence[Path] = (), hang_after: float = DEFAULT_HANG_AFTER
) -> tuple[HangPolicy, str]:
    """JOB's hang policy from the profile its metadata names (HANG_AFTER, the config's, when none says),
    and one line when that profile could not be read (the default is used then)."""
    profile, problem = job_profile(job, profile_dirs=profile_dirs)
    if problem:
        why = f"{problem} (progress: any line, hang after the default)"
        return hang_policy(None, default=hang_after), why
    return hang_policy(profile, default=hang_after), ""


def describe_policy(policy: HangPolicy) -> str:
    if policy.progress is not None:
        return f"lines matching {policy.progress.pattern}"
    return "any driver-log line or GPU activity"


PROFILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
"""What a job's `cockpit_profile` metadata may name: a profile, looked up on the search path."""
NODES_EVERY = 60.0
"""How often a watched job's nodes are looked up again (one actor-list request per job)."""


def gpu_readings(nodes: Iterable[NodeSnapshot], only: Collection[str]) -> list[float | None]:
    """The utilization of the GPUs of the alive nodes in ONLY (node ids: the job's), None where not known.
    Another job's GPUs must not count as this one's progress: no node known, no reading."""
    return [
        None if gpu.utilization is NA else float(gpu.utilization)
        for node in nodes
        if node.alive and node.node_id in only
        for gpu in node.gpus
    ]


async def job_nodes(client: DashboardClient, job: JobRow) -> frozenset[str]:
    """The nodes the job runs on: its driver's and its alive actors' (one filtered list request)."""
    listing = await client.actors(filters=[("job_id", "=", job.job_id), ("state", "=", "ALIVE")], limit=1000)
    nodes = {a.node_id for a in listing.rows if a.node_id}
    if job.driver_node_id:
        nodes.add(job.driver_node_id)
    return frozenset(nodes)


async def follow_driver(
    client_of: Callable[[], Awaitable[DashboardClient]],
    job: JobRow,
    watch: ProgressWatch,
    on_break: Callable[[str], None] | None = None,
    pause: float = 5.0,
) -> None:
    """Feed JOB's driver log, as it is written, into WATCH, until cancelled: its last line first, then
    each new line. A broken stream is followed again after PAUSE seconds (CLIENT_OF gives the client,
    perhaps a new one after a reconnect), without its last line: that was seen already, so a reconnect
    is no progress. ON_BREAK hears why it broke, and "" once lines come again."""
    from cockpit.core.logs.sources import LogSource

    replay, broken = True, False
    while True:
        try:
            client = await client_of()
            pending = b""
            skip = not replay
            async for chunk in client.stream_log(LogSource.driver(job).params(), lines=1, interval=1.0):
                if broken and on_break is not None:
                    on_break("")
                broken = False
                lines = (pending + chunk).split(b"\n")
                pending = lines.pop()[-MAX_PARTIAL:]
                if skip and lines:
                    lines, skip = lines[1:], False
                if lines:
                    texts = [raw.decode("utf-8", "replace") for raw in lines[-MAX_CHUNK_LINES:]]
                    watch.feed_lines(texts, time.monotonic())
        except CockpitError as exc:
            broken = True
            if on_break is not None:
                on_break(str(exc))
        replay = False
        await asyncio.sleep(pause)
