"""Provides jobs that crash with post-mortem debugging on, on the session cluster: the demo-crash profile
(debugpy), two tasks raising the same error (a group), and a legacy (`RAY_DEBUG=legacy`) crash.

Each job gets a new submission id and is stopped when the test is done, so a paused worker never
outlives its test (a stopped job's workers are killed, paused or not).
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cockpit.core.cluster.dashboard import DashboardClient
from cockpit.core.debug.paused import PausedWorker, find_paused
from cockpit.core.jobs import profiles
from cockpit.core.jobs.overrides import parse_overrides
from cockpit.demo import trainer
from tests.harness.cluster import ClusterHandle

TWIN_CRASH = """
import ray

ray.init()


@ray.remote(num_cpus=0)
def load_shard(index):
    rows = [index] * 3
    raise ValueError(f"corrupt shard {index}: checksum mismatch")


refs = [load_shard.remote(i) for i in (1, 2)]
for ref in refs:
    try:
        ray.get(ref)
    except Exception as exc:
        print("failed as planned:", type(exc).__name__, flush=True)
"""
"""Two tasks raising the same error (only the shard number differs): one group of two."""

LEGACY_CRASH = """
import ray

ray.init()


@ray.remote(num_cpus=0)
def bad_task(x):
    y = x + 1
    raise ValueError(f"boom {y}")


try:
    ray.get(bad_task.remote(1))
except Exception as exc:
    print("failed as planned:", type(exc).__name__, flush=True)
"""
"""A task whose local `y` is 2 when it raises, under the legacy pdb debugger."""

POST_MORTEM = {"RAY_DEBUG_POST_MORTEM": "1"}

CRASH_LINE = next(
    n
    for n, line in enumerate(Path(trainer.__file__).read_text().splitlines(), 1)
    if "raise RuntimeError(" in line and "demo crash" in line
)
"""The line of the demo trainer's crash (RolloutWorker.generate)."""


@dataclass
class CrashJob:
    submission_id: str
    job_id: str
    submitted_at: float


async def _job_id(client: DashboardClient, submission_id: str) -> str:
    for _ in range(120):
        job = await client.job(submission_id)
        if job.job_id:
            return job.job_id
        await asyncio.sleep(0.5)
    raise AssertionError(f"{submission_id} got no Ray job id within 60 s")


async def wait_paused(
    client: DashboardClient, job_id: str, count: int = 1, timeout: float = 90.0
) -> list[PausedWorker]:
    """The debugpy-paused workers of JOB_ID once there are COUNT of them."""
    deadline = time.monotonic() + timeout
    while True:
        listing = await find_paused(client)
        mine = [w for w in listing.workers if w.job_id == job_id]
        if len(mine) >= count:
            return mine
        if time.monotonic() > deadline:
            raise AssertionError(f"{count} paused worker(s) of job {job_id} not seen within {timeout:.0f} s")
        await asyncio.sleep(0.5)


async def wait_status(client: DashboardClient, submission_id: str, timeout: float = 90.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        job = await client.job(submission_id)
        if job.terminal:
            return job
        if time.monotonic() > deadline:
            raise AssertionError(f"{submission_id} still {job.status} after {timeout:.0f} s")
        await asyncio.sleep(0.5)


def _submit(cluster: ClusterHandle, request: dict[str, Any]) -> CrashJob:
    async def run() -> CrashJob:
        async with cluster.client() as client:
            submitted = time.time()
            await client.submit_job(request)
            return CrashJob(
                request["submission_id"], await _job_id(client, request["submission_id"]), submitted
            )

    return asyncio.run(run())


def _stop(cluster: ClusterHandle, submission_id: str) -> None:
    async def run() -> None:
        async with cluster.client() as client:
            job = await client.job(submission_id)
            if not job.terminal:
                await client.stop_job(submission_id)
                await wait_status(client, submission_id, timeout=60)
            if job.job_id:
                await _wait_actors_gone(client, job.job_id)

    asyncio.run(run())


async def _wait_actors_gone(client: DashboardClient, job_id: str, timeout: float = 60.0) -> None:
    """Ray kills a stopped job's actors after the job reads terminal; the next test must not see them."""
    deadline = time.monotonic() + timeout
    while True:
        alive = await client.actors(filters=[("job_id", "=", job_id), ("state", "=", "ALIVE")])
        if not alive.rows:
            return
        if time.monotonic() > deadline:
            left = len(alive.rows)
            raise AssertionError(f"{left} actor(s) of stopped job {job_id} still alive after {timeout:.0f} s")
        await asyncio.sleep(0.5)


@contextmanager
def demo_crash_job(cluster: ClusterHandle, crash_at_step: int = 3) -> Iterator[CrashJob]:
    """The shipped `demo-crash` profile, crashing early (RolloutWorker_0 raises at CRASH_AT_STEP)."""
    profile = profiles.load(profiles.find("demo-crash"))
    submission_id = f"cockpit-test-crash-{uuid.uuid4().hex[:8]}"
    # One RolloutWorker: rank 0 crashes; the other ranks would be three more processes.
    extra = [f"crash_at_step={crash_at_step}", "step_seconds=0.3", "steps=1000", "rollout_workers=1"]
    request = profiles.render(profile, parse_overrides(extra), submission_id=submission_id)
    env = request["runtime_env"]["env_vars"]
    assert env.get("RAY_DEBUG_POST_MORTEM") == "1", "the demo-crash profile must turn post-mortem on"
    job = _submit(cluster, request)
    try:
        yield job
    finally:
        _stop(cluster, submission_id)


@contextmanager
def script_job(
    cluster: ClusterHandle, tmp_path: Path, source: str, env: dict[str, str]
) -> Iterator[CrashJob]:
    script = tmp_path / f"crash_{uuid.uuid4().hex[:6]}.py"
    script.write_text(source)
    submission_id = f"cockpit-test-crash-{uuid.uuid4().hex[:8]}"
    request = {
        "entrypoint": f"{sys.executable} {script}",
        "submission_id": submission_id,
        "runtime_env": {"env_vars": env},
        "entrypoint_num_cpus": 0,
    }
    job = _submit(cluster, request)
    try:
        yield job
    finally:
        _stop(cluster, submission_id)
