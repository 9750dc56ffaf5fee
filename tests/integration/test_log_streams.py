"""Logs against the real cluster: `cockpit logs`, and streams cut mid-way that resume exactly (also in
output that repeats itself, in a file larger than any read's time limit allows, and from a window of a
big file's last lines)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import sys
from pathlib import Path

import pytest
from ray.dashboard.modules.log.log_agent import find_start_offset_last_n_lines_from_offset

from cockpit.core.cluster.dashboard import DashboardClient
from cockpit.core.cluster.selectors import ACTOR_SELECTOR
from cockpit.core.connect.connection import open_connection
from cockpit.core.local import record
from cockpit.core.logs.sources import LogSource, LogTail
from cockpit.core.targets import parse_target
from tests.harness.cluster import ClusterHandle
from tests.harness.relay import relay
from tests.harness.run import run_cockpit as cockpit
from tests.harness.run import run_cockpit_in_pty
from tests.harness.sshd import start_sshd

pytestmark = pytest.mark.cluster

COUNTER = (
    "import time\nfor i in range({n}):\n"
    "    print(f'line {{i:05d}} ' + 'x' * 60, flush=True)\n    time.sleep({pause})\n"
)


async def submit_counter(ray_cluster: ClusterHandle, tmp_path: Path, name: str, n: int, pause: float) -> str:
    script = tmp_path / f"{name}.py"
    script.write_text(COUNTER.format(n=n, pause=pause))
    async with ray_cluster.client() as client:
        return await client.submit_job({"entrypoint": f"{sys.executable} -u {script}", "submission_id": name})


async def test_logs_follow_prints_the_driver_log_and_returns_with_the_job(
    ray_cluster: ClusterHandle, tmp_path: Path
) -> None:
    job = await submit_counter(ray_cluster, tmp_path, "count-follow", n=150, pause=0.02)
    result = await asyncio.to_thread(cockpit, "logs", "local", job, "--follow")
    assert result.returncode == 0, result.stderr
    numbered = [line.split()[1] for line in result.stdout.splitlines() if line.startswith("line ")]
    assert numbered == [f"{i:05d}" for i in range(150)]  # every line, once, in order
    assert result.stdout.rstrip().endswith(f"{job}: SUCCEEDED")


def test_logs_of_an_actor_and_of_a_node_file(ray_cluster: ClusterHandle, demo_job: str) -> None:
    actor = cockpit("logs", "local", "--actor", "PolicyTrainer", "--lines", "20")
    assert actor.returncode == 0, actor.stderr
    assert "policy update step=" in actor.stdout or "PolicyTrainer up on" in actor.stdout
    head = ray_cluster.cluster.nodes[0]
    node_id = next(
        line.split()[0].rstrip("*")
        for line in cockpit("local", "status").stdout.splitlines()
        if line.split() and line.split()[0].endswith("*")
    )
    raylet = cockpit("logs", "local", "--node", node_id, "--file", "raylet.out", "--lines", "3")
    assert raylet.returncode == 0, raylet.stderr
    printed = raylet.stdout.splitlines()
    assert 1 <= len(printed) <= 3
    # The lines are the head node's own raylet.out (whatever its last lines say at that moment: the
    # raylet's periodic stats end in lines such as "- bytes errored: 0", so no word is asserted).
    written = (Path(head.temp_dir) / "session_latest" / "logs" / "raylet.out").read_text().splitlines()
    assert all(line in written for line in printed)


COLOURED = (
    "print('\\x1b[36m(pid=1) cyan\\x1b[0m plain', flush=True)\n"
    "print('\\x1b]0;a title\\x07\\x1b[1;31mbold red\\x1b[0m end', flush=True)\n"
)


async def test_logs_keep_the_jobs_colours_only_on_a_terminal_without_no_color(
    ray_cluster: ClusterHandle, tmp_path: Path
) -> None:
    script = tmp_path / "coloured.py"
    script.write_text(COLOURED)
    async with ray_cluster.client() as client:
        request = {"entrypoint": f"{sys.executable} -u {script}", "submission_id": "colours"}
        job = await client.submit_job(request)
    followed = await asyncio.to_thread(cockpit, "logs", "local", job, "--follow")  # to a pipe: no colour
    assert followed.returncode == 0, followed.stderr
    assert "(pid=1) cyan plain\nbold red end\n" in followed.stdout and "\x1b" not in followed.stdout
    kept = cockpit("logs", "local", job, "--color", "always")
    assert "\x1b[36m(pid=1) cyan\x1b[0m plain" in kept.stdout  # the log has them: the check above can fail
    env = {**os.environ, "TERM": "xterm-256color"}
    on_a_terminal = run_cockpit_in_pty("logs", "local", job, env=env)
    assert "\x1b[1;31mbold red" in on_a_terminal
    without = run_cockpit_in_pty("logs", "local", job, env={**env, "NO_COLOR": "1"})
    assert "bold red end" in without and "\x1b" not in without
    # --json output (cluster text as is) carries no escape either.
    listed = cockpit("jobs", "local", "--json")
    assert listed.returncode == 0 and job in listed.stdout and "\x1b" not in listed.stdout


def test_logs_usage_errors_are_one_sentence(ray_cluster: ClusterHandle) -> None:
    both = cockpit("logs", "local", "some-job", "--actor", "x")
    assert both.returncode == 1 and both.stderr.startswith("cockpit: give exactly one of JOB")
    missing = cockpit("logs", "local", "--actor", "NoSuchActor")
    assert missing.returncode == 1
    assert missing.stderr == f"cockpit: no actor 'NoSuchActor' ({ACTOR_SELECTOR}).\n"


def test_logs_and_stacks_read_a_node_selector_alike(ray_cluster: ClusterHandle, demo_job: str) -> None:
    """The local cluster's nodes share this machine's IP and host name: either names several alive
    nodes, and `logs --node` and `stacks --node` say so in the same one line; the start of an id names
    one node for both (the demo job's driver runs on the head: something to take the stack of)."""
    alive = [
        n for n in json.loads(cockpit("status", "local", "--json").stdout)["nodes"] if n["state"] == "ALIVE"
    ]
    assert len(alive) >= 3
    for selector in (alive[0]["ip"], alive[0]["hostname"].upper()):
        logs = cockpit("logs", "local", "--node", selector, "--file", "raylet.out", "--lines", "1")
        stacks = cockpit("stacks", "local", "--node", selector)
        assert logs.returncode == stacks.returncode == 1
        assert logs.stderr == stacks.stderr and logs.stderr.count("\n") == 1, (logs.stderr, stacks.stderr)
        assert logs.stderr.startswith(f"cockpit: {selector!r} matches {len(alive)} nodes: ")
        assert all(n["node_id"][:8] in logs.stderr for n in alive[:5])
    head = next(n for n in alive if n["is_head"])
    start = head["node_id"][:10]
    by_id = cockpit("logs", "local", "--node", start, "--file", "raylet.out", "--lines", "1")
    assert by_id.returncode == 0 and by_id.stdout, by_id.stderr
    stacks = cockpit("stacks", "local", "--node", start, "--json", "--brief")
    assert stacks.returncode == 0, stacks.stderr
    assert {m["node_id"] for g in json.loads(stacks.stdout)["groups"] for m in g["members"]} == {
        head["node_id"]
    }


async def test_stream_cut_mid_way_resumes_without_gap_or_duplicate(
    ray_cluster: ClusterHandle, tmp_path: Path
) -> None:
    """The connection under the stream is killed twice; what arrived equals the file on disk."""
    server = start_sshd(tmp_path / "sshd")
    config = tmp_path / "config"
    config.write_text(server.ssh_config_entry("head-node"))
    options = ray_cluster.over_ssh(config)
    job_id = await submit_counter(ray_cluster, tmp_path, "count-cut", n=400, pause=0.02)
    events: list[str] = []
    received = bytearray()
    try:
        async with open_connection(parse_target("head-node"), options) as conn:
            client = conn.client
            while not (job := await client.job(job_id)).driver_node_id:
                await asyncio.sleep(0.2)
            tail = LogTail(client, LogSource.driver(job), lines=-1, on_event=events.append, interval=0.2)

            async def collect() -> None:
                async for chunk in tail.chunks():
                    received.extend(chunk)

            collector = asyncio.ensure_future(collect())
            for cut in range(2):
                while len(received) < 2000 * (cut + 1) and not collector.done():
                    await asyncio.sleep(0.1)
                server.kill_connections()
                await asyncio.sleep(1.5)
            while not (await client.job(job_id)).terminal:
                await asyncio.sleep(0.5)
            await asyncio.sleep(1.5)
            collector.cancel()
            received.extend(await tail.remainder())
    finally:
        server.stop()
    on_disk = (
        Path(ray_cluster.cluster.nodes[0].temp_dir) / "session_latest" / "logs" / f"job-driver-{job_id}.log"
    )
    assert tail.resumes >= 2, events
    assert any("resumed" in e and "no line lost or repeated" in e for e in events), events
    assert bytes(received) == on_disk.read_bytes()
    numbered = [line.split()[1] for line in received.decode().splitlines() if line.startswith("line ")]
    assert numbered == [f"{i:05d}" for i in range(400)]


def head_logs(ray_cluster: ClusterHandle) -> Path:
    return Path(ray_cluster.cluster.nodes[0].temp_dir) / "session_latest" / "logs"


async def head_node_id(client: DashboardClient) -> str:
    return next(node.node_id for node in (await client.node_table()).rows if node.is_head)


async def collect(tail: LogTail, into: bytearray) -> None:
    async for chunk in tail.chunks():
        into.extend(chunk)


async def stop(collector: asyncio.Future[None]) -> None:
    """Cancel the collector (closing its stream); re-raise what it failed with, if it did."""
    collector.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await collector


BLOCK = b"".join(b"%-11s %s\n" % (name, b"=" * 180) for name in (b"rollout", b"reward 0.5", b"update"))


def repeated_log(blocks_before: int = 0) -> tuple[bytes, bytes]:
    """50 identical 3-line blocks with `loss=nan` in place of block 30's middle line (after BLOCKS_BEFORE
    more); and the part of it written when the stream drops (mid-line in block 20, so the 4 KiB before
    it recur further on)."""
    rollout, _reward, update = BLOCK.splitlines(keepends=True)
    head = b"run 7 starts\n" + BLOCK * blocks_before
    whole = head + BLOCK * 30 + rollout + b"reward      loss=nan\n" + update + BLOCK * 19 + b"run 7 done\n"
    return whole[: len(head) + 20 * len(BLOCK) + 250], whole


@pytest.mark.parametrize(("lines", "blocks_before"), [(-1, 0), (4, 0), (4, 2000)])
async def test_a_resume_in_repeated_output_loses_and_repeats_nothing(
    ray_cluster: ClusterHandle, lines: int, blocks_before: int
) -> None:
    """The connection drops after the first part; the rest (with the one `loss=nan` line) is written before
    the stream can carry any of it; after the resume the bytes followed are the file's, each once. With
    2,000 blocks before (1.1 MB) a window of the last lines is tried first and cannot tell (what it must
    find is in it many times): the file is read from byte 0 instead."""
    first, whole = repeated_log(blocks_before)
    path = head_logs(ray_cluster) / f"repeated-{lines + 1}-{blocks_before}.log"
    path.write_bytes(first)
    start = 0 if lines < 0 else find_start_offset_last_n_lines_from_offset(io.BytesIO(first), -1, lines)
    events: list[str] = []
    received = bytearray()
    token = record.cluster_token(ray_cluster.state_dir)
    try:
        async with relay(ray_cluster.url) as link, DashboardClient(link.url, token=token) as client:
            source = LogSource.file(await head_node_id(client), path.name)
            tail = LogTail(client, source, lines=lines, on_event=events.append, interval=0.2)
            collector = asyncio.ensure_future(collect(tail, received))
            # The stream reading from byte 0 has begun and carried bytes (past the history's read of the
            # whole file where LINES is given): it is open when it is cut, whatever the timing.
            carried = len(first) * (1 if lines < 0 else 2)
            while not collector.done() and (
                len(received) < len(first) - start or not tail.replays or link.carried < carried
            ):
                await asyncio.sleep(0.05)
            link.cut()  # no await until the rest is written: the old stream cannot carry a byte of it
            with path.open("ab") as log:
                log.write(whole[len(first) :])
            while not received.endswith(b"run 7 done\n") and not collector.done():
                await asyncio.sleep(0.05)
            await stop(collector)
    finally:
        path.unlink(missing_ok=True)
    assert bytes(received) == whole[start:]
    assert received.count(b"loss=nan") == 1
    resumed = any("resumed" in e and "no line lost or repeated" in e for e in events)
    assert tail.resumes >= 1 and resumed, events
    assert tail.windows == 0 and tail.replays >= 1  # no window placed it: each resume read from byte 0


async def test_a_big_log_is_reopened_resumed_and_finished_from_windows(ray_cluster: ClusterHandle) -> None:
    """A 2.2 MB numbered log followed from its last 5 lines: the history reads it once; the stream after
    it, the resume after a cut link (300 lines written meanwhile) and the rest once the writer stopped
    each start from a window of the last lines Ray's own `lines=K` sends, not from byte 0."""
    line = b"%07d step reward=0.5 " + b"y" * 40 + b"\n"
    data = b"".join(line % i for i in range(32_000))
    more = [
        b"".join(line % i for i in range(start, start + n)) for start, n in ((10**6, 100), (2 * 10**6, 300))
    ]
    last = b"".join(line % i for i in range(3 * 10**6, 3 * 10**6 + 50))
    path = head_logs(ray_cluster) / "windowed.log"
    path.write_bytes(data)
    start = find_start_offset_last_n_lines_from_offset(io.BytesIO(data), -1, 5)
    events: list[str] = []
    received = bytearray()
    token = record.cluster_token(ray_cluster.state_dir)
    try:
        async with relay(ray_cluster.url) as link, DashboardClient(link.url, token=token) as client:
            source = LogSource.file(await head_node_id(client), path.name)
            tail = LogTail(client, source, lines=5, on_event=events.append, interval=0.2)
            collector = asyncio.ensure_future(collect(tail, received))
            written = data
            for i, part in enumerate(more):
                while len(received) < len(written) - start and not collector.done():
                    await asyncio.sleep(0.05)
                if i:
                    link.cut()  # no await until the part is written: only the resume can carry it
                with path.open("ab") as log:
                    log.write(part)
                written += part
            while len(received) < len(written) - start and not collector.done():
                await asyncio.sleep(0.05)
            await stop(collector)
            with path.open("ab") as log:
                log.write(last)
            received += await tail.remainder()
    finally:
        path.unlink(missing_ok=True)
    assert bytes(received) == (written + last)[start:]
    assert tail.resumes >= 1 and any("resumed" in e for e in events), events
    assert (tail.windows, tail.replays) == (tail.resumes + 2, 0), events


@pytest.mark.parametrize("replacement", [b"short\n", b"other run\n" * 2000], ids=["shorter", "longer"])
async def test_a_file_replaced_under_the_tail_is_said_and_followed_from_its_top(
    ray_cluster: ClusterHandle, replacement: bytes
) -> None:
    """Rotated (a new file under the name) while the stream was down: shorter than what was delivered, or
    longer with other bytes where the delivered ones were. Either is caught, said, and read from its top."""
    original = b"first run\n" * 1000
    path = head_logs(ray_cluster) / f"replaced-{len(replacement)}.log"
    path.write_bytes(original)
    events: list[str] = []
    received = bytearray()
    token = record.cluster_token(ray_cluster.state_dir)
    try:
        async with (
            relay(ray_cluster.url) as link,
            DashboardClient(link.url, token=token, timeout=2.0) as client,
        ):
            source = LogSource.file(await head_node_id(client), path.name)
            tail = LogTail(client, source, lines=-1, on_event=events.append, interval=0.2)
            collector = asyncio.ensure_future(collect(tail, received))
            while len(received) < len(original) and not collector.done():
                await asyncio.sleep(0.05)
            fresh = path.with_name(path.name + ".new")
            fresh.write_bytes(replacement)
            os.replace(fresh, path)
            link.cut()
            last_line = replacement.splitlines(keepends=True)[-1]
            while not received.endswith(last_line) and tail.resumes <= 3 and not collector.done():
                await asyncio.sleep(0.05)
            await stop(collector)
    finally:
        path.unlink(missing_ok=True)
    assert bytes(received) == original + replacement
    assert any("rotated or rewritten" in e for e in events), events


LARGE = 64 << 20
RATE = 8 << 20
"""Bytes a second through the relay: every read of the whole file lasts 8 s or more, twice the timeout."""


async def test_a_large_file_is_followed_resumed_and_finished_through_a_slow_link(
    ray_cluster: ClusterHandle,
) -> None:
    """64 MiB through a link of 8 MiB/s, with a client whose timeout is 4 s: followed from byte 0, dropped
    a quarter of the way in, resumed, and its last part read once the writer stopped (`remainder`)."""
    line = b"%09d step reward=0.5 " + b"x" * 70 + b"\n"
    data = b"".join(line % i for i in range(LARGE // len(line)))
    tail_end = b"".join(line % i for i in range(10**8, 10**8 + 10_000))
    path = head_logs(ray_cluster) / "large.log"
    path.write_bytes(data)
    events: list[str] = []
    received = bytearray()
    token = record.cluster_token(ray_cluster.state_dir)
    try:
        async with (
            relay(ray_cluster.url, bytes_per_second=RATE) as link,
            DashboardClient(link.url, token=token, timeout=4.0) as client,
        ):
            source = LogSource.file(await head_node_id(client), path.name)
            tail = LogTail(client, source, lines=-1, on_event=events.append, interval=0.2)
            collector = asyncio.ensure_future(collect(tail, received))
            while len(received) < LARGE // 4 and not collector.done():
                await asyncio.sleep(0.1)
            link.cut()
            # A resume that cannot finish inside a time limit is retried for ever: count the tries.
            while len(received) < len(data) and tail.resumes <= 3 and not collector.done():
                await asyncio.sleep(0.1)
            await stop(collector)
            assert tail.resumes <= 3, events
            with path.open("ab") as log:
                log.write(tail_end)
            rest = await tail.remainder()
    finally:
        path.unlink(missing_ok=True)
    assert len(received) == len(data) and bytes(received) == data
    assert rest == tail_end
