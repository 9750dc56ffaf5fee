"""Provides the way from a TARGET to a dashboard client: local cluster, dashboard URL or (later) SSH."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from cockpit.core import local_cluster
from cockpit.core.errors import CockpitError
from cockpit.core.ray_api import DashboardClient, load_token
from cockpit.core.targets import Target


@dataclass(frozen=True)
class ConnectOptions:
    """The options every TARGET-taking command shares."""

    token_file: str | None = None
    dashboard_port: int = 8265
    ssh_config: str | None = None
    timeout: float = 10.0


@asynccontextmanager
async def open_dashboard(
    target: Target, options: ConnectOptions | None = None
) -> AsyncIterator[DashboardClient]:
    """A dashboard client for TARGET, closed on exit.

    Raises:
        CockpitError: the target cannot be reached in principle (no local cluster, unsupported kind).
    """
    opts = options or ConnectOptions()
    token = load_token(opts.token_file)
    if target.kind == "local":
        cluster = local_cluster.load()
        if cluster is None:
            raise CockpitError("no local cluster is running: start one with `cockpit local up`.")
        url = cluster.dashboard_url
    elif target.kind == "http":
        assert target.url is not None
        url = target.url
    else:
        raise CockpitError(
            f"{target.raw}: SSH targets are not supported yet; open a tunnel yourself and use http://127.0.0.1:PORT."
        )
    client = DashboardClient(url, token=token, timeout=opts.timeout)
    try:
        yield client
    finally:
        await client.close()
