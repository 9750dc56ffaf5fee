"""The legacy Ray debugger (`cockpit.core.debug.legacy_pdb`): finding pdb sessions in workers' stderr and
talking to one, on a pdb session captured from Ray 2.60 (`shared/ray-2.60-samples/legacy_pdb_session.txt`)
replayed by a real TCP server on 127.0.0.1."""

from __future__ import annotations

import ast
import asyncio
import copy
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from cockpit.core.cluster import parse
from cockpit.core.cluster.answers import state_listing
from cockpit.core.cluster.errors import NotFound
from cockpit.core.debug import legacy_pdb
from cockpit.core.debug.errors import PdbError
from cockpit.core.debug.legacy_pdb import (
    PdbConsole,
    exception_from_banner,
    find_legacy,
    session_address,
    worker_err_file,
)
from cockpit.core.snapshots import JobRow, Listing, TaskRow, WorkerRow
from tests.unit.test_paused import (  # the captured worker ids
    ACTOR_WORKER,
    NODE,
    SAMPLES,
    TASK_WORKER,
    _matches,
)

SESSION_LINE = (
    "\x1b[36m(bad_task pid=15568)\x1b[0m RemotePdb session open at localhost:39265, "
    "use 'ray debug' to connect..."
)


def sample_path(name: str) -> Path:
    path = SAMPLES / name
    if not path.is_file():
        pytest.skip(f"captured Ray samples not found at {SAMPLES}")
    return path


def sample(name: str) -> Any:
    return json.loads(sample_path(name).read_text())


def transcript() -> tuple[bytes, dict[str, bytes]]:
    """The captured session: the first screen, and what pdb answered to each command (as sent)."""
    lines = sample_path("legacy_pdb_session.txt").read_text().splitlines()
    banner = ast.literal_eval(lines[0]).encode()
    answers: dict[str, bytes] = {}
    command = ""
    for line in lines[1:]:
        if line.startswith(">>> "):
            command = line[4:]
        elif line.startswith("'") and command:
            answers[command] = ast.literal_eval(line).encode()
    return banner, answers


# -- session lines ---------------------------------------------------------------------------------


def test_session_address_of_a_real_line() -> None:
    assert session_address(SESSION_LINE) == ("localhost", 39265)


def test_session_address_last_one_wins() -> None:
    text = "\n".join(
        [
            SESSION_LINE,
            "Traceback (most recent call last): ...",
            SESSION_LINE.replace("localhost:39265", "localhost:40111"),
            "some other line",
        ]
    )
    assert session_address(text) == ("localhost", 40111)


def test_session_address_external() -> None:
    line = "RemotePdb session open at 192.0.2.2:45678, use 'ray debug' to connect..."
    assert session_address(line) == ("192.0.2.2", 45678)


def test_session_address_of_none() -> None:
    assert session_address("") is None
    assert session_address("Ray debugger is listening on 192.0.2.2:58565") is None
    assert session_address("RemotePdb session open at localhost:, use 'ray debug'") is None


@pytest.mark.parametrize("port", ["123456", "99999", "0"])
def test_session_address_refuses_a_bogus_port(port: str) -> None:
    assert session_address(f"RemotePdb session open at localhost:{port}, use 'ray debug'") is None


def test_a_session_taken_by_a_client_is_not_listed() -> None:
    taken = f"{SESSION_LINE}\nRemotePdb accepted connection from ('127.0.0.1', 51234).\n"
    assert session_address(taken) is None
    # A later pause of the same worker opens a new session: that one counts.
    assert session_address(taken + "RemotePdb session open at localhost:40001, use 'ray debug'") == (
        "localhost",
        40001,
    )


def test_worker_err_file() -> None:
    assert worker_err_file(TASK_WORKER, "03000000", 9682) == f"worker-{TASK_WORKER}-03000000-9682.err"


# -- the first screen ------------------------------------------------------------------------------


def test_exception_from_the_real_banner() -> None:
    banner, _answers = transcript()
    summary = exception_from_banner(banner.decode())
    assert summary is not None
    assert summary.type_name == "ValueError"
    assert summary.where == "crash.py:8 in bad_task"
    assert "boom" in summary.message


def test_exception_from_the_banner_after_a_where() -> None:
    _banner, answers = transcript()
    summary = exception_from_banner(answers["where"].decode())
    assert summary is not None
    assert summary.where == "crash.py:8 in bad_task"  # the `>` frame, not the _raylet.pyx ones above it


def test_exception_from_a_banner_without_a_raise() -> None:
    banner = "> /work/train.py(12)step()\r\n-> loss = model(batch)\r\n(Pdb) "
    assert exception_from_banner(banner) is None
    assert exception_from_banner("") is None


def test_exception_dotted_type_in_a_module() -> None:
    banner = "> /work/run.py(3)<module>()\n-> raise errors.BadBatch('rank 3')\n(Pdb) "
    summary = exception_from_banner(banner)
    assert summary is not None
    assert summary.type_name == "errors.BadBatch"
    assert summary.where == "run.py:3 in <module>"


# -- find_legacy -----------------------------------------------------------------------------------


def job(status: str, job_id: str, debugger: str | None) -> JobRow:
    """A job row parsed from the captured job list, with its status, id and RAY_DEBUG changed."""
    raw = copy.deepcopy(next(j for j in sample("jobs_list.json") if j["status"] == "RUNNING"))
    raw["status"] = status
    raw["job_id"] = job_id
    raw["submission_id"] = f"sub-{job_id}-{status.lower()}"
    env = raw.setdefault("runtime_env", {}).setdefault("env_vars", {})
    if debugger is not None:
        env["RAY_DEBUG"] = debugger
    return parse.job_row(raw)


class FakeDashboard:
    """The captured workers and tasks (filtered as the head would), and log files by (node, name)."""

    def __init__(self, files: dict[tuple[str, str], str]) -> None:
        self.files = files
        self.worker_rows: Listing[WorkerRow] = state_listing(
            sample("dbg_workers_paused.json"), "/api/v0/workers", parse.worker_row
        )
        self.task_rows: Listing[TaskRow] = state_listing(
            sample("dbg_tasks.json"), "/api/v0/tasks", parse.task_row
        )
        self.calls: list[tuple[str, Any]] = []

    async def workers(self, filters: Iterable[tuple[str, str, str]] = (), limit: int = 1000) -> Any:
        wanted = list(filters)
        self.calls.append(("workers", wanted))
        return replace(self.worker_rows, rows=tuple(r for r in self.worker_rows.rows if _matches(r, wanted)))

    async def tasks(self, filters: Iterable[tuple[str, str, str]] = (), limit: int = 1000) -> Any:
        wanted = list(filters)
        self.calls.append(("tasks", wanted))
        return replace(self.task_rows, rows=tuple(r for r in self.task_rows.rows if _matches(r, wanted)))

    async def log_file(self, *, node_id: str | None = None, filename: str | None = None, **kw: Any) -> str:
        self.calls.append(("log_file", (node_id, filename)))
        try:
            return self.files[(node_id or "", filename or "")]
        except KeyError:
            raise NotFound(f"no log file {filename} on that node.") from None

    def asked(self, kind: str) -> list[Any]:
        return [arg for name, arg in self.calls if name == kind]


TASK_ERR = worker_err_file(TASK_WORKER, "03000000", 9682)
ACTOR_ERR = worker_err_file(ACTOR_WORKER, "03000000", 9683)


async def test_find_legacy_reads_the_err_file_of_each_running_task() -> None:
    client = FakeDashboard(
        {
            (NODE, TASK_ERR): f"Traceback ...\nValueError: boom 2\n{SESSION_LINE}\n",
            (NODE, ACTOR_ERR): "RuntimeError: actor boom\n",  # no session line: not paused in pdb
        }
    )
    jobs = [
        job("RUNNING", "03000000", "legacy"),
        job("RUNNING", "02000000", None),  # the default debugger: costs nothing
        job("FAILED", "01000000", "legacy"),  # over: costs nothing
    ]
    found = await find_legacy(client, jobs, {NODE: "192.0.2.2"})  # type: ignore[arg-type]

    assert client.asked("workers") == []  # the task rows carry their worker's pid: no worker list
    job_filters = [f for call in client.asked("tasks") for f in call if f[0] == "job_id"]
    assert job_filters == [("job_id", "=", "03000000")]
    assert sorted(client.asked("log_file")) == sorted([(NODE, TASK_ERR), (NODE, ACTOR_ERR)])
    assert len(found) == 1
    paused = found[0]
    assert paused.mode == "legacy"
    assert (paused.host, paused.port, paused.ip, paused.pid) == ("localhost", 39265, "192.0.2.2", 9682)
    assert paused.worker_id == TASK_WORKER
    assert paused.node_id == NODE
    assert paused.task_name == "bad_task"
    assert paused.job_id == "03000000"
    assert paused.key == "legacy:192.0.2.2:39265"
    assert paused.address == "localhost:39265"
    assert paused.exception is None


async def test_find_legacy_without_legacy_jobs_asks_nothing() -> None:
    client = FakeDashboard({})
    jobs = [job("RUNNING", "03000000", "1"), job("SUCCEEDED", "01000000", "legacy")]
    assert await find_legacy(client, jobs) == ()  # type: ignore[arg-type]
    assert client.calls == []


async def test_find_legacy_without_the_line_or_the_file_finds_nothing() -> None:
    client = FakeDashboard({(NODE, TASK_ERR): "Ray debugger is listening on 192.0.2.2:58565\n"})
    jobs = [job("RUNNING", "03000000", "legacy")]
    found = await find_legacy(client, jobs, {NODE: "192.0.2.2"})  # type: ignore[arg-type]
    assert found == ()
    assert len(client.asked("log_file")) == 2  # the actor's file is missing: NotFound is not an error


# -- PdbConsole ------------------------------------------------------------------------------------

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Handler], Awaitable[int]]]:
    servers: list[asyncio.Server] = []

    async def start(handler: Handler) -> int:
        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        servers.append(server)
        port: int = server.sockets[0].getsockname()[1]
        return port

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()


def replay(big: int = 0) -> Handler:
    """A pdb console as Ray's RemotePdb speaks it: the captured first screen and answers, `\\r\\n`,
    the `(Pdb) ` prompt, one client; `c` closes. `p big` prints BIG bytes; `p half` dies mid-answer."""
    banner, answers = transcript()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(banner)
        await writer.drain()
        try:
            while line := await reader.readline():
                command = line.decode().strip()
                if command == "c":
                    break
                if command == "p big":
                    for start in range(0, big, 8192):
                        writer.write(b"x" * min(8192, big - start))
                        await writer.drain()
                    writer.write(b"\r\n(Pdb) ")
                elif command == "p flood":  # a huge answer, then the worker dies
                    for start in range(0, big, 8192):
                        writer.write(b"y" * min(8192, big - start))
                        await writer.drain()
                    break
                elif command == "p half":
                    writer.write(b"[1, 2, 3,")
                    await writer.drain()
                    break
                elif command == "p gone":
                    break
                else:
                    writer.write(answers.get(command, b"*** NameError: name is not defined\r\n(Pdb) "))
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    return handle


async def test_console_start_returns_the_first_screen(serve: Callable[[Handler], Awaitable[int]]) -> None:
    port = await serve(replay())
    console = await PdbConsole.connect_tcp("127.0.0.1", port)
    banner = await console.start()
    assert banner == console.banner
    assert banner.startswith("> /tmp/raytest/head/")
    assert "(Pdb)" not in banner
    assert "\r" not in banner
    assert banner.endswith('-> raise ValueError(f"boom {y}")\n')
    summary = exception_from_banner(banner)
    assert summary is not None
    assert summary.where == "crash.py:8 in bad_task"
    await console.close()


async def test_console_run_and_continue(serve: Callable[[Handler], Awaitable[int]]) -> None:
    port = await serve(replay())
    console = await PdbConsole.connect_tcp("127.0.0.1", port)
    await console.start()
    assert (await console.run("p y")).strip() == "2"
    assert (await console.run("p x")) == "1\n"
    where = await console.run("where")
    assert "\r" not in where
    assert where.count("_raylet.pyx") == 3
    assert not console.closed
    await console.run("c")
    assert console.closed
    with pytest.raises(PdbError, match="closed"):
        await console.run("p y")


async def test_console_a_line_is_one_command(serve: Callable[[Handler], Awaitable[int]]) -> None:
    port = await serve(replay())
    console = await PdbConsole.connect_tcp("127.0.0.1", port)
    await console.start()
    # a pasted newline must not become a second command (`c` would let the worker go)
    out = await console.run("p y\nc")
    assert "NameError" in out
    assert not console.closed
    await console.close()


async def test_console_closed_before_it_answers(serve: Callable[[Handler], Awaitable[int]]) -> None:
    port = await serve(replay())
    console = await PdbConsole.connect_tcp("127.0.0.1", port)
    await console.start()
    with pytest.raises(PdbError) as caught:
        await console.run("p gone")
    message = str(caught.value)
    assert "127.0.0.1" in message
    assert "closed" in message
    assert "\n" not in message
    assert console.closed


async def test_console_closed_mid_answer(serve: Callable[[Handler], Awaitable[int]]) -> None:
    """What came before the close is returned and the console says it is closed (the UI then shows
    "the worker went on"); the next command is refused with a clear error."""
    port = await serve(replay())
    console = await PdbConsole.connect_tcp("127.0.0.1", port)
    await console.start()
    out = await console.run("p half", timeout=5.0)
    assert out == "[1, 2, 3,"
    assert console.closed
    with pytest.raises(PdbError, match=r"the pdb session at 127\.0\.0\.1:\d+ is closed"):
        await console.run("p y")


async def test_console_unreachable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(PdbError, match=f"cannot reach the pdb session at 127.0.0.1:{port}"):
        await PdbConsole.connect_tcp("127.0.0.1", port, timeout=5.0)


async def test_console_silent_server_times_out(serve: Callable[[Handler], Awaitable[int]]) -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()
        writer.close()

    port = await serve(silent)
    console = await PdbConsole.connect_tcp("127.0.0.1", port)
    with pytest.raises(PdbError, match=r"did not answer within 0\.3 s"):
        await console.start(timeout=0.3)
    await console.close()


async def test_console_output_is_bounded(
    serve: Callable[[Handler], Awaitable[int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `p` of a huge object does not fill the memory: what is kept stays near MAX_OUTPUT (one read
    past it at most)."""
    monkeypatch.setattr(legacy_pdb, "MAX_OUTPUT", 16 * 1024)
    port = await serve(replay(big=1024 * 1024))
    console = await PdbConsole.connect_tcp("127.0.0.1", port)
    await console.start()
    out = await console.run("p flood", timeout=10.0)
    assert 16 * 1024 <= len(out) <= 16 * 1024 + 65536
    assert set(out) == {"y"}
    assert console.closed


async def test_console_big_output_is_cut_and_the_console_goes_on(
    serve: Callable[[Handler], Awaitable[int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(legacy_pdb, "MAX_OUTPUT", 16 * 1024)
    port = await serve(replay(big=256 * 1024))
    console = await PdbConsole.connect_tcp("127.0.0.1", port)
    await console.start()
    try:
        out = await console.run("p big", timeout=3.0)
        assert 0 < len(out) <= 16 * 1024 + 65536
        assert (await console.run("p y")).strip() == "2"
    finally:
        await console.close()
