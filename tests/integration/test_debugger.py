"""The post-mortem debugger on the real local cluster: discovery, peek, attach, evaluate, leave paused,
release (the job then fails with the original error), over plain TCP and through a real sshd; groups
of identical errors; the legacy pdb console; `cockpit debug` in a real terminal."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cockpit.core.connect.connection import ConnectOptions, open_connection
from cockpit.core.debug.legacy_pdb import find_legacy
from cockpit.core.debug.paused import PausedCache, group_paused
from cockpit.core.debug.session import DebugSession, LegacySession, discover, settle
from cockpit.core.targets import parse_target
from tests.harness.cluster import ClusterHandle
from tests.harness.debug_jobs import (
    CRASH_LINE,
    LEGACY_CRASH,
    POST_MORTEM,
    TWIN_CRASH,
    demo_crash_job,
    script_job,
    wait_paused,
    wait_status,
)
from tests.harness.run import run_cockpit
from tests.harness.sshd import SshServer, listening_addresses, start_sshd
from tests.harness.terminal import Terminal

pytestmark = [pytest.mark.cluster]


async def _attach_inspect_release(
    connection_options: ConnectOptions | None, target: str, job_id: str, sid: str
) -> None:
    async with open_connection(parse_target(target), connection_options) as connection:
        client = connection.client
        (worker,) = await wait_paused(client, job_id)
        assert worker.task_name == "RolloutWorker.generate" and worker.port > 0

        # Discovery peeks: the exception is known and the worker is paused again right after.
        cache = PausedCache()
        listing = await discover(connection, cache, legacy=False)
        mine = next(w for w in listing.workers if w.job_id == job_id)
        assert mine.exception is not None, mine.note
        assert mine.exception.type_name == "RuntimeError"
        assert "NaN in logits at step 3" in mine.exception.message
        assert mine.exception.where == f"trainer.py:{CRASH_LINE} in generate"
        (again,) = await wait_paused(client, job_id, timeout=30)

        session = await DebugSession.attach(connection, again)
        assert session.exception.type_name == "RuntimeError"
        top = session.frames[session.first_user_frame()]
        assert (top.name, top.path.endswith("trainer.py"), top.line) == ("generate", True, CRASH_LINE)
        assert (await session.client.evaluate("step", top.id)).value == "3"
        assert (await session.client.evaluate("self.rank", top.id)).value == "0"
        source = await session.source(top.path, top.source_reference)
        assert source is not None and "NaN in logits" in source.splitlines()[top.line - 1]

        # `d`: left paused, listed again, attachable again; the frame's variables are untouched.
        await session.leave_paused()
        (again,) = await wait_paused(client, job_id, timeout=30)
        session = await DebugSession.attach(connection, again)
        local_names = [
            v.name
            for scope in (await session.client.scopes(session.frames[session.first_user_frame()].id))[:1]
            for v in await session.client.variables(scope.variables_reference)
        ]
        assert not [name for name in local_names if name.startswith("_cockpit")], local_names

        # `c`: released; the job sees the original error.
        await session.release()
        job = await wait_status(client, sid)
        assert job.status == "FAILED"
        assert "NaN in logits at step 3" in job.message


def test_demo_crash_pauses_and_is_debugged_to_its_failure(ray_cluster: ClusterHandle) -> None:
    with demo_crash_job(ray_cluster) as job:
        asyncio.run(_attach_inspect_release(None, "local", job.job_id, job.submission_id))


@pytest.fixture(scope="module")
def head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    server = start_sshd(tmp_path_factory.mktemp("debug-sshd"))
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.ssh
def test_attach_through_the_ssh_link_opens_no_port(
    ray_cluster: ClusterHandle, head: SshServer, tmp_path: Path
) -> None:
    config = tmp_path / "ssh_config"
    config.write_text(head.ssh_config_entry("head-node"))
    before = set(listening_addresses(os.getpid()))
    with demo_crash_job(ray_cluster) as job:

        async def run() -> None:
            options = ray_cluster.over_ssh(config)
            async with open_connection(parse_target("head-node"), options) as connection:
                assert connection.link is not None
                (worker,) = await wait_paused(connection.client, job.job_id)
                session = await DebugSession.attach(connection, worker)
                # The DAP stream is an SSH channel: this process listens on nothing new.
                assert set(listening_addresses(os.getpid())) == before
                top = session.frames[session.first_user_frame()]
                assert (await session.client.evaluate("step", top.id)).value == "3"
                await session.release()
                finished = await wait_status(connection.client, job.submission_id)
                assert finished.status == "FAILED" and "NaN in logits" in finished.message

        asyncio.run(run())


def test_two_workers_with_the_same_error_are_one_group(ray_cluster: ClusterHandle, tmp_path: Path) -> None:
    with script_job(ray_cluster, tmp_path, TWIN_CRASH, POST_MORTEM) as job:

        async def run() -> None:
            async with open_connection(parse_target("local")) as connection:
                await wait_paused(connection.client, job.job_id, count=2)
                listing = await discover(connection, PausedCache(), legacy=False)
                mine = [w for w in listing.workers if w.job_id == job.job_id]
                groups = group_paused(mine)
                assert len(groups) == 1, [w.exception for w in mine]
                (group,) = groups
                assert len(group.members) == 2
                assert group.exception is not None and group.exception.type_name == "ValueError"
                assert "checksum mismatch" in group.exception.message
                for worker in group.members:  # the group's release, as the Debugger screen does it
                    session = await DebugSession.attach(connection, worker)
                    await session.release()
                finished = await wait_status(connection.client, job.submission_id)
                assert finished.status == "SUCCEEDED"  # the driver caught both errors

        asyncio.run(run())


def test_legacy_pdb_session_is_listed_and_answers(ray_cluster: ClusterHandle, tmp_path: Path) -> None:
    env = {**POST_MORTEM, "RAY_DEBUG": "legacy"}
    with script_job(ray_cluster, tmp_path, LEGACY_CRASH, env) as job:

        async def run() -> None:
            async with open_connection(parse_target("local")) as connection:
                client = connection.client
                found = []
                for _ in range(120):
                    found = [
                        w for w in await find_legacy(client, await client.jobs()) if w.job_id == job.job_id
                    ]
                    if found:
                        break
                    await asyncio.sleep(0.5)
                assert len(found) == 1, "the legacy session was not listed within 60 s"
                (worker,) = found
                assert worker.mode == "legacy" and worker.task_name == "bad_task" and worker.port > 0
                head = next(n.node_id for n in (await client.node_table()).rows if n.is_head)
                session = await LegacySession.attach(connection, worker, head)
                assert 'raise ValueError(f"boom {y}")' in session.banner
                summary = session.summary()
                assert summary is not None and summary.type_name == "ValueError"
                assert summary.where.endswith("in bad_task")
                assert (await session.console.run("p y")).strip() == "2"
                await session.console.run("c")
                assert session.console.closed
                finished = await wait_status(client, job.submission_id)
                assert finished.status == "SUCCEEDED"

        asyncio.run(run())


def test_debug_cli_lists_json_and_console_in_a_terminal(ray_cluster: ClusterHandle) -> None:
    with demo_crash_job(ray_cluster) as job:

        async def paused() -> None:
            async with ray_cluster.client() as client:
                await wait_paused(client, job.job_id)

        asyncio.run(paused())
        listed = run_cockpit("debug", "local", "--json")
        assert listed.returncode == 0, listed.stderr
        doc = json.loads(listed.stdout)
        (mine,) = [s for s in doc["sessions"] if s["job_id"] == job.job_id]
        assert mine["mode"] == "debugpy" and mine["task_name"] == "RolloutWorker.generate"
        assert mine["exception"]["type"] == "RuntimeError" and mine["pid"] and mine["node_id"]
        assert mine["address"].endswith(f":{mine['port']}")

        term = Terminal(f"cockpit-debug-{os.getpid()}", width=120, height=40)
        try:
            env = f"COCKPIT_STATE_DIR={os.environ['COCKPIT_STATE_DIR']}"
            term.type(f"{env} {sys.executable} -m cockpit.cli debug local --attach {mine['n']}", "Enter")
            term.wait_for(lambda s: "(cockpit-pdb)" in s and "NaN in logits" in s, timeout=60)
            term.type("p step", "Enter")
            term.wait_for(lambda s: "(cockpit-pdb) p step\n3\n" in s, timeout=30)
            term.type("c", "Enter")
            term.wait_for(lambda s: "released" in s, timeout=30)
        finally:
            term.close()

        async def failed() -> None:
            async with ray_cluster.client() as client:
                finished = await wait_status(client, job.submission_id)
                assert finished.status == "FAILED" and "NaN in logits" in finished.message

        asyncio.run(failed())


def test_every_way_out_but_release_leaves_the_worker_paused(ray_cluster: ClusterHandle) -> None:
    """An attach abandoned half-way (Esc or quit while attaching), at any point, and a connection
    dropped without a goodbye (a killed cockpit, a lost SSH link) all leave the worker paused."""
    with demo_crash_job(ray_cluster) as job:

        async def run() -> None:
            async with open_connection(parse_target("local")) as connection:
                (worker,) = await wait_paused(connection.client, job.job_id)
                for delay in (0.05, 0.3, 0.45, 0.6):  # cancelled at various points of the attach
                    attaching = asyncio.ensure_future(DebugSession.attach(connection, worker))
                    await asyncio.sleep(delay)
                    attaching.cancel()
                    try:
                        done = await attaching
                    except asyncio.CancelledError:
                        pass
                    else:  # it was quicker than the cancel: leave as a quitting cockpit does
                        await done.close()
                    await settle(10)
                    (worker,) = await wait_paused(connection.client, job.job_id, timeout=30)

                session = await DebugSession.attach(connection, worker)
                assert session.armed
                await session.client.close()  # no goodbye: as when the process or the link dies
                # Paused again. (debugpy's adapter may then stop answering new clients for good after
                # such drops: see the note in debug_session.close; no attach is tried after it here.)
                await wait_paused(connection.client, job.job_id, timeout=30)

        asyncio.run(run())
