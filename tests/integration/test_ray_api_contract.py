"""Contract tests of every DashboardClient call against the real local Ray cluster."""

from __future__ import annotations

import socket
import time

import pytest

from cockpit.core.ray_api import (
    DashboardClient,
    DashboardUnreachable,
    NotFound,
    RequestRejected,
)
from cockpit.core.snapshots import NA
from tests.harness.cluster import ClusterHandle

pytestmark = pytest.mark.cluster

ROLES = {"RolloutWorker", "PolicyTrainer", "ReferencePolicy", "Critic", "RewardModel"}


@pytest.fixture
async def client(ray_cluster: ClusterHandle):  # type: ignore[no-untyped-def]
    async with ray_cluster.client() as c:
        yield c


async def test_version_info_and_auth_mode(client: DashboardClient) -> None:
    version = await client.version()
    assert version["version"] == "4" and version["ray_version"]
    info = await client.cluster_info()
    assert info.ray_version == version["ray_version"]
    assert info.python_version != NA and info.session_name.startswith("session_")
    assert await client.auth_mode() == "token"  # local clusters use token auth by default


async def test_nodes_merge_table_and_stats(client: DashboardClient) -> None:
    table = await client.node_table()
    alive = [n for n in table.rows if n.alive]
    assert len(alive) >= 3 and table.meta.complete
    nodes = await client.nodes(fresh=True)
    head = nodes[0]
    assert head.is_head and head.alive
    assert sum(1 for n in nodes if n.is_head) == 1
    for node in (n for n in nodes if n.alive):
        assert node.logical_gpus == 2.0
        assert not node.has_gpu_telemetry  # logical GPUs only: the reporter sees no hardware
        assert node.start_time and node.start_time < time.time()
        assert node.mem_total_bytes is not NA and node.cpu_percent is not NA
        assert node.object_store_total_bytes is not NA and node.object_store_total_bytes > 0


async def test_cluster_status_text(client: DashboardClient) -> None:
    status = await client.cluster_status()
    assert "Node status" in status.text and "GPU" in status.text


async def test_actors_with_filters_and_truncation(client: DashboardClient, demo_job: str) -> None:
    job_id = (await client.job(demo_job)).job_id
    listing = await client.actors(filters=[("state", "=", "ALIVE"), ("job_id", "=", job_id)])
    assert all(a.job_id == job_id for a in listing.rows)
    roles = {a.class_name for a in listing.rows}
    assert roles >= ROLES
    trainer = next(a for a in listing.rows if a.name == "PolicyTrainer")
    assert trainer.gpus == 1.0 and trainer.pid and trainer.node_id
    rollouts = [a for a in listing.rows if a.class_name == "RolloutWorker"]
    assert len(rollouts) == 4 and all(a.gpus == 0.5 for a in rollouts)
    assert len({a.node_id for a in listing.rows if a.class_name in ROLES}) >= 2  # spread over nodes
    one = await client.actors(
        filters=[("class_name", "=", "RolloutWorker"), ("job_id", "=", job_id)], limit=1
    )
    assert len(one.rows) == 1 and one.meta.limited and one.meta.num_filtered >= 4
    assert "showing 1 of" in one.meta.describe()


async def test_bad_filter_is_a_one_line_error(client: DashboardClient) -> None:
    with pytest.raises(RequestRejected) as info:
        await client.actors(filters=[("no_such_column", "=", "x")])
    assert "no_such_column" in str(info.value) and "\n" not in str(info.value)


async def test_tasks_and_workers(client: DashboardClient, demo_job: str) -> None:
    tasks = await client.tasks(filters=[("name", "=", "RolloutWorker.generate")], limit=20)
    assert tasks.rows and all(t.type == "ACTOR_TASK" for t in tasks.rows)
    workers = await client.workers(filters=[("worker_type", "=", "WORKER")])
    assert workers.rows and all(w.pid for w in workers.rows)
    paused = await client.paused_workers()
    assert paused.rows == ()  # nothing is in the post-mortem debugger


async def test_jobs_job_and_driver_log(client: DashboardClient, demo_job: str) -> None:
    jobs = await client.jobs()
    job = next(j for j in jobs if j.submission_id == demo_job)
    assert job.status == "RUNNING" and job.driver_node_id
    assert (await client.job(demo_job)).submission_id == demo_job
    deadline = time.monotonic() + 60
    log = ""
    while "step=" not in log and time.monotonic() < deadline:
        log = await client.log_file(node_id=job.driver_node_id, submission_id=demo_job, lines=50)
    assert "reward=" in log and "throughput=" in log


async def test_actor_log_and_node_log_files(client: DashboardClient, demo_job: str) -> None:
    trainer = next(a for a in (await client.actors(filters=[("name", "=", "PolicyTrainer")])).rows)
    text = await client.log_file(actor_id=trainer.actor_id, lines=20)
    assert "PolicyTrainer up on" in text or "policy update" in text
    index = await client.log_index(trainer.node_id)
    assert index.files.get("raylet") and index.files.get("worker_out")
    raylet = await client.log_file(node_id=trainer.node_id, filename="raylet.out", lines=5)
    assert 0 < len(raylet.splitlines()) <= 5


async def test_submit_and_stop_a_job(client: DashboardClient, ray_cluster: ClusterHandle) -> None:
    import sys

    submission_id = await client.submit_job(
        {
            "entrypoint": f"{sys.executable} -c 'import time; time.sleep(120)'",
            "submission_id": "contract-stop",
        }
    )
    assert submission_id == "contract-stop"
    assert await client.stop_job(submission_id) is True
    deadline = time.monotonic() + 30
    while (job := await client.job(submission_id)).status not in (
        "STOPPED",
        "FAILED",
    ) and time.monotonic() < deadline:
        pass
    assert job.status == "STOPPED" and job.terminal


async def test_unknown_job_is_not_found(client: DashboardClient) -> None:
    with pytest.raises(NotFound):
        await client.job("no-such-job")


async def test_unreachable_dashboard_is_one_sentence() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with DashboardClient(f"http://127.0.0.1:{port}") as dead:
        with pytest.raises(DashboardUnreachable) as info:
            await dead.version()
    assert f"127.0.0.1:{port}" in str(info.value) and "\n" not in str(info.value)


def test_limit_is_checked_before_sending() -> None:
    client = DashboardClient("http://127.0.0.1:9")
    with pytest.raises(ValueError, match="limit"):
        import asyncio

        asyncio.run(client.actors(limit=20_000))
