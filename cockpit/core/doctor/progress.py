"""Provides what watching a running job for progress takes, shared by the hang feed and `cockpit watch`:
the job's profile (its metadata names it) and policy, where the job runs (`JobPlace`: its nodes and its
actors' roles), and the GPU readings of its nodes, as a whole and per role; and how its driver log
prints metrics (`job_metrics_format`, which the metrics feed and `cockpit alerts` share)."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from cockpit.core.doctor.hang import DEFAULT_HANG_AFTER, HangPolicy, hang_policy
from cockpit.core.errors import CockpitError
from cockpit.core.snapshots import NA, JobRow, NodeSnapshot

if TYPE_CHECKING:
    from cockpit.core.actors.roles import RoleRules
    from cockpit.core.cluster.dashboard import DashboardClient
    from cockpit.core.jobs.profiles import Profile
    from cockpit.core.metrics.lines import Format


def job_profile(job: JobRow, *, profile_dirs: Sequence[Path] = ()) -> tuple[Profile | None, str]:
    """The profile JOB's metadata names (None when none, or when it cannot be read): the file it was
    submitted from here (`jobs.submitted`), else the name looked up with the config's PROFILE_DIRS; and
    one line saying why it could not be read."""
    from cockpit.core.jobs import profiles
    from cockpit.core.jobs.submitted import noted_profile

    name = job.metadata.get("cockpit_profile", "")
    if not name:
        return None, ""
    if not PROFILE_NAME.fullmatch(name) or name.endswith((".yaml", ".yml")):  # a name, never a path
        return None, f"the job's profile name {name[:60]!r} is not a profile name"
    try:
        # The file this job was submitted from here, noted by the cockpit that submitted it (a profile
        # given by path is on no search path); else the name on the search path.
        noted = noted_profile(job.submission_id, name)
        if noted is not None:
            return noted, ""
        return profiles.load(profiles.find(name, dirs=profile_dirs)), ""
    except (CockpitError, OSError, ValueError) as exc:
        return None, f"profile {name}: {exc}"


def job_metrics_format(job: JobRow, profile_dirs: Sequence[Path] = ()) -> tuple[Format, str]:
    """How JOB's driver log prints metrics: its profile's `metrics:` or framework (the profile looked up
    with the config's PROFILE_DIRS), else `auto`; and one line when the profile could not say."""
    from cockpit.core.metrics.lines import profile_format

    profile, problem = job_profile(job, profile_dirs=profile_dirs)
    if profile is None:
        return "auto", problem
    try:
        return profile_format(profile.metrics, profile.framework), ""
    except ValueError as exc:
        return "auto", f"profile {profile.name}: metrics: {exc}"


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


def watch_policy(
    job: JobRow,
    hang_after: float | None = None,
    progress: re.Pattern[str] | None = None,
    *,
    profile_dirs: Sequence[Path] = (),
    default_hang_after: float = DEFAULT_HANG_AFTER,
) -> tuple[HangPolicy, str]:
    """JOB's policy (`job_policy`, with the config's PROFILE_DIRS and DEFAULT_HANG_AFTER) with what the
    user gave on top (`--hang-after`, `--progress`)."""
    policy, problem = job_policy(job, profile_dirs=profile_dirs, hang_after=default_hang_after)
    return (
        HangPolicy(
            hang_after=hang_after if hang_after is not None else policy.hang_after,
            progress=progress if progress is not None else policy.progress,
        ),
        problem,
    )


def describe_policy(policy: HangPolicy) -> str:
    if policy.progress is not None:
        return f"lines matching {policy.progress.pattern}"
    return "any driver-log line or GPU activity"


PROFILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
"""What a job's `cockpit_profile` metadata may name: a profile, looked up on the search path."""
NODES_EVERY = 60.0
"""How often where a watched job runs is looked up again (one actor-list request per job)."""


def gpu_readings(
    nodes: Iterable[NodeSnapshot], only: Collection[str], silent: Collection[str] = ()
) -> list[float | None]:
    """The utilization of the GPUs of the alive nodes in ONLY (node ids: the job's), None where not known.
    Another job's GPUs must not count as this one's progress: no node known, no reading. A node in SILENT
    (alive, but no new reading for a while: `NodeSilence`) keeps its places, each None, so the other
    GPUs keep their indices and its frozen readings count neither as movement nor as stillness."""
    return [
        None if gpu.utilization is NA or node.node_id in silent else float(gpu.utilization)
        for node in nodes
        if node.alive and node.node_id in only
        for gpu in node.gpus
    ]


@dataclass(frozen=True)
class JobPlace:
    """Where a job runs: its nodes (its driver's and its alive actors') and the role of each of its actors'
    processes, by (node id, pid): whose GPUs are the job's, and which role each GPU works for."""

    nodes: frozenset[str] = frozenset()
    roles: Mapping[tuple[str, int], str] = field(default_factory=dict)


async def job_place(client: DashboardClient, job: JobRow, rules: RoleRules) -> JobPlace:
    """Where JOB runs now (one filtered list of its alive actors); RULES name their roles."""
    listing = await client.actors(filters=[("job_id", "=", job.job_id), ("state", "=", "ALIVE")], limit=1000)
    nodes = {a.node_id for a in listing.rows if a.node_id}
    if job.driver_node_id:
        nodes.add(job.driver_node_id)
    roles: dict[tuple[str, int], str] = {}
    for actor in listing.rows:
        role = rules.role(actor.class_name, actor.name) if actor.pid is not None else None
        if role and actor.pid is not None:
            roles[(actor.node_id, actor.pid)] = role
    return JobPlace(nodes=frozenset(nodes), roles=roles)


def role_readings(
    nodes: Iterable[NodeSnapshot], place: JobPlace, silent: Collection[str] = ()
) -> dict[str, list[float | None]]:
    """Utilization per role on the job's alive nodes: each GPU counts for the roles of the processes on
    it. Raylets sharing a host share its GPUs and its pids, so a process is looked up by (host IP, pid)."""
    nodes = tuple(nodes)
    ip_of = {node.node_id: node.ip for node in nodes}
    role_at = {(ip_of.get(node_id, node_id), pid): role for (node_id, pid), role in place.roles.items()}
    by_role: dict[str, list[float | None]] = {}
    if not role_at:
        return by_role
    for node in nodes:
        if not node.alive or node.node_id not in place.nodes:
            continue
        for gpu in node.gpus:
            roles = {role_at[(node.ip, p.pid)] for p in gpu.processes if (node.ip, p.pid) in role_at}
            for role in roles:
                util = gpu.utilization
                known = util is not NA and node.node_id not in silent
                by_role.setdefault(role, []).append(float(util) if util is not NA and known else None)
    return by_role
