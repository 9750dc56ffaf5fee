"""Provides the legacy Ray debugger (`RAY_DEBUG=legacy`): finding its pdb sessions and talking to one.

A worker that raises with post-mortem on opens a pdb console on a TCP socket and writes
`RemotePdb session open at localhost:PORT` to its stderr. Its registration lives in the GCS key-value
store, which the dashboard does not serve, and the copies forwarded to the driver log are deduplicated by
Ray (the lines differ only in their port), so the worker's own `.err` file is read instead: for every
RUNNING task of a job whose runtime_env sets `RAY_DEBUG=legacy`, the last lines of
`worker-<worker_id>-<job_id>-<pid>.err` on its node. The socket listens on that node's 127.0.0.1 unless
the cluster was started with `--ray-debugger-external` (then the line names the node IP).

The console itself is plain text: lines in, output and a `(Pdb) ` prompt out, `\\r\\n` line ends, one
client; `c` (or closing the socket) lets the worker go on.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cockpit.core.debug.errors import PdbError
from cockpit.core.debug.paused import UNFINISHED, ExceptionSummary, PausedWorker, frame_where
from cockpit.core.errors import CockpitError
from cockpit.core.snapshots import JobRow, TaskRow

if TYPE_CHECKING:
    from cockpit.core.cluster.dashboard import DashboardClient

SESSION_LINE = re.compile(r"RemotePdb session open at (?P<host>[^\s,]+):(?P<port>\d+)\b")
ACCEPTED = "RemotePdb accepted connection from"
PROMPT = b"(Pdb) "
TAIL_LINES = 30
"""How much of each worker's stderr is read: the session line is among its last lines while it waits."""
MAX_READS = 64
"""Stderr files read per search at most. With more running tasks, each search starts further along
the list, so all of them are read over a few searches (256 tasks: 4)."""
MAX_OUTPUT = 4 * 1024 * 1024
"""A console answer larger than this is cut (a `p` of a huge object must not fill the memory)."""

_POSITION = re.compile(r"^> (?P<path>.+)\((?P<line>\d+)\)(?P<func>[^()\s]+)\(\)")
_RAISE = re.compile(r"^-> raise (?P<type>[\w.]+)\((?P<msg>.*)\)\s*$")


def session_address(text: str) -> tuple[str, int] | None:
    """The last `RemotePdb session open at HOST:PORT` in TEXT, unless a client was accepted after it
    (`RemotePdb accepted connection from ...`: that session is taken); else None."""
    found = None
    end = 0
    for match in SESSION_LINE.finditer(text):
        port = int(match.group("port"))
        found = (match.group("host"), port) if 0 < port < 65536 else None
        end = match.end()
    if found is not None and ACCEPTED in text[end:]:
        return None
    return found


def worker_err_file(worker_id: str, job_id: str, pid: int) -> str:
    """The name Ray gives a worker's stderr file in the node's log directory."""
    return f"worker-{worker_id}-{job_id}-{pid}.err"


async def find_legacy(
    client: DashboardClient, jobs: Sequence[JobRow], node_ips: Mapping[str, str] | None = None
) -> tuple[PausedWorker, ...]:
    """Legacy pdb sessions waiting for a client, in the RUNNING jobs that use the legacy debugger.

    Costs nothing for other jobs. For each such job: one task list (RUNNING tasks, which carry their
    worker's pid), and a short read of each running task's stderr file, at most `MAX_READS` a call.
    `node_ips`: node id to IP (from the node table the caller has); asked for when not given.
    """
    legacy = [j for j in jobs if j.status == "RUNNING" and j.debugger == "legacy" and j.job_id]
    if not legacy:
        return ()
    if node_ips is None:
        node_ips = {n.node_id: n.ip for n in (await client.node_table()).rows}
    limit = asyncio.Semaphore(4)

    async def probe(task: TaskRow) -> PausedWorker | None:
        pid = task.worker_pid
        if pid is None:  # older Ray does not fill worker_pid in while the task runs: ask the worker table
            with contextlib.suppress(CockpitError):
                rows = (await client.workers(filters=[("worker_id", "=", task.worker_id)], limit=1)).rows
                pid = rows[0].pid if rows else None
        if pid is None:
            return None
        name = worker_err_file(task.worker_id, task.job_id, pid)
        async with limit:
            try:
                text = await client.log_file(node_id=task.node_id, filename=name, lines=TAIL_LINES)
            except CockpitError:
                return None
        address = session_address(text)
        if address is None:
            return None
        host, port = address
        return PausedWorker(
            mode="legacy",
            worker_id=task.worker_id,
            node_id=task.node_id,
            ip=node_ips.get(task.node_id, ""),
            pid=pid,
            port=port,
            host=host,
            job_id=task.job_id,
            task_id=task.task_id,
            task_name=task.name,
            actor_id=task.actor_id,
            since=time.time(),
        )

    found: list[PausedWorker] = []
    reads = 0
    for job in legacy:
        # Not only RUNNING: Ray 2.44 shows a task paused in its worker as SUBMITTED_TO_WORKER.
        tasks = await client.tasks(
            filters=[("job_id", "=", job.job_id), ("state", "!=", "FINISHED")], limit=1000
        )
        live = (t for t in tasks.rows if t.worker_id and t.state in UNFINISHED)
        running = sorted(live, key=lambda t: t.task_id)
        if len(running) > MAX_READS:
            start = int(time.time() // 10) * MAX_READS % len(running)
            running = running[start:] + running[:start]
        running = running[: max(0, MAX_READS - reads)]
        reads += len(running)
        for result in await asyncio.gather(*(probe(t) for t in running)):
            if result is not None:
                found.append(result)
    return tuple(found)


def exception_from_banner(banner: str) -> ExceptionSummary | None:
    """What pdb's first screen says about the raise: `> file(8)bad_task()` then `-> raise ValueError(...)`."""
    where = ""
    for line in banner.splitlines():
        position = _POSITION.match(line)
        if position:
            where = frame_where(position.group("path"), int(position.group("line")), position.group("func"))
        raised = _RAISE.match(line.strip())
        if raised:
            return ExceptionSummary(type_name=raised.group("type"), message=raised.group("msg"), where=where)
    return None


class PdbConsole:
    """One client of a legacy pdb socket: `await console.start()`, then `await console.run("p x")`."""

    def __init__(self, reader: Any, writer: Any, label: str) -> None:
        self._reader = reader
        self._writer = writer
        self.label = label
        self.closed = False
        self.banner = ""

    @classmethod
    async def connect_tcp(cls, host: str, port: int, timeout: float = 10.0) -> PdbConsole:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        except (OSError, asyncio.TimeoutError) as exc:
            raise PdbError(f"cannot reach the pdb session at {host}:{port}: {exc or 'no answer'}.") from None
        return cls(reader, writer, f"{host}:{port}")

    async def start(self, timeout: float = 15.0) -> str:
        """Reads the first screen (where the worker stopped) up to the prompt."""
        self.banner = await self._until_prompt(timeout)
        return self.banner

    async def _until_prompt(self, timeout: float) -> str:
        data = b""
        tail = b""
        """The last bytes read, where the prompt is looked for (`data` stops growing at MAX_OUTPUT)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not tail.endswith(PROMPT):
            left = deadline - loop.time()
            if left <= 0:
                raise PdbError(f"the pdb session at {self.label} did not answer within {timeout:g} s.")
            try:
                chunk = await asyncio.wait_for(self._reader.read(65536), left)
            except asyncio.TimeoutError:
                continue
            except Exception as exc:  # OSError, or asyncssh's ConnectionLost (not an OSError)
                self.closed = True
                raise PdbError(
                    f"the pdb session at {self.label} dropped ({exc or type(exc).__name__})."
                ) from None
            if not chunk:
                self.closed = True
                if data:
                    return _text(data)
                raise PdbError(f"the pdb session at {self.label} closed (the worker went on or exited).")
            if len(data) < MAX_OUTPUT:
                data += chunk
            tail = (tail + chunk)[-len(PROMPT) :]
        if len(data) >= MAX_OUTPUT and not data.endswith(PROMPT):
            return _text(data) + f"\n… (cut at {MAX_OUTPUT} bytes)\n"
        return _text(data[: -len(PROMPT)])

    async def run(self, line: str, timeout: float = 30.0) -> str:
        """Sends one console line; returns what pdb printed before its next prompt."""
        if self.closed:
            raise PdbError(f"the pdb session at {self.label} is closed.")
        command = line.replace("\r", " ").replace("\n", " ")
        try:
            self._writer.write(command.encode("utf-8", "replace") + b"\n")
            drain = getattr(self._writer, "drain", None)
            if drain is not None:
                await drain()
        except Exception as exc:  # the worker went away: BrokenPipe, reset, asyncssh's errors
            self.closed = True
            raise PdbError(
                f"the pdb session at {self.label} dropped ({exc or type(exc).__name__})."
            ) from None
        if command.strip() in ("c", "cont", "continue", "q", "quit", "exit"):
            return await self._rest(timeout=5.0)
        return await self._until_prompt(timeout)

    async def _rest(self, timeout: float) -> str:
        try:
            return await self._until_prompt(timeout)
        except PdbError:
            return ""
        finally:
            await self.close()

    async def close(self) -> None:
        if self.closed and self._writer is None:
            return
        self.closed = True
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace").replace("\r\n", "\n")
