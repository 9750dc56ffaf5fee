"""Provides an attached post-mortem debug session: reach the worker, attach, inspect, release or leave.

The stream to the worker is an SSH `direct-tcpip` channel from the head to `node_ip:port` when the
cockpit reaches the cluster over SSH (no port opened anywhere), plain TCP otherwise (a local cluster,
a dashboard URL on a reachable network).

debugpy resumes the worker when its client disconnects, and the worker then fails its task. To leave a
worker paused (`d`, and after a peek), the session first makes the worker pause again right after:
Ray's post-mortem hook calls `sys.excepthook` once the debugger lets it go, so the session points
`sys.excepthook` at Ray's own `set_trace` for one call. The worker counts as paused again in the worker
table and waits for the next client, with the same exception. If that cannot be set up, the session is
not disconnected (the worker stays paused while the cockpit holds it) and the error says why.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cockpit.core.dap import DapClient, DapError, ExceptionDetails, Frame, Stopped
from cockpit.core.errors import CockpitError
from cockpit.core.legacy_pdb import PdbConsole, PdbError, find_legacy
from cockpit.core.paused import (
    ExceptionSummary,
    PausedCache,
    PausedListing,
    PausedWorker,
    find_paused,
    frame_where,
    user_frame,
)
from cockpit.core.snapshots import JobRow

if TYPE_CHECKING:
    from cockpit.core.connection import Connection

_REPAUSE_SOURCE = """
import sys, ray.util.debugpy as rd
def _cockpit_repause(*_args, _previous=sys.excepthook):
    sys.excepthook = _previous
    rd.set_trace(rd.POST_MORTEM_ERROR_UUID)
sys.excepthook = _cockpit_repause
"""
REPAUSE = f"exec({_REPAUSE_SOURCE!r}, {{}})"
"""Run in the paused frame before a disconnect that must leave the worker paused (see the module doc);
in a namespace of its own, so the frame's variables stay as they were."""
REPAUSE_CHECK = "__import__('sys').excepthook.__name__"

_PKG = re.compile(r"^(?P<root>.*/_ray_pkg_[0-9a-f]+)/")


class AttachError(CockpitError):
    """The worker could not be attached to (unreachable, busy, gone)."""


async def open_stream(
    connection: Connection | None, host: str, port: int, via: str | None = None
) -> tuple[Any, Any]:
    """A byte stream to host:port as the cluster sees it: through the SSH link when there is one.

    `via`: a node to go through (legacy pdb sockets listen on their node's 127.0.0.1); None: the head.
    """
    link = connection.link if connection is not None else None
    if link is None:
        try:
            return await asyncio.wait_for(asyncio.open_connection(host, port), 10)
        except ConnectionRefusedError:
            raise AttachError(
                f"nothing listens on {host}:{port} any more (the worker's debug adapter exited): it cannot "
                "be attached to; stop its job to end it."
            ) from None
        except (OSError, asyncio.TimeoutError) as exc:
            raise AttachError(f"cannot reach {host}:{port}: {exc or 'no answer within 10 s'}.") from None
    try:
        return await link.open_channel(host, port, via=via)
    except CockpitError as exc:
        raise AttachError(str(exc)) from None


@dataclass
class DebugSession:
    """A DAP session on a worker paused after an uncaught exception."""

    worker: PausedWorker
    client: DapClient
    stopped: Stopped
    exception: ExceptionDetails
    frames: list[Frame] = field(default_factory=list)
    local_files: bool = False
    """The worker runs on this machine (a cluster reached without SSH on 127.0.0.1)."""
    ended: str = ""
    """Why the session is over ("released", "left paused", "the worker went away ..."); "" while open."""

    @classmethod
    async def attach(cls, connection: Connection | None, worker: PausedWorker) -> DebugSession:
        """Attach to a worker paused in debugpy: the exception and the stack are read at once.

        Raises:
            AttachError: unreachable, another client holds it, or it went on before we got there.
        """
        reader, writer = await open_stream(connection, worker.ip, worker.port)
        client = DapClient(reader, writer, label=f"{worker.label()} at {worker.address}")
        try:
            stopped = await client.attach_post_mortem()
            details = await client.exception_info(stopped.thread_id)
            frames = await client.stack(stopped.thread_id)
        except DapError as exc:
            await client.close()
            raise AttachError(str(exc)) from None
        local = (
            connection is not None
            and connection.link is None
            and "//127.0.0.1:" in connection.client.base_url
        )
        return cls(
            worker=worker, client=client, stopped=stopped, exception=details, frames=frames, local_files=local
        )

    @property
    def open(self) -> bool:
        return not self.ended and not self.client.closed

    def summary(self) -> ExceptionSummary:
        """The exception and where the user's code raised it (Ray's own frames skipped)."""
        top = user_frame([(f.path, f.line, f.name) for f in self.frames])
        where = frame_where(*top) if top else ""
        return ExceptionSummary(
            type_name=self.exception.type_name,
            message=self.exception.message,
            where=where,
            traceback=self.exception.stack_trace,
        )

    def first_user_frame(self) -> int:
        """The index of the frame to show first: the user's raising frame."""
        for index, frame in enumerate(self.frames):
            if user_frame([(frame.path, frame.line, frame.name)]) == (frame.path, frame.line, frame.name):
                return index
        return 0

    async def source(self, path: str, reference: int) -> str | None:
        """A frame's file as the worker has it (DAP `source`); this machine's copy only when the worker
        cannot send it and runs on this machine (over SSH a file at the same path here may be another
        version of it). None when neither has it."""
        try:
            return await self.client.source(path, reference)
        except DapError:
            if not self.local_files or reference != 0:
                return None
        try:
            text: str = await asyncio.to_thread(Path(path).read_text, "utf-8", "replace")
            return text
        except OSError:
            return None

    async def leave_paused(self) -> None:
        """Disconnect and leave the worker paused, waiting for the next client (see the module doc).

        Raises:
            AttachError: the worker could not be set to pause again; the session stays open.
        """
        frame = self.frames[0].id if self.frames else None
        try:
            await self.client.evaluate(REPAUSE, frame, context="repl")
            check = await self.client.evaluate(REPAUSE_CHECK, frame, context="repl")
        except DapError as exc:
            raise AttachError(
                f"cannot leave the worker paused ({exc}); it stays attached here: release it with c."
            ) from None
        if "_cockpit_repause" not in check.value:
            raise AttachError(
                "cannot leave the worker paused (its Ray has no post-mortem hook to re-arm); "
                "it stays attached here: release it with c."
            )
        await self.client.detach()
        self.ended = "left paused"

    async def release(self) -> None:
        """Let the worker go on: its task fails with the original error, as it would have without us."""
        try:
            await self.client.release(self.stopped.thread_id)
        finally:
            self.ended = "released"
            await self.client.close()

    async def close(self) -> None:
        """Drop the connection (debugpy then lets the worker go on); for exits that cannot do better."""
        await self.client.close()
        self.ended = self.ended or "closed"


async def peek(connection: Connection | None, worker: PausedWorker) -> ExceptionSummary:
    """Attach, read the exception and where it was raised, leave the worker paused again.

    Raises:
        AttachError: as `DebugSession.attach`, or the worker could not be left paused (then it was
            released: the caller says so).
    """
    session = await DebugSession.attach(connection, worker)
    summary = session.summary()
    try:
        await session.leave_paused()
    except AttachError:
        await session.release()
        raise
    return summary


@dataclass
class LegacySession:
    """A legacy pdb console attached to a worker."""

    worker: PausedWorker
    console: PdbConsole
    banner: str

    @classmethod
    async def attach(
        cls, connection: Connection | None, worker: PausedWorker, head_node_id: str
    ) -> LegacySession:
        host = "127.0.0.1" if worker.host in ("localhost", "127.0.0.1", "") else worker.host
        local_socket = host == "127.0.0.1"
        via = worker.ip if local_socket and worker.node_id != head_node_id else None
        try:
            reader, writer = await open_stream(connection, host, worker.port, via=via)
        except AttachError as exc:
            if connection is not None and connection.link is not None and via is not None:
                raise AttachError(
                    f"{exc} The pdb session listens on {worker.ip}'s 127.0.0.1: the cockpit needs SSH to "
                    "that node (through the head), or a cluster started with --ray-debugger-external."
                ) from None
            raise
        console = PdbConsole(reader, writer, label=f"{worker.label()} at {worker.ip}:{worker.port}")
        try:
            banner = await console.start()
        except PdbError as exc:
            await console.close()
            raise AttachError(str(exc)) from None
        return cls(worker=worker, console=console, banner=banner)


def vscode_attach(
    host: str, port: int, frames: list[Frame], name: str = "Ray worker (cockpit)"
) -> dict[str, Any]:
    """The launch.json configuration that attaches VS Code's debugpy to a forwarded port, with the
    working_dir package of the job's frames mapped to the workspace."""
    config: dict[str, Any] = {
        "name": name,
        "type": "debugpy",
        "request": "attach",
        "connect": {"host": host, "port": port},
        "justMyCode": False,
    }
    for frame in frames:
        match = _PKG.match(frame.path.replace("\\", "/"))
        if match:
            config["pathMappings"] = [{"localRoot": "${workspaceFolder}", "remoteRoot": match.group("root")}]
            break
    return config


PEEK_CONCURRENCY = 4


async def discover(
    connection: Connection,
    cache: PausedCache,
    *,
    peek_new: bool = True,
    jobs: Sequence[JobRow] | None = None,
    legacy: bool = True,
    skip: Collection[str] = (),
) -> PausedListing:
    """Every paused worker, debugpy and legacy, with what each raised where that can be learnt.

    `peek_new`: peek at debugpy workers whose exception is not known yet (each is left paused again).
    `skip`: keys not to peek at (sessions the caller holds). `jobs`: the job list, if the caller has it
    (legacy sessions are looked for only in RUNNING jobs that set RAY_DEBUG=legacy).
    """
    client = connection.client
    listing = await find_paused(client, cache)
    if peek_new:
        unknown = [w for w in listing.workers if w.exception is None and not w.note and w.key not in skip]
        limit = asyncio.Semaphore(PEEK_CONCURRENCY)

        async def look(worker: PausedWorker) -> None:
            async with limit:
                try:
                    summary = await peek(connection, worker)
                except AttachError as exc:
                    cache.learn(replace(worker, note=str(exc)))
                    return
            cache.learn(replace(worker, exception=summary))

        await asyncio.gather(*(look(w) for w in unknown))
    workers = [cache.known.get(w.key, w) for w in listing.workers]
    if legacy:
        job_rows = jobs if jobs is not None else await client.jobs()
        found = await find_legacy(client, job_rows)
        for worker in found:
            known = cache.known.get(worker.key)
            cache.learn(replace(worker, since=known.since, exception=known.exception) if known else worker)
        cache.forget_missing((w.key for w in found), mode="legacy")
        workers.extend(cache.known[w.key] for w in found)
    return replace(listing, workers=tuple(workers))
