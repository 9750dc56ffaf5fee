"""The dashboard client counts its requests under way by kind (`DashboardClient.most_in_flight`): what
the slow-link fault test reads to prove that polls do not pile up. A real HTTP server that answers when
told, so two requests are truly under way at once."""

from __future__ import annotations

import asyncio

from aiohttp import web

from cockpit.core.cluster.dashboard import DashboardClient, request_kind


def test_a_kind_is_method_path_and_sorted_parameters() -> None:
    assert request_kind("GET", "/api/v0/actors", [("state", "ALIVE"), ("limit", "10")]) == (
        "GET /api/v0/actors?limit=10&state=ALIVE"
    )
    assert request_kind("GET", "/api/version", None) == "GET /api/version"


async def test_requests_under_way_are_counted_by_kind_and_released_on_any_end() -> None:
    release = asyncio.Event()

    async def version(_request: web.Request) -> web.Response:
        await release.wait()
        return web.json_response({"version": "4", "ray_version": "2.60.0", "ray_commit": "x"})

    async def broken(_request: web.Request) -> web.Response:
        return web.Response(status=500, text="no")

    app = web.Application()
    app.router.add_get("/api/version", version)
    app.router.add_get("/api/jobs/", broken)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        async with DashboardClient(f"http://127.0.0.1:{port}") as client:
            first = asyncio.ensure_future(client.version())
            second = asyncio.ensure_future(client.version())
            while client.in_flight["GET /api/version"] < 2:
                await asyncio.sleep(0.01)
            release.set()
            await asyncio.gather(first, second)
            assert dict(client.in_flight) == {}
            assert client.most_in_flight["GET /api/version"] == 2
            # A failed request and a cancelled one are released too.
            release.clear()
            waiting = asyncio.ensure_future(client.version())
            while not client.in_flight:
                await asyncio.sleep(0.01)
            waiting.cancel()
            await asyncio.gather(waiting, client.jobs(), return_exceptions=True)
            assert dict(client.in_flight) == {}
            assert client.most_in_flight["GET /api/jobs/"] == 1
    finally:
        release.set()  # the server's handler of the cancelled request ends too
        await runner.cleanup()
