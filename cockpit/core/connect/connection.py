"""Provides the way from a TARGET to a dashboard client: local cluster, dashboard URL, or SSH to the head."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from cockpit.core.cluster.dashboard import DashboardClient, load_token
from cockpit.core.cluster.errors import DashboardOff, DashboardUnreachable
from cockpit.core.connect.without_dashboard import HeadOverSsh, ssh_starter
from cockpit.core.errors import CockpitError
from cockpit.core.local import record
from cockpit.core.ssh.errors import UnknownHostKey
from cockpit.core.targets import Target

if TYPE_CHECKING:
    from cockpit.core.slurm.queue import SlurmJob
    from cockpit.core.snapshots import NodeSnapshot

    # asyncssh costs ~100 ms and ~15 MiB to import: only SSH targets load it (see BENCHMARKS.md).
    from cockpit.core.ssh.link import SshLink


@dataclass(frozen=True)
class ConnectOptions:
    """The options every TARGET-taking command shares."""

    token_file: str | None = None
    dashboard_port: int = 8265
    ssh_config: str | None = None
    accept_new: bool = False
    expose_port: int | None = None
    timeout: float = 10.0
    confirm_host_key: Callable[[UnknownHostKey], Awaitable[bool]] | None = None
    """Asks the user whether to trust an unknown host key; None refuses (non-interactive use)."""
    ask_passphrase: Callable[[str], Awaitable[str | None]] | None = None
    on_notice: Callable[[str], None] | None = None
    """Told one sentence about the connection worth knowing (e.g. a token file the cluster ignores)."""


@dataclass
class Connection:
    """An open dashboard client and, for SSH targets, the link under it."""

    client: DashboardClient
    link: SshLink | None = None
    slurm: SlurmJob | None = None
    """For `slurm:` targets: the job as it was when the connection opened (running)."""
    head: HeadOverSsh | None = None
    """For SSH and `slurm:` targets: the head itself, asked why its dashboard does not answer and, when
    it runs Ray without one (`client.without_dashboard` says so), for its nodes."""


async def cluster_nodes(connection: Connection, fresh: bool = False) -> tuple[NodeSnapshot, ...]:
    """Every node the cluster knows: from the dashboard, or, where the head runs Ray without one (over
    SSH), from the head's own Ray (`HeadOverSsh.nodes`: membership and resources, no host statistics).

    Raises:
        DashboardError: the dashboard did not answer (and the head did not say it runs without one).
    """
    head = connection.head
    if head is None or connection.client.without_dashboard is None:
        try:
            return await connection.client.nodes(fresh=fresh)
        except DashboardOff:
            if head is None:
                raise
    assert head is not None
    return await head.nodes()


async def _start_link(target: Target, opts: ConnectOptions) -> SshLink:
    from cockpit.core.ssh.host_keys import record_host_key
    from cockpit.core.ssh.link import SshLink, SshOptions

    ssh = SshOptions(
        config=opts.ssh_config,
        accept_new=opts.accept_new,
        dashboard_port=opts.dashboard_port,
        expose_port=opts.expose_port,
        ask_passphrase=opts.ask_passphrase,
    )
    while True:
        link = SshLink(target, ssh)
        try:
            await link.start()
            return link
        except UnknownHostKey as unknown:
            await link.close()
            if opts.confirm_host_key is None or not await opts.confirm_host_key(unknown):
                raise
            await asyncio.to_thread(record_host_key, unknown)  # a file write: off the loop
        except BaseException:
            await link.close()
            raise


def _holds_its_port(cluster: record.LocalCluster) -> bool:
    """Whether the recorded dashboard port is still held by the cluster's own processes."""
    from cockpit.core.local.processes import dashboard_is_ours

    return dashboard_is_ours(cluster)


def _local_token(opts: ConnectOptions) -> str | None:
    """The local cluster's token: its own (none if it runs without), or an explicit --token-file. Never
    RAY_AUTH_TOKEN nor ~/.ray/auth_token: those are the user's other clusters' tokens."""
    return load_token(opts.token_file) if opts.token_file else record.cluster_token()


def _local_or_http(target: Target, opts: ConnectOptions) -> tuple[str, str | None]:
    """The dashboard URL and token of a `local` or `http://` TARGET. An address that is the local
    cluster's still finds that cluster's token (only its own, and only while its processes hold the port).

    Raises:
        CockpitError: `local`, and no local cluster runs (or its port is no longer its own).
    """
    cluster = record.load()
    if target.kind == "local":
        if cluster is None:
            raise CockpitError("no local cluster is running: start one with `cockpit local up`.")
        if not _holds_its_port(cluster):
            raise CockpitError(
                f"the local cluster recorded at 127.0.0.1:{cluster.dashboard_port} no longer holds that "
                "port (it stopped?): `cockpit local down`, then `cockpit local up`."
            )
        return cluster.dashboard_url, _local_token(opts)
    assert target.url is not None
    own = cluster is not None and target.url.rstrip("/") == cluster.dashboard_url
    if own and cluster is not None and _holds_its_port(cluster):
        return target.url, _local_token(opts)
    return target.url, load_token(opts.token_file)


@asynccontextmanager
async def open_connection(target: Target, options: ConnectOptions | None = None) -> AsyncIterator[Connection]:
    """A dashboard client for TARGET (and its SSH link), closed on exit.

    Raises:
        CockpitError: the target cannot be reached (no local cluster, SSH refused, host key changed ...).
    """
    opts = options or ConnectOptions()
    link: SshLink | None = None
    job: SlurmJob | None = None
    head: HeadOverSsh | None = None
    if target.kind in ("local", "http"):
        # Files and a /proc scan: off the event loop, which may be drawing the TUI, in one hop (each hop
        # back waits for the loop between two of the first screen's frames).
        url, token = await asyncio.to_thread(_local_or_http, target, opts)
        client = DashboardClient(url, token=token, timeout=opts.timeout)
    else:
        if target.kind == "slurm":
            job, target, opts = await _slurm_head(target, opts)
        token = await asyncio.to_thread(_token_of, opts, job)
        link = await _start_link(target, opts)
        head = HeadOverSsh(target.raw, opts.dashboard_port, ssh_starter(link.start_process))
        client = DashboardClient(
            "http://dashboard",
            token=token,
            unix_socket=link.socket_path,
            timeout=opts.timeout,
            label=f"{target.raw} (ssh → 127.0.0.1:{opts.dashboard_port})",
            link_status=link.status_line,
            why_unreachable=head.why_unreachable,
        )
    try:
        if opts.token_file and opts.on_notice is not None:
            notice = await _unused_token(client)
            if notice:
                opts.on_notice(notice)
        yield Connection(client=client, link=link, slurm=job, head=head)
    finally:
        await client.close()
        if head is not None:
            await head.close()
        if link is not None:
            await link.close()


async def _slurm_head(target: Target, opts: ConnectOptions) -> tuple[SlurmJob, Target, ConnectOptions]:
    """The running Slurm job of TARGET, the SSH target of its first host (the Ray head), and the options
    with the dashboard port its `cockpit slurm up` script chose (else --dashboard-port).

    Raises:
        SlurmNotRunning: the job waits or ended (the error carries it: state, reason, estimate).
        SlurmError: Slurm's commands are missing here or the job is unknown.
    """
    from cockpit.core.slurm import queue as slurm

    assert target.slurm_job is not None
    job = await slurm.lookup(target.slurm_job)
    if not job.running or job.head is None:
        raise slurm.SlurmNotRunning(job)
    if job.port_pending:  # running, but its script has not started the head yet: not 8265 by mistake
        raise DashboardUnreachable(
            f"slurm job {job.job_id} runs on {job.head}; its Ray head is starting (no dashboard port yet)."
        )
    head = Target(kind="ssh", raw=f"{target.raw} ({job.head})", host=job.head)
    port = job.dashboard_port
    return job, head, replace(opts, dashboard_port=port) if port else opts


def _token_of(opts: ConnectOptions, job: SlurmJob | None) -> str | None:
    """--token-file, else the token `cockpit slurm up` made for that job, else Ray's usual places."""
    if opts.token_file is None and job is not None:
        from cockpit.core.slurm.script import job_token

        token = job_token(job.job_id)
        if token:
            return token
    return load_token(opts.token_file)


async def _unused_token(client: DashboardClient) -> str | None:
    """A sentence when the cluster does not use the token given with --token-file (instead of leaving
    the user to wonder why it changes nothing, or why a 401 does not come)."""
    try:
        mode = await client.auth_mode()
    except CockpitError:
        return None
    if mode == "absent":
        return "this cluster's Ray has no token auth (it came with Ray 2.52): --token-file is not used."
    if mode == "disabled":
        return "this cluster runs without token auth: --token-file is not used."
    return None


@asynccontextmanager
async def open_dashboard(
    target: Target, options: ConnectOptions | None = None
) -> AsyncIterator[DashboardClient]:
    """Like `open_connection`, for callers that only need the dashboard client."""
    async with open_connection(target, options) as connection:
        yield connection.client


async def exposure_warning(connection: Connection) -> str | None:
    """A warning when anyone who reaches the dashboard can run code as you.

    That is a cluster without token auth whose dashboard also answers on a non-loopback address. Over
    SSH the head's own node IP is probed through the link; for a URL target, its host is checked.
    """
    client = connection.client
    try:
        if await client.auth_mode() == "token":
            return None
    except CockpitError:
        return None
    if connection.link is None:
        host = client.base_url.split("://", 1)[-1].rsplit(":", 1)[0].strip("[]")
        if host in ("127.0.0.1", "localhost", "::1"):
            return None
        return f"⚠ no token auth and the dashboard is reachable at {host}: anyone there can run jobs"
    try:
        head = next(n for n in (await client.node_table()).rows if n.is_head and n.alive)
        _reader, writer = await connection.link.open_channel(head.ip, connection.link.options.dashboard_port)
    except (CockpitError, StopIteration, OSError):
        return None
    writer.close()
    return (
        f"⚠ no token auth and the dashboard listens on {head.ip}: anyone on the cluster network can run jobs"
    )
