"""Provides what watching a running job for progress takes, shared by the hang feed and `cockpit watch`:
the job's profile (its metadata names it) and policy, the GPU readings of the nodes, and the driver log
followed into a `ProgressWatch`."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from cockpit.core.errors import CockpitError
from cockpit.core.hang import HangPolicy, ProgressWatch, hang_policy
from cockpit.core.snapshots import NA, JobRow, NodeSnapshot

if TYPE_CHECKING:
    from cockpit.core.profiles import Profile
    from cockpit.core.ray_api import DashboardClient

MAX_CHUNK_LINES = 5000
"""Lines looked at per chunk of log (a flood is progress whatever its content)."""
MAX_PARTIAL = 65536
"""A line longer than this without its end is judged by its tail."""


def job_profile(job: JobRow) -> tuple[Profile | None, str]:
    """The profile JOB's metadata names (None when none, or when it cannot be read), and one line saying
    why it could not be read."""
    from cockpit.core import profiles

    name = job.metadata.get("cockpit_profile", "")
    if not name:
        return None, ""
    try:
        return profiles.load(profiles.find(name)), ""
    except (CockpitError, OSError, ValueError) as exc:
        return None, f"profile {name}: {exc}"


def job_policy(job: JobRow) -> tuple[HangPolicy, str]:
    """JOB's hang policy from the profile its metadata names (the default when none), and one line when
    that profile could not be read (the default is used then)."""
    profile, problem = job_profile(job)
    if problem:
        return hang_policy(None), f"{problem} (progress: any line, hang after the default)"
    return hang_policy(profile), ""


def describe_policy(policy: HangPolicy) -> str:
    if policy.progress is not None:
        return f"lines matching {policy.progress.pattern}"
    return "any driver-log line or GPU activity"


def gpu_readings(nodes: Iterable[NodeSnapshot]) -> list[float | None]:
    """Every alive node's GPUs' utilization (None where not known)."""
    return [
        None if gpu.utilization is NA else float(gpu.utilization)
        for node in nodes
        if node.alive
        for gpu in node.gpus
    ]


async def follow_driver(client: DashboardClient, job: JobRow, watch: ProgressWatch) -> None:
    """Feed JOB's driver log, as it is written, into WATCH (its last line first); runs until cancelled or
    the stream breaks (DashboardError)."""
    from cockpit.core.log_sources import LogSource

    pending = b""
    async for chunk in client.stream_log(LogSource.driver(job).params(), lines=1, interval=1.0):
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()[-MAX_PARTIAL:]
        if lines:
            texts = [raw.decode("utf-8", "replace") for raw in lines[-MAX_CHUNK_LINES:]]
            watch.feed_lines(texts, time.monotonic())
