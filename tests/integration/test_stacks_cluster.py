"""The run doctor's stacks on the real local cluster, with real py-spy against real Ray workers: the
demo-hang job's stuck rank as a group of one, the ranks waiting for it as their own group, the idle
actors as one group; through the command line, through a real sshd (py-spy over SSH, profiling off on
the head), and through the dashboard's own endpoint on a cluster started with profiling on."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from cockpit.core.cluster.errors import ProfilingDisabled
from cockpit.core.connect.connection import open_connection
from cockpit.core.doctor.gather import take
from cockpit.core.doctor.selection import select
from cockpit.core.local import record
from cockpit.core.targets import parse_target
from tests.harness.cluster import ClusterHandle, running_cluster
from tests.harness.debug_jobs import _stop, _submit
from tests.harness.hang_jobs import SAVERS_STUCK, HungJob, alive_actor_pids, labels, wait_hung
from tests.harness.run import run_cockpit
from tests.harness.sshd import SshServer, start_sshd

pytestmark = [pytest.mark.cluster]


def _check_groups(doc: dict, actor_pids: set[int]) -> None:
    groups = doc["groups"]
    stuck = [g for g in groups if "wait_for_weights_sync" in g["label"]]
    assert len(stuck) == 1 and stuck[0]["count"] == 1, [g["label"] for g in groups]
    assert stuck[0]["members"][0]["actor_name"] == "RolloutWorker_0"
    assert stuck[0]["roles"] == ["rollout"]
    waiting = [g for g in groups if "all_gather_weights" in g["label"]]
    assert len(waiting) == 1 and waiting[0]["label"] == "in ray.get in all_gather_weights"
    assert sorted(m["actor_name"] for m in waiting[0]["members"]) == [f"RolloutWorker_{i}" for i in (1, 2, 3)]
    # The odd one out comes before the group of three; the idle actors are one group, last.
    assert groups.index(stuck[0]) < groups.index(waiting[0])
    assert groups[-1]["idle"] and groups[-1]["label"] == "idle in Ray's task loop"
    assert {"PolicyTrainer", "Critic"} <= {m["actor_name"] for m in groups[-1]["members"]}
    assert not any(g["idle"] for g in groups[:-1])
    # Every alive actor of the job is in exactly one group; the driver is there too.
    pids = [m["pid"] for g in groups for m in g["members"]]
    assert len(pids) == len(set(pids))
    assert actor_pids <= set(pids)
    assert any(m["kind"] == "driver" for g in groups for m in g["members"])


def test_stacks_of_the_demo_hang_job_from_the_command_line(
    ray_cluster: ClusterHandle, demo_job: str, hung_demo: HungJob
) -> None:
    job = hung_demo  # the session's demo-hang job, hung (shared with the other tests that only look)

    async def hung() -> set[int]:
        async with open_connection(parse_target("local")) as connection:
            await wait_hung(connection, job.job_id, local=True)
            return await alive_actor_pids(connection.client, job.job_id)

    actor_pids = asyncio.run(hung())
    done = run_cockpit("stacks", "local", "--job", job.submission_id, "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["source"] == "local"
    _check_groups(doc, actor_pids)

    text = run_cockpit("stacks", "local", "--job", job.job_id)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].startswith("1 process in ") or lines[1].startswith("1 process in ")
    assert any("wait_for_weights_sync (" in line and "trainer.py:" in line for line in lines)
    assert any(line.startswith("3 processes in ray.get in all_gather_weights · rollout") for line in lines)

    rank0 = next(
        m["actor_id"] for g in doc["groups"] for m in g["members"] if m["actor_name"] == "RolloutWorker_0"
    )
    # The session's demo job has a RolloutWorker_0 too: the name alone is ambiguous, and says so.
    both = run_cockpit("stacks", "local", "--actor", "RolloutWorker_0")
    # (at least 2: an earlier test's job may still be going.)
    ambiguous = re.match(r"cockpit: 'RolloutWorker_0' matches (\d+) actors: ", both.stderr)
    assert both.returncode == 1 and ambiguous and int(ambiguous.group(1)) >= 2, both.stderr
    assert rank0[:12] in both.stderr and f"(job {job.job_id})" in both.stderr
    one = run_cockpit("stacks", "local", "--actor", rank0[:16], "--json")
    assert one.returncode == 0, one.stderr
    (group,) = json.loads(one.stdout)["groups"]
    assert group["label"] == "in wait_for_weights_sync" and group["count"] == 1


def test_unknown_job_is_one_line(ray_cluster: ClusterHandle) -> None:
    done = run_cockpit("stacks", "local", "--job", "no-such-job-xyz")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "cockpit: no job no-such-job-xyz on the cluster (`cockpit jobs TARGET` lists them)."
    ]


@pytest.fixture(scope="module")
def head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    server = start_sshd(tmp_path_factory.mktemp("stacks-sshd"))
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.ssh
def test_stacks_over_ssh_with_profiling_off(
    ray_cluster: ClusterHandle, head: SshServer, tmp_path: Path, hung_demo: HungJob
) -> None:
    config = tmp_path / "ssh_config"
    config.write_text(head.ssh_config_entry("head-node"))
    job = hung_demo  # the session's demo-hang job, hung

    async def run() -> None:
        options = ray_cluster.over_ssh(config)
        async with open_connection(parse_target("head-node"), options) as connection:
            assert connection.link is not None
            assert await connection.client.profiling_enabled() is False
            with pytest.raises(ProfilingDisabled):
                selection = await select(connection.client, job=job.job_id)
                await take(connection, selection, via="dashboard")
            report = await wait_hung(connection, job.job_id)
            assert report.source == "ssh"
            assert not report.missing_nodes and not report.failures, report.failures
            actor_pids = await alive_actor_pids(connection.client, job.job_id)
            assert actor_pids <= {m.pid for g in report.groups for m in g.members}
            assert labels(report)["in wait_for_weights_sync"] == ["RolloutWorker_0"]

    asyncio.run(run())


@pytest.fixture(scope="module")
def profiling_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterHandle]:
    """A second, one-node cluster whose head serves `/worker/traceback` (RAY_DASHBOARD_ENABLE_PROFILING=1)."""
    state_dir = tmp_path_factory.mktemp("profiling-cluster")
    previous = os.environ.get("RAY_DASHBOARD_ENABLE_PROFILING")
    os.environ["RAY_DASHBOARD_ENABLE_PROFILING"] = "1"
    try:
        with running_cluster(state_dir, nodes=1, gpus=0) as handle:
            os.environ.pop("RAY_DASHBOARD_ENABLE_PROFILING", None)
            yield handle
    finally:
        if previous is None:
            os.environ.pop("RAY_DASHBOARD_ENABLE_PROFILING", None)
        else:
            os.environ["RAY_DASHBOARD_ENABLE_PROFILING"] = previous


def test_stacks_through_the_dashboard_endpoint(profiling_cluster: ClusterHandle, tmp_path: Path) -> None:
    script = tmp_path / f"stuck_{uuid.uuid4().hex[:6]}.py"
    script.write_text(SAVERS_STUCK)
    submission_id = f"cockpit-test-stuck-{uuid.uuid4().hex[:8]}"
    job = _submit(
        profiling_cluster,
        {
            "entrypoint": f"{sys.executable} {script}",
            "submission_id": submission_id,
            "entrypoint_num_cpus": 0,
        },
    )
    url = profiling_cluster.url
    token = ["--token-file", str(record.token_file(profiling_cluster.state_dir))]
    try:
        doc: dict = {}
        for _ in range(60):
            done = run_cockpit("stacks", url, "--job", job.job_id, "--json", *token)
            assert done.returncode == 0, done.stderr
            doc = json.loads(done.stdout)
            if any("wait_for_checkpoint_barrier" in g["label"] for g in doc["groups"]):
                break
            asyncio.run(asyncio.sleep(1))
        assert doc["source"] == "dashboard", doc["notes"]
        stuck = next(g for g in doc["groups"] if "wait_for_checkpoint_barrier" in g["label"])
        assert stuck["label"] == "in wait_for_checkpoint_barrier"
        assert sorted(m["actor_name"] for m in stuck["members"]) == ["Saver_0", "Saver_1"]
        assert doc["groups"][-1]["idle"] and "IdleOne" in [
            m["actor_name"] for m in doc["groups"][-1]["members"]
        ]
        frames = [f["function"] for f in stuck["threads"][0]["frames"]]
        assert frames[:2] == ["wait_for_checkpoint_barrier", "Saver.save"]
    finally:
        _stop(profiling_cluster, submission_id)
