"""Provides a Debug Adapter Protocol client for a Ray worker paused by the Ray Distributed Debugger (debugpy).

The client speaks DAP over any asyncio byte stream: a TCP connection (`DapClient.connect_tcp`) or an
SSH direct-tcpip channel opened in bytes mode (asyncssh's SSHReader/SSHWriter with `encoding=None`).
It relies only on `reader.read(n)` (b"" at the end), `writer.write`, `writer.close` and, when present,
`await writer.drain()`.

One background task reads the stream: it answers each request's future by `request_seq`, keeps recent
events for `wait_event` and hands every event to `on_event`. A peer that breaks the framing ends the
session with a reason (`close_reason`) instead of raising in the reader; see `dap_messages`.

What debugpy 1.8.22 does, verified against it (tests/integration/test_dap_client.py):
- it answers `attach` only after `configurationDone`, and without `setExceptionBreakpoints` a Ray
  worker does not stop on its exception;
- a second client is accepted and initialized, then its `attach` is refused with
  "Server[pid=N] is already being debugged." (DapBusy here); the first session goes on;
- when the debuggee dies under a live adapter, the adapter fails the request in flight ("No more
  messages") and the later ones ("Server[pid=N] disconnected unexpectedly") and sends `terminated`;
  when the adapter dies, the stream ends. Each is DapClosed here;
- `terminated` also comes after a `continue`, with the connection still open: the session stays open
  for the `disconnect` that ends it cleanly (closing first now and then made the adapter drop the next
  client's connection right after its `initialize`).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from cockpit.core.debug.dap_messages import (
    ExceptionDetails,
    Frame,
    Json,
    MessageFramer,
    Scope,
    Stopped,
    Variable,
    encode,
    exception_from,
    frame_from,
    number_of,
    object_of,
    objects_in,
    one_line,
    scope_from,
    stopped_from,
    text_of,
    variable_from,
)
from cockpit.core.debug.errors import DapBusy, DapClosed, DapError

__all__ = [
    "DapClient",
    "ExceptionDetails",
    "Frame",
    "Scope",
    "Stopped",
    "Variable",
]

EVENTS_KEPT = 256
"""Events nobody has waited for yet, kept for `wait_event` (the oldest go first)."""
_READ_CHUNK = 64 * 1024
_BUSY = re.compile(r"is already being debugged", re.I)
_DEBUGGEE_GONE = re.compile(r"^(No more messages|Server\[pid=\d+\] disconnected unexpectedly)\.?$")
# With any path mapping, pydevd gives each file it does not map (all of them, with this one) a
# sourceReference, so `source` can read the worker's files; without one it answers "Source unavailable".
_NO_PATH_MAPPING = {"localRoot": "/nonexistent/ray-cockpit", "remoteRoot": "/nonexistent/ray-cockpit"}


INITIALIZE_TIMEOUT = 5.0
"""debugpy's adapter answers `initialize` at once, but right after a client left without a goodbye it
sometimes never does on that connection; a new connection then works (`DebugSession` retries)."""


class ByteReader(Protocol):
    async def read(self, n: int = ..., /) -> bytes: ...


class ByteWriter(Protocol):
    def write(self, data: bytes, /) -> None: ...

    def close(self) -> None: ...


def address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _connection_failed(exc: Exception) -> str:
    detail = one_line(str(exc))
    return f"the connection failed ({type(exc).__name__}{': ' + detail if detail else ''})"


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Mark a failed future seen (nobody may await it: no "exception was never retrieved")."""
    if not future.cancelled():
        future.exception()


class DapClient:
    """One DAP session over a byte stream; create it inside a running event loop."""

    def __init__(self, reader: ByteReader, writer: ByteWriter, label: str) -> None:
        self.label = label
        """Who is on the other side, in the user's words ("worker 192.0.2.2:46045")."""
        self.on_event: Callable[[str, Json], None] | None = None
        """Called with (event name, body) for every event, from the reader task; must not block."""
        self.stopped: Stopped | None = None
        """The latest `stopped` event; None before one and after `continued`."""
        self._reader = reader
        self._writer = writer
        self._seq = 0
        self._pending: dict[int, tuple[str, asyncio.Future[Json]]] = {}
        self._events: deque[tuple[str, Json]] = deque(maxlen=EVENTS_KEPT)
        self._event_waiters: list[tuple[str, asyncio.Future[Json]]] = []
        self._write_lock = asyncio.Lock()
        self._close_reason: str | None = None
        self._reader_task = asyncio.get_running_loop().create_task(
            self._read_messages(), name=f"DAP reader for {label}"
        )

    @classmethod
    async def connect_tcp(cls, host: str, port: int, timeout: float = 10.0) -> DapClient:
        where = address(host, port)
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        except asyncio.TimeoutError:
            raise DapError(f"no answer from the debugger port {where} within {timeout:g} s.") from None
        except ConnectionRefusedError:
            raise DapError(
                f"nothing listens on {where} (the worker may have exited, or the port is not reachable)."
            ) from None
        except OSError as exc:
            raise DapError(f"cannot connect to the debugger port {where}: {exc.strerror or exc}.") from None
        return cls(reader, writer, f"worker {where}")

    @property
    def closed(self) -> bool:
        return self._close_reason is not None

    @property
    def close_reason(self) -> str | None:
        """Why the session ended, once it has (None while it is open)."""
        return self._close_reason

    async def __aenter__(self) -> DapClient:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()

    # Requests

    async def request(self, command: str, arguments: Json | None = None, timeout: float = 15.0) -> Json:
        """Send a request and return its answer's body ({} without one); a refusal raises DapError with
        the adapter's message, the end of the session DapClosed."""
        future = await self._send(command, arguments)
        return await self._answer(command, future, timeout)

    async def _send(self, command: str, arguments: Json | None) -> asyncio.Future[Json]:
        if self._close_reason is not None:
            raise self._closed_error()
        self._seq += 1
        message: Json = {"seq": self._seq, "type": "request", "command": command}
        if arguments is not None:
            message["arguments"] = arguments
        future: asyncio.Future[Json] = asyncio.get_running_loop().create_future()
        self._pending[self._seq] = (command, future)
        await self._write(message)
        return future

    async def _answer(self, command: str, future: asyncio.Future[Json], timeout: float) -> Json:
        try:
            return await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            raise DapError(f"{self.label} did not answer {command!r} within {timeout:g} s.") from None
        finally:
            self._forget(future)

    def _forget(self, future: asyncio.Future[Json]) -> None:
        for seq, (_command, pending) in list(self._pending.items()):
            if pending is future:
                del self._pending[seq]

    async def _write(self, message: Json) -> None:
        data = encode(message)
        async with self._write_lock:
            try:
                self._writer.write(data)
                drain = getattr(self._writer, "drain", None)
                if drain is not None:
                    await drain()
            except Exception as exc:  # the stream's own: OSError over TCP, asyncssh's over SSH
                self._shutdown(_connection_failed(exc))
                raise self._closed_error() from None

    # The post-mortem session

    async def attach_post_mortem(self, timeout: float = 20.0) -> Stopped:
        """Attach to a worker waiting in `debugpy.wait_for_client()` and return where it stopped.

        On failure the session is closed (after a disconnect, if the attach went through: a worker that
        was not paused must not keep this client's exception breakpoints).
        """
        deadline = time.monotonic() + timeout

        def left() -> float:
            return max(deadline - time.monotonic(), 0.01)

        attach: asyncio.Future[Json] | None = None
        try:
            await self.request(
                "initialize",
                {
                    "clientID": "ray-cockpit",
                    "clientName": "ray-cockpit",
                    "adapterID": "debugpy",
                    "linesStartAt1": True,
                    "columnsStartAt1": True,
                    "pathFormat": "path",
                    "supportsVariableType": True,
                },
                timeout=min(left(), INITIALIZE_TIMEOUT),
            )
            # debugpy answers attach only after configurationDone, so its answer is awaited last.
            attach = await self._send("attach", {"justMyCode": False, "pathMappings": [_NO_PATH_MAPPING]})
            await self._initialized_or_refused(attach, left())
            await self.request(
                "setExceptionBreakpoints", {"filters": ["uncaught", "userUnhandled"]}, timeout=left()
            )
            await self.request("configurationDone", timeout=left())
            await self._answer("attach", attach, left())
            try:
                await self.wait_event("stopped", left())
            except DapClosed:
                raise
            except DapError:
                raise DapError(
                    f"{self.label} did not stop within {timeout:g} s: it is probably no longer paused."
                ) from None
        except asyncio.CancelledError:
            await self.close()
            raise
        except DapError as exc:
            attached = (
                attach is not None and attach.done() and not attach.cancelled() and not attach.exception()
            )
            await self._give_up(attached)
            if not isinstance(exc, DapClosed) and _BUSY.search(str(exc)):
                raise DapBusy(f"another debugger is attached to {self.label}.") from None
            raise
        if self.stopped is None:
            raise DapError(f"{self.label} went on before the cockpit could look at it.")
        return self.stopped

    async def _initialized_or_refused(self, attach: asyncio.Future[Json], timeout: float) -> None:
        """Wait for the `initialized` event; an `attach` refused in the meantime raises its error."""
        initialized = asyncio.ensure_future(self.wait_event("initialized", timeout))
        try:
            await asyncio.wait({initialized, attach}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            if attach.done() and not initialized.done():
                attach.result()
            await initialized
        finally:
            initialized.cancel()
            # It may still end with DapClosed (a session closed before the cancel lands): seen, not logged.
            initialized.add_done_callback(_retrieve)

    async def _give_up(self, attached: bool) -> None:
        if attached and not self.closed:
            with contextlib.suppress(DapError):
                await self.request("disconnect", {"terminateDebuggee": False}, timeout=2.0)
        await self.close()

    async def exception_info(self, thread_id: int) -> ExceptionDetails:
        return exception_from(await self.request("exceptionInfo", {"threadId": thread_id}))

    async def stack(self, thread_id: int, levels: int = 200) -> list[Frame]:
        body = await self.request("stackTrace", {"threadId": thread_id, "startFrame": 0, "levels": levels})
        return [frame_from(frame) for frame in objects_in(body, "stackFrames", "stackTrace")]

    async def scopes(self, frame_id: int) -> list[Scope]:
        body = await self.request("scopes", {"frameId": frame_id})
        return [scope_from(scope) for scope in objects_in(body, "scopes", "scopes")]

    async def variables(self, reference: int, count: int | None = None) -> list[Variable]:
        """The children of a scope or an expandable value (`count` caps how many are asked for)."""
        arguments: Json = {"variablesReference": reference}
        if count is not None:
            arguments.update(start=0, count=count)
        body = await self.request("variables", arguments)
        return [
            variable_from(text_of(item.get("name")), item, "value")
            for item in objects_in(body, "variables", "variables")
        ]

    async def evaluate(self, expression: str, frame_id: int | None, context: str = "repl") -> Variable:
        """Evaluate in the debuggee; an exception there raises DapError with its last line."""
        arguments: Json = {"expression": expression, "context": context}
        if frame_id is not None:
            arguments["frameId"] = frame_id
        return variable_from(expression, await self.request("evaluate", arguments), "result")

    async def source(self, path: str, source_reference: int) -> str:
        """A file's text as the debuggee reads it (for files that are not on this machine).

        debugpy serves only a `source_reference` > 0 (which `attach_post_mortem` arranges for every
        frame); with 0 it answers "Source unavailable"."""
        source = {"path": path, "sourceReference": source_reference}
        body = await self.request("source", {"source": source, "sourceReference": source_reference})
        return text_of(body.get("content"))

    async def release(self, thread_id: int | None = None, timeout: float = 10.0) -> None:
        """Let the debuggee go on (`continue`), leave, and close; the adapter may hang up in between.

        A refused `continue` is not an error when the `disconnect` goes through (it resumes the debuggee
        as well); a failed `disconnect` raises, after the session is closed."""
        thread = thread_id if thread_id is not None else (self.stopped.thread_id if self.stopped else None)
        try:
            if thread is not None:
                with contextlib.suppress(DapError):
                    await self.request("continue", {"threadId": thread}, timeout=timeout)
                    self.stopped = None  # debugpy does not always send `continued` for a `continue`
            await self.request("disconnect", {"terminateDebuggee": False}, timeout=timeout)
        except DapClosed:
            pass
        finally:
            await self.close()

    async def detach(self, timeout: float = 10.0) -> None:
        """Leave without terminating the debuggee, and close (debugpy resumes its threads)."""
        try:
            await self.request("disconnect", {"terminateDebuggee": False}, timeout=timeout)
        except DapClosed:
            pass
        finally:
            await self.close()

    # Events

    async def wait_event(self, name: str, timeout: float) -> Json:
        """The body of the oldest `name` event not waited for yet (of the last 256 events), else of the
        next one to come."""
        for kept in self._events:
            if kept[0] == name:
                self._events.remove(kept)
                return kept[1]
        if self._close_reason is not None:
            raise self._closed_error()
        future: asyncio.Future[Json] = asyncio.get_running_loop().create_future()
        waiter = (name, future)
        self._event_waiters.append(waiter)
        try:
            return await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            raise DapError(f"no {name!r} event from {self.label} within {timeout:g} s.") from None
        finally:
            if waiter in self._event_waiters:
                self._event_waiters.remove(waiter)

    def _dispatch_event(self, name: str, body: Json) -> None:
        if name == "stopped":
            self.stopped = stopped_from(body)
        elif name == "continued":
            self.stopped = None
        waiter = next((w for w in self._event_waiters if w[0] == name and not w[1].done()), None)
        if waiter is not None:
            self._event_waiters.remove(waiter)
            waiter[1].set_result(body)
        else:
            self._events.append((name, body))
        if self.on_event is not None:
            try:
                self.on_event(name, body)
            except Exception as exc:
                # A bug in the handler: reported like any unhandled error, and the session goes on.
                asyncio.get_running_loop().call_exception_handler(
                    {"message": f"DapClient.on_event failed on {name!r}", "exception": exc}
                )

    # The reader and the end

    async def _read_messages(self) -> None:
        framer = MessageFramer()
        try:
            while True:
                try:
                    data = await self._reader.read(_READ_CHUNK)
                except Exception as exc:  # the stream's own: OSError over TCP, asyncssh's over SSH
                    self._shutdown(_connection_failed(exc))
                    return
                if not data:
                    self._shutdown(
                        "the debug adapter closed the connection (the worker or its adapter exited)"
                    )
                    return
                for message in framer.feed(data):
                    await self._handle(message)
                    if self.closed:
                        return
        except DapError as exc:
            self._shutdown(str(exc))
        except Exception as exc:
            self._shutdown(f"the DAP reader failed ({type(exc).__name__}: a bug)")
            raise

    async def _handle(self, message: Json) -> None:
        kind = message["type"]
        if kind == "response":
            entry = self._pending.pop(number_of(message.get("request_seq")), None)
            if entry is None or entry[1].done():
                return
            command, future = entry
            body = object_of(message.get("body"))
            if message.get("success") is True:
                future.set_result(body)
                return
            text = one_line(
                text_of(message.get("message")) or text_of(object_of(body.get("error")).get("format"))
            )
            if _DEBUGGEE_GONE.match(text):
                self._shutdown(f"the worker process went away (debugpy: {text})")
                future.set_exception(self._closed_error())
            else:
                future.set_exception(DapError(text or f"{command} failed (the adapter gave no reason)."))
        elif kind == "event":
            self._dispatch_event(text_of(message.get("event")), object_of(message.get("body")))
        elif kind == "request":
            # A reverse request (runInTerminal, startDebugging): refused, so the adapter does not wait.
            self._seq += 1
            await self._write(
                {
                    "seq": self._seq,
                    "type": "response",
                    "request_seq": number_of(message.get("seq")),
                    "command": text_of(message.get("command")),
                    "success": False,
                    "message": "not supported by ray-cockpit",
                }
            )

    def _closed_error(self) -> DapClosed:
        return DapClosed(f"the debug session with {self.label} ended: {self._close_reason}.")

    def _shutdown(self, reason: str) -> None:
        """End the session now (synchronously, also from the reader task): everyone waiting gets DapClosed."""
        if self._close_reason is not None:
            return
        self._close_reason = reason
        error = self._closed_error()
        waiting = [future for _command, future in self._pending.values()]
        waiting += [future for _name, future in self._event_waiters]
        self._pending.clear()
        self._event_waiters.clear()
        for future in waiting:
            if not future.done():
                future.set_exception(error)
                future.add_done_callback(_retrieve)
        with contextlib.suppress(Exception):  # best effort: the stream may be broken already
            self._writer.close()

    async def close(self) -> None:
        """End the session (again is a no-op); requests still waiting raise DapClosed."""
        self._shutdown("it was closed")
        task = self._reader_task
        if task is not asyncio.current_task() and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        wait_closed = getattr(self._writer, "wait_closed", None)
        if wait_closed is not None:
            with contextlib.suppress(Exception):  # best effort, as above
                await asyncio.wait_for(wait_closed(), 2.0)
