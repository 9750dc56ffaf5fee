"""Provides a TCP relay between a client and the dashboard that can cut its connections and slow its answers.

`cut()` aborts every connection it carries at once, as a dashboard restart or a lost tunnel does, while it
goes on accepting new ones: the client sees its stream drop for real (no mock of either side). With a
rate, an answer of N bytes lasts at least N / rate seconds by construction, whatever the machine's speed,
so a test can show that a read longer than a client's timeout succeeds (or, on code with a limit on
the total time, fails) without measuring time itself. With a delay, each way's bytes arrive that many
seconds late, in order: a long link, for the slow-link fault where the kernel has no `tc netem`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from urllib.parse import urlsplit


async def _pump(
    source: asyncio.StreamReader, sink: asyncio.StreamWriter, rate: float | None, count: Callable[[int], None]
) -> None:
    try:
        while data := await source.read(1 << 16):
            count(len(data))
            sink.write(data)
            await sink.drain()
            if rate:
                await asyncio.sleep(len(data) / rate)
    except (ConnectionError, OSError):
        pass
    finally:
        sink.close()


async def _delayed_pump(
    source: asyncio.StreamReader, sink: asyncio.StreamWriter, delay: float, count: Callable[[int], None]
) -> None:
    """What SOURCE sends reaches SINK `delay` seconds later, in order (a line of that length: bytes keep
    coming meanwhile, as on a long link, rather than one chunk at a time)."""
    loop = asyncio.get_running_loop()
    line: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def deliver() -> None:
        while True:
            due, data = await line.get()
            if not data:
                return
            await asyncio.sleep(max(0.0, due - loop.time()))
            count(len(data))
            sink.write(data)
            await sink.drain()

    delivering = asyncio.ensure_future(deliver())
    try:
        while data := await source.read(1 << 16):
            line.put_nowait((loop.time() + delay, data))
        line.put_nowait((0.0, b""))
        await delivering
    except (ConnectionError, OSError):
        pass
    finally:
        delivering.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionError, OSError):
            await delivering
        sink.close()


def _ignore(_n: int) -> None:
    pass


@dataclass
class Relay:
    url: str
    """Where clients connect (http://127.0.0.1:port)."""
    _writers: set[asyncio.StreamWriter] = field(default_factory=set)
    cuts: int = 0
    carried: int = 0
    """Bytes carried from the server to the clients so far (headers included)."""

    def _carry(self, n: int) -> None:
        self.carried += n

    def cut(self) -> None:
        """Abort every connection carried now (synchronously: no byte crosses after this returns)."""
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()
        self.cuts += 1


@asynccontextmanager
async def relay(url: str, bytes_per_second: float | None = None, delay: float = 0.0) -> AsyncIterator[Relay]:
    """A relay to `url` (http://host:port, or tcp://host:port for any TCP service); its answers come at most
    at `bytes_per_second` if given; with `delay`, every byte each way arrives that many seconds late."""
    target = urlsplit(url)
    host, port = target.hostname or "127.0.0.1", target.port or 80
    tasks: set[asyncio.Task[object]] = set()

    async def carry(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            server_reader, server_writer = await asyncio.open_connection(host, port)
        except OSError:
            client_writer.close()
            return
        handle._writers |= {client_writer, server_writer}
        try:
            if delay:
                await asyncio.gather(
                    _delayed_pump(client_reader, server_writer, delay, _ignore),
                    _delayed_pump(server_reader, client_writer, delay, handle._carry),
                )
            else:
                await asyncio.gather(
                    _pump(client_reader, server_writer, None, _ignore),
                    _pump(server_reader, client_writer, bytes_per_second, handle._carry),
                )
        finally:
            handle._writers -= {client_writer, server_writer}

    def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.ensure_future(carry(reader, writer))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    handle = Relay(url=f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}")
    try:
        yield handle
    finally:
        server.close()
        handle.cut()
        for task in list(tasks):
            task.cancel()
        for task in list(tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await server.wait_closed()
