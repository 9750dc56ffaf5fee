"""The cockpit against real heads of older Ray versions (2.43, which NeMo RL pins, 2.44 and 2.47), each
started from its own cached virtualenv and shared with the other tests of that version (`ray_head`).
Ray 2.44's log API frames every chunk with a status byte unless asked for text and reports a failed read
in the body: followed logs must equal the file byte for byte, across a forced drop too. The actor list,
the paused-worker discovery and a job's stacks work on each."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from pathlib import Path

import pytest

from cockpit.core.cluster.dashboard import DashboardClient
from cockpit.core.cluster.errors import DashboardError, NotFound
from cockpit.core.connect.connection import open_connection
from cockpit.core.debug.paused import PausedCache
from cockpit.core.debug.session import DebugSession, discover
from cockpit.core.doctor.errors import SelectionError
from cockpit.core.doctor.gather import take
from cockpit.core.doctor.selection import select
from cockpit.core.errors import is_permanent
from cockpit.core.logs.sources import LogSource, LogTail
from cockpit.core.targets import parse_target
from tests.harness.hang_jobs import SAVERS_STUCK
from tests.harness.ray_versions import OLD, OldHead
from tests.harness.relay import relay
from tests.harness.run import run_cockpit

pytestmark = [pytest.mark.ray_versions, pytest.mark.parametrize("ray_head", OLD, indirect=True)]

COUNTER = """import time
for i in range(1, 61):
    print(f"line {i:04d} " + "x" * 40, flush=True)
    time.sleep(0.05)
"""


@pytest.fixture
def head(ray_head: OldHead) -> OldHead:
    return ray_head


async def node_id(client: DashboardClient) -> str:
    return next(node.node_id for node in (await client.node_table()).rows if node.is_head)


def test_status_names_the_old_version(head: OldHead) -> None:
    answer = run_cockpit("status", head.url, "--json")
    assert answer.returncode == 0, answer.stderr
    assert json.loads(answer.stdout)["ray_version"] == head.version


def test_memory_reads_each_version_s_nodes_and_threshold(head: OldHead) -> None:
    """`cockpit memory` on an older head: its nodes against a kill threshold (the one its raylet logged,
    where that Ray logs it; else Ray's default), and no kill, without a warning of a list it refused."""
    answer = run_cockpit("memory", head.url, "--json")
    assert answer.returncode == 0, answer.stderr
    doc = json.loads(answer.stdout)
    assert doc["nodes"] and all(n["threshold"]["bytes"] > 0 for n in doc["nodes"] if n["alive"])
    assert {n["threshold"]["source"] for n in doc["nodes"]} <= {"raylet.out", "Ray's default"}
    assert doc["kills"] == [] and doc["warnings"] == [], doc["warnings"]


def test_a_token_file_on_a_ray_without_token_auth_is_one_line(head: OldHead, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("not-needed-here\n")
    token.chmod(0o600)
    answer = run_cockpit("status", head.url, "--token-file", str(token))
    assert answer.returncode == 0, answer.stderr
    notes = [line for line in answer.stderr.splitlines() if line.strip()]
    assert notes == [
        "cockpit: note: this cluster's Ray has no token auth (it came with Ray 2.52): "
        "--token-file is not used."
    ]


def test_followed_driver_log_equals_the_file(head: OldHead) -> None:
    script = head.temp_dir / "counter.py"
    script.write_text(COUNTER)

    async def submit() -> str:
        async with DashboardClient(head.url) as client:
            return await client.submit_job(
                {"entrypoint": f"python {script}", "submission_id": "count-follow"}
            )

    job = asyncio.run(submit())
    followed = run_cockpit("logs", head.url, job, "--follow", timeout=120)
    assert followed.returncode == 0, followed.stderr
    file = (head.logs / f"job-driver-{job}.log").read_bytes()
    # stdout is the driver log, then one line with the job's end.
    body, _, last = followed.stdout.encode().rstrip(b"\n").rpartition(b"\n")
    assert body + b"\n" == file and b"line 0060" in file
    assert last.decode().strip() == f"{job}: SUCCEEDED"
    assert not any(line.startswith(b"1line") for line in file.splitlines())  # the framing is gone


async def test_a_stream_cut_mid_way_resumes_with_the_file_s_bytes(head: OldHead) -> None:
    first = b"".join(b"step=%d reward=0.%d\n" % (i, i % 10) for i in range(4000))
    whole = first + b"".join(b"step=%d reward=0.%d\n" % (i, i % 10) for i in range(4000, 4200))
    path = head.logs / "cut-mid-way.log"
    path.write_bytes(first)
    received = bytearray()
    events: list[str] = []
    async with relay(head.url) as link, DashboardClient(link.url) as client:
        source = LogSource.file(await node_id(client), path.name)
        tail = LogTail(client, source, lines=-1, on_event=events.append, interval=0.2)

        async def collect() -> None:
            async for chunk in tail.chunks():
                received.extend(chunk)

        collector = asyncio.ensure_future(collect())
        while len(received) < len(first) and not collector.done():
            await asyncio.sleep(0.05)
        link.cut()
        with path.open("ab") as log:
            log.write(whole[len(first) :])
        while len(received) < len(whole) and not collector.done():
            await asyncio.sleep(0.05)
        collector.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await collector
    assert bytes(received) == whole
    assert tail.resumes >= 1, events


async def test_a_missing_file_is_a_clear_not_found(head: OldHead) -> None:
    """Read up to 3 times: a Ray 2.44.1 head now and then answers an empty 200 for a file that is not
    there (two whole runs of many, here and in the contract test), and a 2.47.1 head once answered its
    bare 500 (the read racing the stream the test before closed: the cockpit calls it transient and a
    follow retries it); anything but NotFound, nothing or a transient error fails."""
    async with DashboardClient(head.url) as client:
        node = await node_id(client)
        missing = [("node_id", node), ("filename", "no-such.log")]
        for read in (
            lambda: client.log_bytes(missing, lines=10),
            lambda: client.log_file(node_id=node, filename="no-such.log", lines=10),
        ):
            for _ in range(3):
                try:
                    got = await read()
                except NotFound as exc:
                    assert "not found" in str(exc)
                    break
                except DashboardError as exc:
                    if is_permanent(exc):
                        raise
                    await asyncio.sleep(0.5)
                    continue
                assert not got, "bytes of a file that is not there"
            else:
                pytest.fail("no NotFound for a file that is not there, in 3 reads")


ACTORS_AND_A_CRASH = """
import ray

ray.init()


@ray.remote(num_cpus=0)
class RolloutWorker:
    def ping(self):
        return "pong"


@ray.remote(num_cpus=0)
def load_shard(index):
    rows = [index] * 3
    raise ValueError(f"corrupt shard {index}")


workers = [RolloutWorker.options(name=f"rollout_{i}").remote() for i in range(2)]
assert ray.get([w.ping.remote() for w in workers]) == ["pong", "pong"]
print("actors up", flush=True)
try:
    ray.get(load_shard.remote(7))
except Exception as exc:
    print("failed as planned:", type(exc).__name__, flush=True)
"""


def test_actor_list_and_a_paused_worker(head: OldHead) -> None:
    """Two named actors listed with their role; a task raising with post-mortem on is found paused,
    its exception read by a peek, and released: the job then goes on (its driver catches the error)."""
    script = head.temp_dir / "actors_and_a_crash.py"
    script.write_text(ACTORS_AND_A_CRASH)
    job = f"actors-crash-{head.version}"

    async def submit() -> None:
        async with DashboardClient(head.url) as client:
            env = {"RAY_DEBUG_POST_MORTEM": "1"}
            request = {
                "entrypoint": f"python {script}",
                "submission_id": job,
                "runtime_env": {"env_vars": env},
            }
            await client.submit_job(request)

    asyncio.run(submit())
    listed: dict[str, object] = {}
    for _ in range(120):
        answer = run_cockpit("debug", head.url, "--json")
        assert answer.returncode == 0, answer.stderr
        listed = json.loads(answer.stdout)
        sessions = listed["sessions"]
        if isinstance(sessions, list) and sessions and all(s["task_name"] for s in sessions):
            break
        time.sleep(0.5)
    sessions = listed["sessions"]
    assert isinstance(sessions, list) and len(sessions) == 1, listed
    (session,) = sessions
    assert session["task_name"] == "load_shard"
    assert (
        session["exception"]["type"] == "ValueError" and "corrupt shard 7" in session["exception"]["message"]
    )

    actors = run_cockpit("actors", head.url, "--json", "--filter", "class:RolloutWorker")
    assert actors.returncode == 0, actors.stderr
    rows = json.loads(actors.stdout)["actors"]
    assert sorted(a["name"] for a in rows if a["state"] == "ALIVE") == ["rollout_0", "rollout_1"]
    assert {a["role"] for a in rows} == {"rollout"}

    async def release() -> str:
        async with open_connection(parse_target(head.url)) as connection:
            listing = await discover(connection, PausedCache(), legacy=False)
            (worker,) = listing.workers
            live = await DebugSession.attach(connection, worker)
            await live.release()
            for _ in range(120):
                status = (await connection.client.job(job)).status
                if status in ("SUCCEEDED", "FAILED", "STOPPED"):
                    return status
                await asyncio.sleep(0.5)
            return "still running"

    assert asyncio.run(release()) == "SUCCEEDED"
    log = (head.logs / f"job-driver-{job}.log").read_text()
    assert "failed as planned: RayTaskError(ValueError)" in log or "failed as planned: ValueError" in log


def test_stacks_of_a_job(head: OldHead) -> None:
    """The job's processes found through this version's lists (jobs' driver_info, actors, tasks) and
    their stacks taken with the py-spy next to this version's Python, grouped."""
    script = head.temp_dir / "stuck.py"
    script.write_text(SAVERS_STUCK)
    job = f"stuck-{head.version}"

    async def run() -> dict[str, list[str]]:
        async with open_connection(parse_target(head.url)) as connection:
            await connection.client.submit_job({"entrypoint": f"python {script}", "submission_id": job})
            try:
                found: dict[str, list[str]] = {}
                for _ in range(120):
                    with contextlib.suppress(SelectionError):
                        selection = await select(connection.client, job=job)
                        report = await take(connection, selection, local=True)
                        found = {g.label: sorted(m.who for m in g.members) for g in report.groups}
                        if found.get("in wait_for_checkpoint_barrier") == ["Saver_0", "Saver_1"]:
                            assert any(m.kind == "driver" for g in report.groups for m in g.members)
                            return found
                    await asyncio.sleep(0.5)
                return found
            finally:
                await connection.client.stop_job(job)

    found = asyncio.run(run())
    assert found.get("in wait_for_checkpoint_barrier") == ["Saver_0", "Saver_1"], found
