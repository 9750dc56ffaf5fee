"""Provides test jobs on the session cluster that leave actors in the states the Actors views explain:
placement groups and an actor that can never be placed (stuck), and a job whose actors died (dead)."""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.harness.cluster import ClusterHandle

DEMO_ROLES = {
    "RolloutWorker": "rollout",
    "PolicyTrainer": "policy",
    "ReferencePolicy": "reference",
    "Critic": "critic",
    "RewardModel": "reward",
}
"""The demo job's actor classes (cockpit/demo/trainer.py) and the role each must be shown with."""

UNPLACEABLE = """
import time
import ray
from ray.util.placement_group import placement_group

ray.init()
big = placement_group([{"GPU": 8}], name="cockpit_test_big")
spread = placement_group([{"GPU": 1}] * 4, strategy="STRICT_SPREAD", name="cockpit_test_spread")


@ray.remote(num_gpus=8)
class HugeLearner:
    pass


huge = HugeLearner.options(name="cockpit_test_huge").remote()
print("asked", flush=True)
time.sleep(3600)
"""
"""A bundle of more GPUs than any node has (8 > 2), a STRICT_SPREAD group that needs a 4th node of the
3, and an actor asking for 8 GPUs."""

DOOMED = """
import ray

ray.init()


@ray.remote(num_cpus=0)
class DoomedWorker:
    def ping(self):
        return "pong"


@ray.remote(num_cpus=0)
class CrashingRollout:
    def __init__(self):
        raise ValueError("rollout engine failed to start: CUDA out of memory (test)")

    def ping(self):
        return "pong"


doomed = DoomedWorker.options(name="cockpit_test_doomed").remote()
assert ray.get(doomed.ping.remote()) == "pong"
ray.kill(doomed)
crashing = CrashingRollout.options(name="cockpit_test_crashing").remote()
try:
    ray.get(crashing.ping.remote())
except Exception as exc:
    print("crashed as planned:", type(exc).__name__, flush=True)
"""
"""Two actors that end dead: one killed (`ray.kill`), one whose constructor raised."""


@contextmanager
def unplaceable_job(cluster: ClusterHandle, tmp_path: Path) -> Iterator[str]:
    """Submit UNPLACEABLE (under a new submission id each time) and wait until the dashboard and
    `ray status` show it pending; stop it on exit and wait until its placement groups are removed."""
    script = tmp_path / "unplaceable.py"
    script.write_text(UNPLACEABLE)
    job = f"cockpit-test-unplaceable-{uuid.uuid4().hex[:8]}"

    async def submit() -> None:
        async with cluster.client() as client:
            await client.submit_job({"entrypoint": f"{sys.executable} {script}", "submission_id": job})
            for _ in range(120):
                pgs = await client.placement_groups(filters=[("state", "=", "PENDING")])
                actors = await client.actors(filters=[("state", "=", "PENDING_CREATION")])
                # The strategy is only in `ray status`, which the autoscaler refreshes every few seconds.
                demands = (await client.cluster_status()).text
                if len(pgs.rows) >= 2 and actors.rows and "STRICT_SPREAD" in demands:
                    return
                await asyncio.sleep(0.5)
            raise AssertionError("the placement groups did not come up as PENDING within 60 s")

    async def clean_up() -> None:
        async with cluster.client() as client:
            await client.stop_job(job)
            for _ in range(120):  # the driver's exit removes its placement groups and actors
                pgs = await client.placement_groups(filters=[("creator_job_id", "!=", "ffffffff")])
                left = [
                    pg for pg in pgs.rows if pg.name.startswith("cockpit_test_") and pg.state != "REMOVED"
                ]
                # `ray status` (the autoscaler's report, refreshed every few seconds) must forget the
                # demands too, or the next test would read them as stuck.
                if not left and "'GPU': 8.0" not in (await client.cluster_status()).text:
                    return
                await asyncio.sleep(0.5)
            raise AssertionError(f"placement groups or demands left after the job stopped: {left}")

    asyncio.run(submit())
    try:
        yield job
    finally:
        asyncio.run(clean_up())


def finished_job_with_dead_actors(cluster: ClusterHandle, tmp_path: Path) -> str:
    """Run DOOMED to its end; returns its Ray job id (its two actors are DEAD, with their causes)."""
    script = tmp_path / "doomed.py"
    script.write_text(DOOMED)
    job = f"cockpit-test-doomed-{uuid.uuid4().hex[:8]}"

    async def run() -> str:
        async with cluster.client() as client:
            await client.submit_job({"entrypoint": f"{sys.executable} {script}", "submission_id": job})
            for _ in range(240):
                found = next((j for j in await client.jobs() if j.submission_id == job), None)
                if found is not None and found.terminal:
                    assert found.status == "SUCCEEDED", found.message
                    return found.job_id
                await asyncio.sleep(0.5)
            raise AssertionError(f"{job} did not finish within 120 s")

    return asyncio.run(run())
