"""The dashboard client's HTTP (`cockpit.core.cluster.wire`) against servers on real sockets here: answers
whole and chunked, connections kept and reused, a kept connection the server closed, answers cut short or
not HTTP, the limits, the UNIX socket of the SSH tunnel, and close() ending a stream under way."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cockpit.core.cluster.wire import AnswerCut, Limits, Wire
from tests.harness.properties import examples

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """One request's line and body (by its Content-Length)."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    body = await reader.readexactly(length) if length else b""
    return head.split(b"\r\n")[0], body


@contextlib.asynccontextmanager
async def server(handler: Handler) -> AsyncIterator[tuple[str, list[int]]]:
    """A server on 127.0.0.1 running HANDLER per connection; yields its URL and the connections made."""
    connections: list[int] = []

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(len(connections))
        try:
            await handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    srv = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    async with srv:
        yield f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}", connections


def ok(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


async def echo_forever(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answers every request on the connection with its own request line."""
    while True:
        line, body = await read_request(reader)
        writer.write(ok(line + b"|" + body))
        await writer.drain()


async def test_requests_reuse_one_kept_connection_and_send_query_and_body() -> None:
    async with server(echo_forever) as (url, connections):
        wire = Wire(url + "/prefix", headers=[("User-Agent", "t")])
        for i in range(3):
            async with wire.request("GET", "/api/x", [("a", "1 2"), ("b", f"{i}&c")]) as answer:
                assert answer.status == 200
                assert await answer.read() == f"GET /prefix/api/x?a=1+2&b={i}%26c HTTP/1.1|".encode()
        async with wire.request("POST", "/api/jobs/", body=b'{"k": 1}') as answer:
            assert await answer.read() == b'POST /prefix/api/jobs/ HTTP/1.1|{"k": 1}'
        await wire.close()
    assert len(connections) == 1


async def test_a_chunked_answer_comes_in_pieces_then_ends() -> None:
    async def chunked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for piece in (b"first ", b"second"):
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
            await asyncio.sleep(0.05)
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        await reader.read()

    async with server(chunked) as (url, _):
        wire = Wire(url)
        async with wire.request("GET", "/stream") as answer:
            pieces = [await answer.chunk(), await answer.chunk(), await answer.chunk()]
        await wire.close()
    assert pieces == [b"first ", b"second", b""]


async def test_a_kept_connection_the_server_closed_is_replaced_for_a_get() -> None:
    async def closes_at_the_second(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line, _ = await read_request(reader)
        writer.write(ok(line))
        await writer.drain()
        await read_request(reader)  # as a server closing an idle connection when a request is on its way

    async with server(closes_at_the_second) as (url, connections):
        wire = Wire(url)
        for _ in range(3):
            async with wire.request("GET", "/a") as answer:
                assert await answer.read() == b"GET /a HTTP/1.1"
        with pytest.raises(AnswerCut):  # a POST is not sent twice: the server may have acted on it
            async with wire.request("POST", "/b", body=b"{}"):
                pass
        await wire.close()
    assert len(connections) == 3  # the GETs: 1, 2 and 3 (the first two replaced); the POST on the third


async def test_an_answer_cut_short_or_not_http_is_answer_cut() -> None:
    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this")

    async def not_http(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"SSH-2.0-OpenSSH_9.2\r\n\r\n")

    async def nothing(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)

    for handler in (cut, not_http, nothing):
        async with server(handler) as (url, _):
            wire = Wire(url)
            with pytest.raises(AnswerCut):
                async with wire.request("GET", "/x") as answer:
                    await answer.read()
            await wire.close()


async def test_refused_and_limits() -> None:
    async with server(echo_forever) as (url, _):
        closed_url = url
    with pytest.raises(ConnectionRefusedError):
        async with Wire(closed_url).request("GET", "/x"):
            pass

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await reader.read()  # no answer, until the client hangs up

    async with server(silent) as (url, _):
        wire = Wire(url)
        with pytest.raises(asyncio.TimeoutError):
            async with wire.request("GET", "/x", limits=Limits(read=0.2)):
                pass
        await wire.close()


async def test_at_most_limit_connections_at_once() -> None:
    under_way = 0
    most = 0

    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal under_way, most
        while True:
            await read_request(reader)
            under_way += 1
            most = max(most, under_way)
            await asyncio.sleep(0.05)
            under_way -= 1
            writer.write(ok(b"x"))
            await writer.drain()

    async def one(wire: Wire) -> bytes:
        async with wire.request("GET", "/x") as answer:
            return await answer.read()

    async with server(slow) as (url, connections):
        wire = Wire(url, limit=2)
        assert await asyncio.gather(*(one(wire) for _ in range(6))) == [b"x"] * 6
        await wire.close()
    assert most == 2 and len(connections) == 2


async def test_over_a_unix_socket_and_close_ends_a_stream_under_way(tmp_path: Path) -> None:
    async def endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
        await writer.drain()
        await reader.read()  # until the client closes

    path = str(tmp_path / "tunnel.sock")
    srv = await asyncio.start_unix_server(endless, path)
    async with srv:
        wire = Wire("http://dashboard", unix_socket=path)
        async with wire.request("GET", "/api/v0/logs/stream") as answer:
            assert await answer.chunk() == b"hello"
            reading = asyncio.ensure_future(answer.chunk())
            await asyncio.sleep(0.05)
            assert not reading.done()
            await wire.close()
            with pytest.raises(AnswerCut):
                await asyncio.wait_for(reading, 5)


async def test_the_request_asks_for_no_compression_and_names_its_host() -> None:
    async def heads(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        writer.write(ok(head))
        await writer.drain()

    async with server(heads) as (url, _):
        wire = Wire(url, headers=[("User-Agent", "ray-cockpit/test")])
        async with wire.request("GET", "/api/version") as answer:
            head = (await answer.read()).decode().lower()
        await wire.close()
    port = url.rsplit(":", 1)[1]
    assert f"host: 127.0.0.1:{port}\r\n" in head and "accept-encoding: identity\r\n" in head
    assert "user-agent: ray-cockpit/test\r\n" in head


async def test_an_endless_answer_read_whole_is_cut_at_the_most() -> None:
    """Something that is not a dashboard may send without end: a whole read stops at its limit."""

    async def endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        piece = b"x" * 65536
        while True:
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()

    async with server(endless) as (url, _):
        wire = Wire(url)
        with pytest.raises(AnswerCut, match="over 1 MiB"):
            async with wire.request("GET", "/x") as answer:
                await answer.read(most=1 << 20)
        await wire.close()


def framed(body: bytes, chunked: bool, pieces: list[int]) -> bytes:
    """BODY as a whole answer: by Content-Length, or chunked in pieces of the sizes given (cycled)."""
    if not chunked:
        return ok(body)
    out, at, i = [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"], 0, 0
    while at < len(body):
        size = pieces[i % len(pieces)]
        out.append(b"%x\r\n%s\r\n" % (len(body[at : at + size]), body[at : at + size]))
        at, i = at + size, i + 1
    out.append(b"0\r\n\r\n")
    return b"".join(out)


@settings(max_examples=examples(60), deadline=None)
@given(
    bodies=st.lists(st.binary(max_size=3000), min_size=1, max_size=3),
    chunked=st.booleans(),
    pieces=st.lists(st.integers(1, 700), min_size=1, max_size=5),
    cuts=st.lists(st.integers(1, 400), min_size=1, max_size=8),
)
def test_any_framing_cut_anywhere_reads_each_body_whole(
    bodies: list[bytes], chunked: bool, pieces: list[int], cuts: list[int]
) -> None:
    """The bytes of several answers on one kept connection, written in pieces cut anywhere (a chunk's
    size line, the CRLF after a head): each answer's body read whole, exactly, in order."""

    async def cut_anywhere(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for body in bodies:
            await read_request(reader)
            data, at, i = framed(body, chunked, pieces), 0, 0
            while at < len(data):
                writer.write(data[at : at + cuts[i % len(cuts)]])
                await writer.drain()
                await asyncio.sleep(0)
                at, i = at + cuts[i % len(cuts)], i + 1

    async def check() -> list[bytes]:
        async with server(cut_anywhere) as (url, connections):
            wire = Wire(url)
            got = []
            for _ in bodies:
                async with wire.request("GET", "/x") as answer:
                    got.append(await answer.read())
            await wire.close()
        assert len(connections) == 1
        return got

    assert asyncio.run(check()) == bodies
