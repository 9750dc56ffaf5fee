"""The synthetic head (`tests/harness/synthetic_head.py`) answers in Ray 2.60's shapes (the captured
samples' keys), its answers read with the cockpit's own client and parsers, and its modes (the 10,000-row
cap, filters as Ray applies them, 500s, stalls, slow answers, churn, the counts) do what the scale tests
and benchmarks rely on."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cockpit.core.cluster.dashboard import DashboardClient
from cockpit.core.cluster.errors import DashboardError, DashboardUnreachable, RequestRejected
from tests.harness.synthetic_head import DEAD_NODES_CACHED, HeadShape, SyntheticHead

SHAPE = HeadShape(nodes=4, gpus=2, actors=30, jobs=3, dead=1, log_rate=0.0, log_lines=50)


@pytest.fixture(scope="module")
def head() -> Iterator[SyntheticHead]:
    with SyntheticHead(SHAPE, tick_s=3600) as server:
        yield server


def get(head: SyntheticHead, path: str) -> Any:
    with urllib.request.urlopen(head.url + path, timeout=30) as answer:
        return json.loads(answer.read())


def keys(value: Any) -> Any:
    """The shape of a JSON value: its keys, nested (lists by their first item)."""
    if isinstance(value, dict):
        return {k: keys(v) for k, v in value.items()}
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return [keys(value[0])]
    return None


def sample(samples_dir: Path, name: str) -> Any:
    return json.loads((samples_dir / name).read_text())


def test_the_node_summary_has_the_shape_of_ray_2_60(head: SyntheticHead, samples_dir: Path) -> None:
    real = sample(samples_dir, "nodes_summary_fakeamd.json")
    ours = get(head, "/nodes?view=summary")
    assert set(ours) == set(real) and set(ours["data"]) == set(real["data"])
    real_entry = next(e for e in real["data"]["summary"] if e["gpus"])
    entry = next(e for e in ours["data"]["summary"] if e["gpus"])
    assert set(entry) == set(real_entry)
    assert set(entry["raylet"]) == set(real_entry["raylet"])
    assert keys(entry["gpus"]) == keys(real_entry["gpus"])
    assert set(entry["agent"]) == set(real_entry["agent"])
    assert len(ours["data"]["summary"]) == SHAPE.nodes + SHAPE.dead


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/api/v0/nodes?detail=true", "v0_nodes.json"),
        ("/api/v0/actors?detail=true", "v0_actors.json"),
        ("/api/v0/placement_groups?detail=true", "v0_pgs.json"),
        ("/api/v0/actors/summarize", "v0_actors_summary.json"),
    ],
)
def test_state_lists_have_the_shape_of_ray_2_60(
    head: SyntheticHead, samples_dir: Path, path: str, name: str
) -> None:
    real, ours = sample(samples_dir, name), get(head, path)
    assert set(ours["data"]["result"]) == set(real["data"]["result"])
    rows, real_rows = ours["data"]["result"]["result"], real["data"]["result"]["result"]
    if isinstance(rows, list):
        assert set(rows[0]) == set(real_rows[0])
    else:
        assert set(rows) == set(real_rows)


def test_jobs_versions_and_status_have_the_shape_of_ray_2_60(head: SyntheticHead, samples_dir: Path) -> None:
    assert set(get(head, "/api/jobs/")[0]) == set(sample(samples_dir, "jobs_list.json")[0])
    assert set(get(head, "/api/version")) == set(sample(samples_dir, "version.json"))
    meta = sample(samples_dir, "cluster_meta.json")
    assert set(get(head, "/api/v0/cluster_metadata")["data"]) == set(meta["data"])
    status = get(head, "/api/cluster_status")["data"]
    real = sample(samples_dir, "cluster_status.json")["data"]
    assert set(status) == set(real)
    assert set(status["clusterStatus"]["autoscalerReport"]) == set(real["clusterStatus"]["autoscalerReport"])


async def test_the_cockpit_reads_every_answer(head: SyntheticHead) -> None:
    async with DashboardClient(head.url) as client:
        info = await client.cluster_info()
        assert info.ray_version == "2.60.0"
        assert await client.auth_mode() == "disabled"
        nodes = await client.nodes()
        assert len(nodes) == SHAPE.nodes + SHAPE.dead
        assert sum(n.state == "DEAD" for n in nodes) == SHAPE.dead
        workers = [n for n in nodes if n.alive and not n.is_head]
        assert workers and all(len(n.gpus) == SHAPE.gpus and n.has_gpu_telemetry for n in workers)
        assert all(g.processes for n in workers for g in n.gpus)
        actors = await client.actors(filters=[("state", "=", "ALIVE")])
        assert 0 < len(actors.rows) < SHAPE.actors and actors.meta.total == SHAPE.actors
        assert (await client.actor_summary()).total == SHAPE.actors
        jobs = await client.jobs()
        assert jobs[0].status == "RUNNING" and len(jobs) == SHAPE.jobs
        assert (await client.job(jobs[0].submission_id)).submission_id == jobs[0].submission_id
        assert "Active:" in (await client.cluster_status()).text
        assert len(await client.node_usage()) == SHAPE.nodes
        assert (await client.paused_workers()).rows == ()
        assert (await client.placement_groups()).rows
        assert (await client.tasks()).rows
        driver = nodes[0].node_id
        text = await client.log_file(
            node_id=driver, filename=f"job-driver-{jobs[0].submission_id}.log", lines=3
        )
        assert text == "".join(head.log_line(i) for i in range(47, 50))
        stream = client.stream_log([("node_id", driver), ("filename", "f")], lines=-1)
        got = b""
        async for chunk in stream:
            got += chunk
            if got.count(b"\n") >= 50:
                break
        await stream.aclose()
        assert got.decode() == "".join(head.log_line(i) for i in range(50))


def big_actors(n: int) -> HeadShape:
    return HeadShape(nodes=3, gpus=2, actors=n, jobs=1)


async def test_limits_and_filters_follow_ray() -> None:
    with SyntheticHead(big_actors(12_000), tick_s=3600) as head:
        async with DashboardClient(head.url) as client:
            with pytest.raises(RequestRejected, match="Given limit 10001 exceeds the supported limit 10000"):
                await client._get("/api/v0/actors", [("limit", "10001")])
            default = await client._get("/api/v0/actors", [])  # Ray's default limit is 100
            assert len(default["data"]["result"]["result"]) == 100
            everything = await client.actors(limit=10_000)
            meta = everything.meta  # the data source holds 10,000 of 12,000
            assert (meta.total, meta.num_after_truncation, meta.num_filtered, meta.returned) == (
                12_000,
                10_000,
                10_000,
                10_000,
            )
            ids = [a.actor_id for a in everything.rows]
            assert ids == sorted(ids)
            alive = await client.actors(filters=[("state", "=", "ALIVE")], limit=10)
            # the GCS filters `state`: 240 dead ones are filtered out there, 10,000 alive come back
            assert (alive.meta.num_after_truncation, alive.meta.num_filtered, alive.meta.returned) == (
                10_240,
                10_000,
                10,
            )
            not_dead = await client.actors(filters=[("state", "!=", "DEAD")], limit=10)
            assert not_dead.meta.num_after_truncation == 10_000 and not_dead.meta.num_filtered == 9_800
            dropped = await client._get(
                "/api/v0/actors", [("limit", "5"), ("filter_keys", "state"), ("filter_values", "DEAD")]
            )  # no predicate: Ray zips the lists, the filter is gone
            assert dropped["data"]["result"]["num_filtered"] == 10_000
            with pytest.raises(RequestRejected, match="filter column colour is not supported"):
                await client.actors(filters=[("colour", "=", "red")])


async def test_failures_stalls_and_slow_answers() -> None:
    with SyntheticHead(HeadShape(nodes=2, gpus=1), tick_s=3600) as head:
        async with DashboardClient(head.url, timeout=30) as client:
            head.fail = ("/api/jobs",)
            with pytest.raises(DashboardError, match="500"):
                await client.jobs()
            head.fail = ()
            assert await client.jobs()
            head.set_stall(True)
            asking = asyncio.ensure_future(client.version())
            while head.stats.snapshot()["in_flight"] == 0:
                await asyncio.sleep(0.01)
            assert not asking.done()
            head.set_stall(False)
            assert (await asking)["ray_version"] == "2.60.0"
        head.delay = 5.0
        async with DashboardClient(head.url, timeout=0.2) as impatient:
            with pytest.raises(DashboardUnreachable, match="did not answer"):
                await impatient.version()
        head.delay = 0.0


def test_churn_kills_joins_restarts_and_ends() -> None:
    head = SyntheticHead(HeadShape(nodes=20, gpus=1, actors=200, jobs=2, dead=DEAD_NODES_CACHED), tick_s=3600)
    cluster = head.cluster
    first_job = cluster.jobs[-1].submission_id
    cluster.advance(12, churn=True, now=2e9)
    alive = [n for n in cluster.nodes if n.state == "ALIVE"]
    dead = [n for n in cluster.nodes if n.state == "DEAD"]
    assert len(alive) == 20 and len(dead) == DEAD_NODES_CACHED  # 12 died, 12 joined, the oldest dead left
    assert max(n.index for n in alive) == 20 + DEAD_NODES_CACHED + 11
    assert any(a.restarts for a in cluster.actors) and any(a.state == "RESTARTING" for a in cluster.actors)
    assert cluster.jobs[-2].submission_id == first_job and cluster.jobs[-2].status == "SUCCEEDED"
    assert cluster.jobs[-1].status == "RUNNING"


async def test_a_job_started_by_churn_has_a_log_of_its_own() -> None:
    """A job the churn starts reads as a real new job's log: empty at its start, only its own lines,
    and no longer growing once it ended (so a reader from byte 0 is not handed the whole run's log)."""
    shape = HeadShape(nodes=3, gpus=1, actors=6, jobs=1, dead=0, log_rate=0.0, log_lines=40)
    with SyntheticHead(shape, tick_s=3600) as head:
        cluster = head.cluster
        shared = cluster.jobs[-1]
        cluster.advance(12, churn=True, now=2e9, log_at=40)
        started = cluster.jobs[-1]
        assert started is not shared and started.status == "RUNNING"

        async with DashboardClient(head.url) as client:

            async def read(job: Any, lines: int = -1) -> str:
                where = [
                    ("node_id", cluster.nodes[0].node_id),
                    ("filename", f"job-driver-{job.submission_id}.log"),
                ]
                return (await client.log_bytes(where, lines=lines)).decode()

            def written(first: int, end: int) -> str:
                return "".join(head.log_line(i) for i in range(first, end))

            assert await read(started) == ""
            head.shape.log_lines = 55
            assert await read(started) == written(40, 55)
            assert await read(started, lines=100) == written(40, 55)  # never before its start
            assert await read(shared, lines=3) == written(52, 55)  # the shared log goes on as before
            cluster.advance(24, churn=True, now=2e9 + 60, log_at=55)
            head.shape.log_lines = 70
            assert await read(started) == written(40, 55)  # ended: it holds what it wrote
            assert await read(cluster.jobs[-1]) == written(55, 70)
            assert await read(shared) == written(0, 70)


def test_stats_count_requests_and_bytes(head: SyntheticHead) -> None:
    head.stats.reset()
    with urllib.request.urlopen(head.url + "/api/jobs/", timeout=30) as answer:
        size = len(answer.read())
    get(head, "/api/jobs/")
    stats = get(head, "/__stats")
    assert stats["endpoints"]["/api/jobs/"]["requests"] == 2
    assert stats["endpoints"]["/api/jobs/"]["bytes"] == 2 * size
    assert stats["requests"] == 2 and "/__stats" not in stats["endpoints"]


async def test_an_older_ray_answers_as_it_did() -> None:
    with SyntheticHead(HeadShape(nodes=2, gpus=1, actors=3, ray_version="2.43.0"), tick_s=3600) as head:
        async with DashboardClient(head.url) as client:
            assert await client.auth_mode() == "absent"  # no token auth before 2.52
            assert (await client.cluster_info()).ray_version == "2.43.0"
            row = (await client._get("/api/v0/actors", [("detail", "true")]))["data"]["result"]["result"][0]
            assert "label_selector" not in row and "fallback_strategy" not in row
