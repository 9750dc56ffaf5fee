"""Ids from the cluster or the user go into dashboard URLs as one quoted path segment, or as query values.

A job id like `../x` or `a?b=c` must name that job and nothing else: never another endpoint, another job
or an extra query parameter. The URL each call sends is read as it arrives at a real socket: a server
here that notes each request's line and answers 400 (nothing is mocked).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from hypothesis import given, settings
from yarl import URL

from cockpit.core.cluster.answers import path_segment
from cockpit.core.cluster.dashboard import DashboardClient
from cockpit.core.cluster.errors import DashboardError, NotFound, RequestRejected
from tests.harness.hostile import hostile_text
from tests.harness.properties import examples

CLOSED = "http://127.0.0.1:1"
"""Nothing listens on port 1: a request refused before it is sent."""

HOSTILE_IDS = [
    "../x",
    "a?b=c",
    "a#b",
    "a/b",
    "%2e%2e",
    "...",
    "raysubmit_1 2",
    "x/../../api/version",
    "中\x1b",
]


async def sent(call: Callable[[DashboardClient], Awaitable[Any]]) -> list[tuple[str, URL]]:
    """The (method, URL) of every request CALL made, as a server on a socket here read them."""
    requests: list[tuple[str, URL]] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        method, target, _version = head.split(b"\r\n")[0].decode("ascii").split(" ")
        requests.append((method, URL(f"http://127.0.0.1{target}", encoded=True)))
        writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server, DashboardClient(f"http://127.0.0.1:{port}", timeout=5) as client:
        with pytest.raises(DashboardError):
            result = call(client)
            if hasattr(result, "__anext__"):
                await result.__anext__()
            else:
                await result
    return requests


@pytest.mark.parametrize("job_id", HOSTILE_IDS)
async def test_job_ids_are_one_path_segment(job_id: str) -> None:
    calls: list[tuple[Callable[[DashboardClient], Awaitable[Any]], str, tuple[str, ...]]] = [
        (lambda c: c.stop_job(job_id), "POST", ("/", "api", "jobs", job_id, "stop")),
        (lambda c: c.delete_job(job_id), "DELETE", ("/", "api", "jobs", job_id)),
        (lambda c: c.job(job_id), "GET", ("/", "api", "jobs", job_id)),
        (lambda c: c.package_exists(job_id), "GET", ("/", "api", "packages", "gcs", job_id)),
        (lambda c: c.upload_package(job_id, b"zip"), "PUT", ("/", "api", "packages", "gcs", job_id)),
    ]
    for call, method, parts in calls:
        [(sent_method, url)] = await sent(call)
        assert sent_method == method
        assert url.parts == parts
        assert url.query == {} and url.fragment == ""


@pytest.mark.parametrize("job_id", ["", ".", ".."])
async def test_ids_no_url_can_spell_are_not_found_before_sending(job_id: str) -> None:
    """ "." and ".." are resolved away by any URL library (`/api/jobs/../stop` is `/api/stop`)."""
    async with DashboardClient(CLOSED, timeout=5) as client:
        for call in (client.stop_job, client.delete_job, client.job):
            with pytest.raises(NotFound) as caught:
                await call(job_id)
            assert "\n" not in str(caught.value)


@pytest.mark.parametrize("value", [*HOSTILE_IDS, "..", "."])
async def test_log_ids_travel_as_query_values(value: str) -> None:
    calls: list[tuple[Callable[[DashboardClient], Any], dict[str, str]]] = [
        (lambda c: c.log_index(value, glob=value), {"node_id": value, "glob": value}),
        (lambda c: c.log_file(node_id=value, filename=value), {"node_id": value, "filename": value}),
        (lambda c: c.log_bytes([("actor_id", value), ("suffix", "out")]), {"actor_id": value}),
        (lambda c: c.stream_log([("node_id", value), ("filename", value)]), {"filename": value}),
        (lambda c: c.actors(filters=[("name", "=", value)]), {"filter_values": value}),
    ]
    for call, expected in calls:
        [(_method, url)] = await sent(call)
        for key, wanted in expected.items():
            assert url.query.getall(key) == [wanted]


async def test_a_value_that_cannot_be_sent_is_refused_before_sending() -> None:
    """A lone surrogate has no UTF-8 form: a client that sends it empty (aiohttp did) asks for another file
    or another filter without a word; the client refuses in one line instead."""
    async with DashboardClient(CLOSED, timeout=5) as client:
        with pytest.raises(RequestRejected, match="cannot be sent"):
            await client.log_file(node_id="n", filename="a\ud800.log")
        with pytest.raises(RequestRejected, match="cannot be sent"):
            await client.actors(filters=[("name", "=", "w\udfff")])


@settings(max_examples=examples(200), deadline=None)
@given(hostile_text)
def test_a_path_segment_is_one_segment_naming_its_value(value: str) -> None:
    if value in ("", ".", ".."):
        with pytest.raises(NotFound):
            path_segment(value)
        return
    url = URL(f"{CLOSED}/api/jobs/{path_segment(value)}/stop")
    assert url.parts[:3] == ("/", "api", "jobs") and url.parts[-1] == "stop" and len(url.parts) == 5
    assert url.query_string == "" and url.fragment == ""
    if value.encode("utf-8", errors="surrogatepass").decode("utf-8", errors="replace") == value:
        assert url.parts[3] == value
