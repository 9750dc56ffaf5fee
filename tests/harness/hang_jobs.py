"""Provides the shipped `demo-hang` job on the session cluster, hanging early: RolloutWorker_0 blocks in
`wait_for_weights_sync`, RolloutWorker_1..3 wait for it in `all_gather_weights`, the driver in `ray.get`.

Each job gets a new submission id and is stopped when the test is done.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cockpit.core.cluster.dashboard import DashboardClient
from cockpit.core.connect.connection import Connection
from cockpit.core.doctor.errors import SelectionError
from cockpit.core.doctor.gather import take
from cockpit.core.doctor.selection import select
from cockpit.core.doctor.stacks import StacksReport
from cockpit.core.jobs import profiles
from cockpit.core.jobs.overrides import parse_overrides
from tests.harness.cluster import ClusterHandle
from tests.harness.debug_jobs import CrashJob, _stop, _submit

HANG_STEP = 2

SAVERS_STUCK = """
import time
import ray

ray.init()


def wait_for_checkpoint_barrier():
    while True:
        time.sleep(3600)


@ray.remote(num_cpus=0)
class Saver:
    def save(self):
        wait_for_checkpoint_barrier()


@ray.remote(num_cpus=0)
class Idle:
    def ping(self):
        return 1


savers = [Saver.options(name=f"Saver_{i}").remote() for i in range(2)]
idle = Idle.options(name="IdleOne").remote()
ray.get(idle.ping.remote())
refs = [s.save.remote() for s in savers]
print("saving", flush=True)
ray.get(refs)
"""
"""A job script (any Ray version): two actors stuck in `wait_for_checkpoint_barrier`, one idle actor."""


def hang_request(submission_id: str, hang_at_step: int = HANG_STEP) -> dict[str, Any]:
    """The shipped demo-hang profile's request, hanging at HANG_AT_STEP, a step each 0.3 s (the trainer
    takes the later of two equal overrides)."""
    profile = profiles.load(profiles.find("demo-hang"))
    assert any(o.startswith("hang_at_step=") for o in profile.overrides), "demo-hang must make the demo hang"
    more = parse_overrides([f"hang_at_step={hang_at_step}", "step_seconds=0.3"])
    return profiles.render(profile, more, submission_id=submission_id)


@contextmanager
def demo_hang_job(cluster: ClusterHandle, hang_at_step: int = HANG_STEP) -> Iterator[CrashJob]:
    submission_id = f"cockpit-test-hang-{uuid.uuid4().hex[:8]}"
    job = _submit(cluster, hang_request(submission_id, hang_at_step))
    try:
        yield job
    finally:
        _stop(cluster, submission_id)


def labels(report: StacksReport) -> dict[str, list[str]]:
    """Each group's label -> its members' actor names (or what they are)."""
    return {g.label: [m.who for m in g.members] for g in report.groups}


async def wait_hung(
    connection: Connection, job_id: str, timeout: float = 90.0, **options: Any
) -> StacksReport:
    """The job's stacks once RolloutWorker_0 is seen in `wait_for_weights_sync` and the three others in
    `all_gather_weights` (the hang has happened)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            selection = await select(connection.client, job=job_id)
        except SelectionError:  # not running yet
            found: dict[str, list[str]] = {}
        else:
            found = labels(await take(connection, selection, **options))
        stuck = [who for label, who in found.items() if "wait_for_weights_sync" in label]
        waiting = sorted(
            name for label, who in found.items() if "all_gather_weights" in label for name in who
        )
        if stuck == [["RolloutWorker_0"]] and waiting == [f"RolloutWorker_{i}" for i in (1, 2, 3)]:
            return await take(connection, selection, **options)
        if time.monotonic() > deadline:
            raise AssertionError(f"the demo-hang job did not hang as planned within {timeout:.0f} s: {found}")
        await asyncio.sleep(1.0)


async def alive_actor_pids(client: DashboardClient, job_id: str) -> set[int]:
    listing = await client.actors(filters=[("job_id", "=", job_id), ("state", "=", "ALIVE")])
    return {a.pid for a in listing.rows if a.pid}


FAST_PROFILE = "demo-hang-fast"


@dataclass(frozen=True)
class HungJob:
    """A job of the `demo-hang-fast` profile, submitted with `cockpit submit` and hung as planned (the
    session's `hung_demo`): RolloutWorker_0 in `wait_for_weights_sync`, the three others waiting for it."""

    submission_id: str
    job_id: str
    env: dict[str, str]
    """What makes the cockpit find the profile (`fast_profile_home`): its `hang_after` is 4 s."""


def fast_profile_home(root: Path, hang_after: str = "4s") -> dict[str, str]:
    """A config home whose profiles hold `demo-hang-fast`: the shipped demo-hang with HANG_AFTER and a
    quick step; returns the environment that makes the cockpit find it (XDG_CONFIG_HOME)."""
    text = profiles.find("demo-hang").read_text()
    assert "hang_after:" in text and "progress:" in text, "the demo-hang profile sets both keys"
    lines = []
    for line in text.splitlines():
        if line.startswith("name:"):
            line = f"name: {FAST_PROFILE}"
        elif line.startswith("hang_after:"):
            line = f"hang_after: {hang_after}"
        elif line.startswith("  - hang_at_step="):
            line = f"  - hang_at_step={HANG_STEP}"
        elif line.startswith("  - step_seconds="):
            line = "  - step_seconds=0.3"
        lines.append(line)
    folder = root / "config" / "ray-cockpit" / "profiles"
    folder.mkdir(parents=True)
    (folder / f"{FAST_PROFILE}.yaml").write_text("\n".join(lines) + "\n")
    return {"XDG_CONFIG_HOME": str(root / "config")}
