"""Provides an attached post-mortem debug session: reach the worker, attach, inspect, release or leave.

The stream to the worker is an SSH `direct-tcpip` channel from the head to `node_ip:port` when the
cockpit reaches the cluster over SSH (no port opened anywhere), plain TCP otherwise (a local cluster,
a dashboard URL on a reachable network).

debugpy resumes the worker whenever its client goes away, and the worker then fails its task. So the
first thing a session does once the worker has stopped is to make it pause again after any
disconnect: Ray's post-mortem hook calls `sys.excepthook` once the debugger lets the worker go, and the
session points `sys.excepthook` at Ray's own `set_trace` for that one call ("armed"). From then on
every way out (`d`, a peek ending, a dropped SSH link, the cockpit quitting or killed) leaves the
worker paused and waiting for the next client, with the same exception. Only `release` disarms it
first. An attach that the caller abandons half-way (Esc, quit) runs to its end on its own, shielded,
so it is never cut between the stop and the arming; `settle` waits for those at exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cockpit.core.debug.dap import DapClient, ExceptionDetails, Frame, Stopped
from cockpit.core.debug.errors import AttachError, DapBusy, DapClosed, DapError, PdbError
from cockpit.core.debug.legacy_pdb import PdbConsole, exception_from_banner, find_legacy
from cockpit.core.debug.paused import (
    RETRY_PEEK_SECONDS,
    ExceptionSummary,
    PausedCache,
    PausedListing,
    PausedWorker,
    find_paused,
    frame_where,
    user_frame,
)
from cockpit.core.errors import CockpitError
from cockpit.core.snapshots import JobRow

if TYPE_CHECKING:
    from cockpit.core.connect.connection import Connection

_REPAUSE_SOURCE = """
import sys, ray.util.debugpy as rd
def _cockpit_repause(*_args, _previous=sys.excepthook):
    sys.excepthook = _previous
    rd.set_trace(rd.POST_MORTEM_ERROR_UUID)
if getattr(sys.excepthook, "__name__", "") != "_cockpit_repause":
    sys.excepthook = _cockpit_repause
"""
REPAUSE = f"exec({_REPAUSE_SOURCE!r}, {{}})"
"""Run in the paused frame right after the stop: arms the pause-again hook (see the module doc), in a
namespace of its own so the frame's variables stay as they were; arming twice is arming once."""
_DISARM_SOURCE = """
import sys
if getattr(sys.excepthook, "__name__", "") == "_cockpit_repause":
    sys.excepthook = sys.excepthook.__kwdefaults__["_previous"]
"""
DISARM = f"exec({_DISARM_SOURCE!r}, {{}})"
"""Run before a release: the worker then goes on to fail its task as it would have."""
REPAUSE_CHECK = "getattr(__import__('sys').excepthook, '__name__', '')"

_IN_FLIGHT: set[asyncio.Future[Any]] = set()
"""Attaches and closes that run on after their caller was cancelled (see `settle`)."""


async def settle(timeout: float = 5.0) -> None:
    """Wait (at most TIMEOUT seconds) for attaches that their callers abandoned: each ends with its
    worker armed and left paused. Call before closing the connection they run over."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    # An attach that ends adds the close of its connection: wait for those too.
    while (pending := [f for f in _IN_FLIGHT if not f.done()]) and loop.time() < deadline:
        await asyncio.wait(pending, timeout=deadline - loop.time())


def _keep(future: asyncio.Future[Any]) -> None:
    _IN_FLIGHT.add(future)
    future.add_done_callback(_IN_FLIGHT.discard)


def _close_when_done(future: asyncio.Future[Any]) -> None:
    """An abandoned attach that succeeded: drop its connection (the worker is armed: it pauses again)."""
    if future.cancelled() or future.exception() is not None:
        return
    session: DebugSession = future.result()
    _keep(asyncio.ensure_future(session.close()))


_PKG = re.compile(r"^(?P<root>.*/_ray_pkg_[0-9a-f]+)/")


CLOSE_SECONDS = 3.0
"""How long a closing session waits for debugpy to take its goodbye."""
BUSY_RETRIES = (0.5, 1.0, 1.5, 2.0, None)
"""Waits between attaches refused because another client holds the worker (then it is said)."""


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


def on_this_machine(connection: Connection | None) -> bool:
    """The cluster runs on this machine: reached without SSH, on 127.0.0.1 (a local cluster)."""
    return connection is not None and connection.link is None and "//127.0.0.1:" in connection.client.base_url


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
    armed: bool = False
    """The worker pauses again whenever this session goes away (see the module doc)."""

    @classmethod
    async def attach(cls, connection: Connection | None, worker: PausedWorker) -> DebugSession:
        """Attach to a worker paused in debugpy and arm it (see the module doc); the exception and the
        stack are read at once. Cancelling the caller does not cut the attach short (it is shielded and
        ends with the worker left paused).

        Raises:
            AttachError: unreachable, another client holds it, or it went on before we got there.
        """
        future = asyncio.ensure_future(cls._attach(connection, worker))
        _keep(future)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            future.add_done_callback(_close_when_done)
            raise

    @classmethod
    async def _attach(cls, connection: Connection | None, worker: PausedWorker) -> DebugSession:
        for wait in BUSY_RETRIES:
            try:
                return await cls._attach_once(connection, worker)
            except AttachError as exc:
                # debugpy's adapter says "already being debugged" for a moment after the last client
                # left (the worker pauses again faster than the adapter forgets that client), and while
                # a peek of the watcher holds it: both let go within a second or two.
                if not exc.busy:
                    raise
                if wait is None:
                    if "'initialize'" in str(exc):
                        raise AttachError(
                            f"the debug adapter of {worker.label()} at {worker.address} does not answer "
                            "(debugpy's adapter can hang after a client vanished without a goodbye): the "
                            "worker stays paused but cannot be attached to; stop its job to end it."
                        ) from None
                    raise
            await asyncio.sleep(wait)
        raise AssertionError("unreachable")

    @classmethod
    async def _attach_once(cls, connection: Connection | None, worker: PausedWorker) -> DebugSession:
        reader, writer = await open_stream(connection, worker.ip, worker.port)
        client = DapClient(reader, writer, label=f"{worker.label()} at {worker.address}")
        try:
            stopped = await client.attach_post_mortem()
            frames = await client.stack(stopped.thread_id)
            armed = await _arm(client, frames)
            details = await client.exception_info(stopped.thread_id)
        except DapBusy as exc:
            await client.close()
            raise AttachError(str(exc), busy=True) from None
        except DapError as exc:
            await client.close()
            # No answer to `initialize`: nothing was asked of the worker yet, a new connection may work.
            raise AttachError(str(exc), busy="'initialize'" in str(exc)) from None
        except BaseException:
            await client.close()
            raise
        local = on_this_machine(connection)
        return cls(
            worker=worker,
            client=client,
            stopped=stopped,
            exception=details,
            frames=frames,
            local_files=local,
            armed=armed,
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
            AttachError: the worker could not be armed; the session stays open.
        """
        if not self.armed:
            self.armed = await _arm(self.client, self.frames)
        if not self.armed:
            raise AttachError(
                "cannot leave the worker paused (its Ray has no post-mortem hook to re-arm); it stays "
                "attached here: release it with c (quitting the cockpit releases it too)."
            )
        await self.client.detach()
        self.ended = "left paused"

    async def release(self) -> None:
        """Let the worker go on: its task fails with the original error, as it would have without us.

        Raises:
            AttachError: the worker could not be disarmed (it would only pause again); still attached.
        """
        frame = self.frames[0].id if self.frames else None
        if self.armed:
            try:
                await self.client.evaluate(DISARM, frame, context="repl")
                check = await self.client.evaluate(REPAUSE_CHECK, frame, context="repl")
            except DapError as exc:
                raise AttachError(f"cannot release the worker ({exc}).") from None
            if "_cockpit_repause" in check.value:
                raise AttachError("cannot release the worker: its pause-again hook stayed in place.")
            self.armed = False
        try:
            await self.client.release(self.stopped.thread_id)
        finally:
            self.ended = "released"
            await self.client.close()

    async def close(self) -> None:
        """Leave (any exit path can call this): an armed worker pauses again. With a goodbye (DAP
        `disconnect`) when there is time for one: debugpy's adapter can stop answering new clients
        after one vanished without it (seen after a few such drops in a row)."""
        if not self.client.closed:
            with contextlib.suppress(DapError, asyncio.TimeoutError):
                await asyncio.wait_for(self.client.detach(), CLOSE_SECONDS)
        await self.client.close()
        self.ended = self.ended or "closed"


async def _arm(client: DapClient, frames: list[Frame]) -> bool:
    """Arms the pause-again hook (see the module doc); False when this worker's Ray cannot be armed."""
    frame = frames[0].id if frames else None
    try:
        await client.evaluate(REPAUSE, frame, context="repl")
        check = await client.evaluate(REPAUSE_CHECK, frame, context="repl")
    except DapClosed:
        raise
    except DapError:
        return False
    return "_cockpit_repause" in check.value


async def peek(connection: Connection | None, worker: PausedWorker) -> ExceptionSummary:
    """Attach, read the exception and where it was raised, and leave the worker paused again.

    Raises:
        AttachError: as `DebugSession.attach`; or the worker could not be armed, and since a debugpy
            worker goes on as soon as its client leaves, it was released (the message says so).
    """
    session = await DebugSession.attach(connection, worker)
    summary = session.summary()
    if not session.armed:
        await session.close()
        raise AttachError(
            f"{summary.one_line()}: looked at, and it could not be left paused (its Ray has no "
            "post-mortem hook to re-arm), so it went on and its task failed."
        )
    await session.leave_paused()
    return summary


@dataclass
class LegacySession:
    """A legacy pdb console attached to a worker."""

    worker: PausedWorker
    console: PdbConsole
    banner: str

    def summary(self) -> ExceptionSummary | None:
        """Where pdb stopped and the raise it stopped on, from its first screen (None if not a raise)."""
        return exception_from_banner(self.banner)

    @classmethod
    async def attach(
        cls, connection: Connection | None, worker: PausedWorker, head_node_id: str
    ) -> LegacySession:
        host = "127.0.0.1" if worker.host in ("localhost", "127.0.0.1", "") else worker.host
        local_socket = host == "127.0.0.1"
        via = worker.ip if local_socket and worker.node_id != head_node_id else None
        over_ssh = connection is not None and connection.link is not None
        if local_socket and not over_ssh and not on_this_machine(connection):
            # This machine's 127.0.0.1 is not the worker's: another user's port could be there.
            raise AttachError(
                f"the pdb session listens on {worker.ip}'s 127.0.0.1, which only SSH to that node can "
                "reach: connect with an SSH TARGET, or start the cluster with --ray-debugger-external."
            )
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
        except BaseException:  # cancelled (Esc while attaching): a held socket would block the worker
            await console.close()
            raise
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
    node_ips: Mapping[str, str] | None = None,
) -> PausedListing:
    """Every paused worker, debugpy and legacy, with what each raised where that can be learnt.

    `peek_new`: peek at debugpy workers whose exception is not known yet (each is left paused again).
    `skip`: keys not to peek at (sessions the caller holds). `jobs`: the job list, if the caller has it
    (legacy sessions are looked for only in RUNNING jobs that set RAY_DEBUG=legacy).
    """
    client = connection.client
    listing = await find_paused(client, cache)
    if peek_new:
        now = time.time()
        unknown = [
            w
            for w in listing.workers
            if w.exception is None
            and w.key not in skip
            and (not w.note or now - w.note_at > RETRY_PEEK_SECONDS)
        ]
        limit = asyncio.Semaphore(PEEK_CONCURRENCY)

        async def look(worker: PausedWorker) -> None:
            async with limit:
                try:
                    summary = await peek(connection, worker)
                except AttachError as exc:
                    cache.learn(replace(worker, note=str(exc), note_at=time.time()))
                    return
            cache.learn(replace(worker, exception=summary, note=""))

        await asyncio.gather(*(look(w) for w in unknown))
    workers = [cache.known.get(w.key, w) for w in listing.workers]
    if not legacy:  # the legacy sessions found last time stand until the next search
        workers.extend(w for w in cache.known.values() if w.mode == "legacy")
    else:
        job_rows = jobs if jobs is not None else await client.jobs()
        found = await find_legacy(client, job_rows, node_ips)
        for worker in found:
            known = cache.known.get(worker.key)
            cache.learn(replace(worker, since=known.since, exception=known.exception) if known else worker)
        cache.forget_missing((w.key for w in found), mode="legacy")
        workers.extend(cache.known[w.key] for w in found)
    return replace(listing, workers=tuple(workers))
