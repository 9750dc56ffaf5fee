"""Provides HTTP/1.1 to one dashboard: kept-alive connections over TCP or a UNIX socket (the SSH tunnel),
answers read whole or a chunk at a time, and limits on the connection's set-up, on each wait for bytes
and on a whole request.

The protocol is h11's (python-hyper: the parser httpx and uvicorn use, no I/O of its own); the bytes go
over asyncio streams. It replaced aiohttp, whose import (about 100 ms, a third of it the two TLS contexts
it builds at import with the system's CA bundle, which a plain-HTTP or tunnelled dashboard never uses)
was the largest part of every command's start beyond Python and Textual. This side needs little of a
general client: one origin, no cookies, no redirects, no proxies (the environment's are never used), no
compression asked for, a JSON or bytes body.

Errors are `OSError`s: `AnswerCut` when the connection ended before the whole answer, or what came is not
HTTP; the socket's own (refused, reset, no such file); `asyncio.TimeoutError` when a limit passed.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

import h11

READ_SIZE = 1 << 18
"""Bytes asked of the socket at a time: a 17 MB node summary in about 70 reads."""
MOST_READ = 1 << 29
"""The most an answer read whole may hold (512 MiB): the largest a real head sends is the node summary,
about 8.4 KB a node (43 MB at 5,000 nodes); an endless answer from something that is not a dashboard
must not take the login node's memory. Logs are read a chunk at a time, never whole."""
IDLE_KEPT_S = 15.0
"""How long an idle connection is kept for the next request. The dashboard (aiohttp's server) closes one
after 75 s idle; closing ours well before keeps a request from racing the server's close."""


@dataclass(frozen=True)
class Limits:
    """Seconds a request may take (None: no limit): in all, to connect, and on each wait for the
    answer's next bytes."""

    total: float | None = None
    connect: float | None = None
    read: float | None = None


class AnswerCut(ConnectionError):
    """The connection ended before the whole answer came, or what came is not an HTTP answer."""


class _Connection:
    """One connection and its HTTP state (h11's: which side may send what next)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.http = h11.Connection(our_role=h11.CLIENT)
        self.idle_since = time.monotonic()

    def reusable(self) -> bool:
        return self.http.our_state is h11.DONE and self.http.their_state is h11.DONE

    def close(self) -> None:
        with contextlib.suppress(Exception):  # closing a socket the peer already closed
            self.writer.close()


class Answer:
    """An answer under way: its status now, its body read whole (`read`) or a piece at a time
    (`chunk`, each wait limited by the request's `read` limit)."""

    def __init__(self, conn: _Connection, response: h11.Response, read_limit: float | None) -> None:
        self._conn = conn
        self.status: int = response.status_code
        self.read_limit = read_limit
        """The limit on each wait for the body's next bytes (the caller may change it as it reads)."""
        self.complete = False

    async def chunk(self) -> bytes:
        """The body's next bytes as they came, or b"" at its end."""
        while not self.complete:
            event = await _next_event(self._conn, self.read_limit)
            if isinstance(event, h11.Data):
                if event.data:
                    return bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self.complete = True
            else:
                raise AnswerCut(f"the answer ended with {type(event).__name__}")
        return b""

    async def read(self, most: int = MOST_READ) -> bytes:
        """The rest of the body, at most MOST bytes (`AnswerCut` beyond: the connection is closed)."""
        parts = []
        size = 0
        while chunk := await self.chunk():
            size += len(chunk)
            if size > most:
                raise AnswerCut(f"the answer is over {most >> 20} MiB")
            parts.append(chunk)
        return b"".join(parts)


async def _next_event(conn: _Connection, read_limit: float | None) -> Any:
    """h11's next event, reading the socket while it needs bytes (each wait at most READ_LIMIT s)."""
    while True:
        try:
            event = conn.http.next_event()
        except h11.RemoteProtocolError as exc:
            raise AnswerCut(f"not an HTTP answer ({exc})") from None
        if event is not h11.NEED_DATA:
            if event is h11.PAUSED or isinstance(event, h11.ConnectionClosed):
                raise AnswerCut("the connection closed before the whole answer came")
            return event
        data = await asyncio.wait_for(conn.reader.read(READ_SIZE), read_limit)
        try:
            conn.http.receive_data(data)  # b"": the peer closed its side
        except h11.RemoteProtocolError as exc:
            raise AnswerCut(f"not an HTTP answer ({exc})") from None


class Wire:
    """Requests to one origin (BASE_URL's scheme, host and port; its path prefixes every request's), at
    most LIMIT connections at once, each kept for the next request while idle."""

    def __init__(
        self,
        base_url: str,
        *,
        unix_socket: str | None = None,
        headers: Sequence[tuple[str, str]] = (),
        limit: int = 8,
    ) -> None:
        parts = urlsplit(base_url)
        self._tls = parts.scheme == "https"
        self._host = parts.hostname or "localhost"
        self._port = parts.port or (443 if self._tls else 80)
        self._prefix = parts.path.rstrip("/")
        self._unix_socket = unix_socket
        host_header = f"[{self._host}]" if ":" in self._host else self._host
        if parts.port is not None:
            host_header += f":{parts.port}"
        # No compressed answer: a request without Accept-Encoding leaves the choice to the server.
        self._headers = [("Host", host_header), ("Accept-Encoding", "identity"), *headers]
        self._slots = asyncio.Semaphore(limit)
        self._idle: list[_Connection] = []
        self._open: set[_Connection] = set()
        self._closed = False

    async def _connect(self, connect_limit: float | None) -> _Connection:
        if self._unix_socket is not None:
            opening = asyncio.open_unix_connection(self._unix_socket, limit=READ_SIZE)
        else:
            tls: Any = None
            if self._tls:
                import ssl  # only an https dashboard needs a TLS context (the system's CA bundle: ~20 ms)

                tls = ssl.create_default_context()
            opening = asyncio.open_connection(self._host, self._port, ssl=tls, limit=READ_SIZE)
        reader, writer = await asyncio.wait_for(opening, connect_limit)
        conn = _Connection(reader, writer)
        self._open.add(conn)
        return conn

    def _kept(self) -> _Connection | None:
        """An idle connection young enough to use, the others closed."""
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if now - conn.idle_since < IDLE_KEPT_S and not conn.reader.at_eof():
                return conn
            self._drop(conn)
        return None

    def _drop(self, conn: _Connection) -> None:
        conn.close()
        self._open.discard(conn)

    def _release(self, conn: _Connection, answer: Answer | None) -> None:
        if self._closed or answer is None or not answer.complete or not conn.reusable():
            self._drop(conn)
            return
        conn.http.start_next_cycle()
        conn.idle_since = time.monotonic()
        self._idle.append(conn)

    @contextlib.asynccontextmanager
    async def request(
        self,
        method: str,
        path: str,
        params: Sequence[tuple[str, str]] = (),
        *,
        body: bytes | None = None,
        content_type: str = "application/json",
        limits: Limits = Limits(),
    ) -> AsyncIterator[Answer]:
        """Send one request; the block reads its answer. The connection goes back for the next request
        when the answer was read to its end, and is closed otherwise (the block left early, an error)."""
        if self._closed:
            raise AnswerCut("the client is closed")
        target = self._prefix + path + (f"?{urlencode(params)}" if params else "")
        headers = list(self._headers)
        if body is not None:
            headers += [("Content-Type", content_type), ("Content-Length", str(len(body)))]
        async with self._slots:
            conn, answer = await self._answer(method, target, headers, body, limits)
            try:
                yield answer
            finally:
                self._release(conn, answer)

    async def _answer(
        self,
        method: str,
        target: str,
        headers: list[tuple[str, str]],
        body: bytes | None,
        limits: Limits,
    ) -> tuple[_Connection, Answer]:
        """Send the request and read the answer's head, on a kept connection when one is idle. A kept
        connection the server closed meanwhile gives no answer: a GET goes again on another (a POST, PUT
        or DELETE does not: the server may have acted on it)."""
        while True:
            kept = self._kept()
            conn = kept or await self._connect(limits.connect)
            try:
                conn.writer.write(
                    conn.http.send(h11.Request(method=method, target=target, headers=headers)) or b""
                )
                if body is not None:  # as it is: an upload is up to 100 MiB, not copied again
                    conn.writer.writelines(conn.http.send_with_data_passthrough(h11.Data(data=body)) or ())
                conn.writer.write(conn.http.send(h11.EndOfMessage()) or b"")
                await conn.writer.drain()
                while True:
                    event = await _next_event(conn, limits.read)
                    if isinstance(event, h11.Response):
                        return conn, Answer(conn, event, limits.read)
                    if not isinstance(event, h11.InformationalResponse):
                        raise AnswerCut(f"not an HTTP answer ({type(event).__name__})")
            except (AnswerCut, ConnectionError) as exc:
                self._drop(conn)
                if kept is not None and method == "GET":
                    continue
                raise exc from None
            except BaseException:
                self._drop(conn)
                raise

    async def close(self) -> None:
        """Close every connection, those under way too (their readers see the end)."""
        self._closed = True
        for conn in list(self._open):
            self._drop(conn)
        self._idle.clear()
        await asyncio.sleep(0)  # the transports' close callbacks run
