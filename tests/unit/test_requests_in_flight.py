"""The dashboard client counts its requests under way by kind (`DashboardClient.most_in_flight`): what
the slow-link fault test reads to prove that polls do not pile up; and a GET asked while the same GET is
under way waits for that one (one request to the head); a node table the same as the last is not read
again. A real HTTP server that answers when told, so requests are truly under way at once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from aiohttp import web

from cockpit.core.cluster.dashboard import DashboardClient
from cockpit.core.cluster.errors import DashboardError
from cockpit.core.cluster.transport import request_kind


@asynccontextmanager
async def serving(app: web.Application) -> AsyncIterator[str]:
    """APP served on a free loopback port for the block: its URL."""
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
    finally:
        await runner.cleanup()


def test_a_kind_is_method_path_and_sorted_parameters() -> None:
    assert request_kind("GET", "/api/v0/actors", [("state", "ALIVE"), ("limit", "10")]) == (
        "GET /api/v0/actors?limit=10&state=ALIVE"
    )
    assert request_kind("GET", "/api/version", None) == "GET /api/version"


async def test_the_same_get_at_once_is_one_request_counted_until_it_ends_whatever_the_end() -> None:
    release = asyncio.Event()

    asked = 0

    async def version(_request: web.Request) -> web.Response:
        nonlocal asked
        asked += 1
        await release.wait()
        return web.json_response({"version": "4", "ray_version": "2.60.0", "ray_commit": "x"})

    async def broken(_request: web.Request) -> web.Response:
        return web.Response(status=500, text="no")

    app = web.Application()
    app.router.add_get("/api/version", version)
    app.router.add_get("/api/jobs/", broken)
    async with serving(app) as url:
        try:
            async with DashboardClient(url) as client:
                # The same GET asked three times at once: one request, three answers; one asker leaving early
                # does not end it for the others.
                first, second, third = (asyncio.ensure_future(client.version()) for _ in range(3))
                while not client.in_flight:
                    await asyncio.sleep(0.01)
                await asyncio.sleep(0.05)
                second.cancel()
                release.set()
                assert (await first) == (await third)
                assert dict(client.in_flight) == {}
                assert client.most_in_flight["GET /api/version"] == 1
                assert asked == 1
                # A failed request is released; one whose every asker left ends on its own, and a new asker
                # meanwhile joins it rather than asking again.
                release.clear()
                waiting = asyncio.ensure_future(client.version())
                while not client.in_flight:
                    await asyncio.sleep(0.01)
                waiting.cancel()
                await asyncio.gather(waiting, client.jobs(), return_exceptions=True)
                assert dict(client.in_flight) == {"GET /api/version": 1}
                late = asyncio.ensure_future(client.version())
                await asyncio.sleep(0.05)
                release.set()
                await late
                assert dict(client.in_flight) == {} and asked == 2
                assert client.most_in_flight == {"GET /api/version": 1, "GET /api/jobs/": 1}
        finally:
            release.set()  # the server's handler of the cancelled request ends too


async def test_a_node_table_the_same_as_the_last_is_not_read_again() -> None:
    """The node table is polled every few seconds and rarely changes: an answer byte for byte the last
    gives the very same listing (not decoded again); a changed one is read, and an error still raises."""
    rows = [
        {"node_id": f"n{n}", "node_ip": f"10.0.0.{n}", "node_name": f"host-{n}", "state": "ALIVE",
         "is_head_node": n == 0, "resources_total": {"CPU": 8.0}, "start_time_ms": 1_000_000 + n}
        for n in range(3)
    ]  # fmt: skip
    status = 200

    async def nodes(_request: web.Request) -> web.Response:
        if status != 200:
            return web.Response(status=status, text="no")
        total = len(rows)
        result = {"total": total, "num_after_truncation": total, "num_filtered": total, "result": rows}
        return web.json_response({"result": True, "msg": "", "data": {"result": result}})

    app = web.Application()
    app.router.add_get("/api/v0/nodes", nodes)
    async with serving(app) as url, DashboardClient(url) as client:
        first = await client.node_table()
        assert [node.hostname for node in first.rows] == ["host-0", "host-1", "host-2"]
        assert (await client.node_table()) is first
        rows[1] = {**rows[1], "state": "DEAD", "state_message": "[bold]gone[/]"}
        changed = await client.node_table()
        assert changed is not first and changed.rows[0] == first.rows[0]
        assert (changed.rows[1].state, changed.rows[1].state_message) == ("DEAD", "[bold]gone[/]")
        assert (await client.node_table()) is changed
        status = 500
        with pytest.raises(DashboardError):
            await client.node_table()
        status = 200
        assert (await client.node_table()) is changed
