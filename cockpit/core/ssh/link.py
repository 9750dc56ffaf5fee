"""Provides the SSH link to the Ray head: one connection, a private tunnel to the dashboard, reconnection.

asyncssh does the protocol, the agent and the keys; `config` says what the user's OpenSSH config asks
for, and `host_keys` decides about every host key. This module adds what a shared login node needs:

* The dashboard is reached through a UNIX socket in a 0700 directory (never a TCP listener other users
  could reach), unless the user asks for a loopback port with `--expose-port`.
* One connection; when it drops, it is re-opened with backoff and the socket comes back at the same
  path. Permanent failures (auth refused, changed host key) stop the retries.
* `ProxyJump` chains are opened hop by hop, each hop under the same host-key rules.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import os
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncssh

from cockpit.core.errors import is_permanent
from cockpit.core.ssh.config import Hop, config_files, encrypted_identity, hop_chain, identity_files
from cockpit.core.ssh.errors import AuthenticationFailed, PassphraseNeeded, SshError
from cockpit.core.ssh.hop import HostKeyClient, plan_hop
from cockpit.core.ssh.host_keys import record_host_key, refusal
from cockpit.core.targets import Target, host_name_problem, shown_target

BACKOFF_SECONDS = (0.5, 1.0, 2.0, 4.0)
"""Waits between reconnection attempts; capped at 4 s so the tunnel is back within seconds of the head."""
DEFAULT_KEEPALIVE = 10


@dataclass(frozen=True)
class SshOptions:
    """How to reach the head: the user's OpenSSH settings plus the cockpit's own choices."""

    config: str | None = None
    """OpenSSH client config (like `ssh -F`); default `~/.ssh/config` when it exists."""
    accept_new: bool = False
    """Accept and record an unknown host key (never a changed one)."""
    dashboard_host: str = "127.0.0.1"
    """The dashboard's address as seen from the head."""
    dashboard_port: int = 8265
    expose_port: int | None = None
    """Also listen on 127.0.0.1:PORT (for a browser or VS Code); only when the user asks."""
    passphrase: str | None = None
    ask_passphrase: Callable[[str], Awaitable[str | None]] | None = None
    """Asked for an encrypted key's passphrase (kept in memory for reconnects, never stored)."""


@dataclass
class LinkStatus:
    """What the header shows about the SSH link."""

    state: str = "connecting"
    """connecting | connected | reconnecting | failed"""
    detail: str = ""
    attempt: int = 0
    next_retry_at: float | None = None
    since: float = field(default_factory=time.time)

    def describe(self) -> str:
        if self.state == "reconnecting" and self.next_retry_at is not None:
            wait = max(0.0, self.next_retry_at - time.time())
            return f"SSH reconnecting, attempt {self.attempt}, next in {wait:.0f} s"
        if self.state == "failed":
            return f"SSH failed: {self.detail}"
        return f"SSH {self.state}"


class SshLink:
    """One SSH connection to the head (through any jump hosts) with a private tunnel to the dashboard.

    Use `await link.start()` (raises on a permanent failure), then `link.socket_path` with an HTTP client
    over a UNIX socket, `await link.open_channel(ip, port)` for other services, and `await link.close()`.
    """

    def __init__(self, target: Target, options: SshOptions) -> None:
        if target.kind != "ssh" or not target.host:
            raise ValueError("SshLink needs an SSH target")
        self.target = Hop(host=target.host, user=target.user, port=target.port)
        self.options = options
        self.status = LinkStatus()
        self._paths = config_files(options.config)
        self._conns: list[asyncssh.SSHClientConnection] = []
        self._node_conns: dict[str, asyncssh.SSHClientConnection] = {}
        """Connections to other cluster nodes, tunnelled through the head (high-resolution GPU mode)."""
        self._channel_conns: dict[str, asyncssh.SSHClientConnection] = {}
        self._stack_conns: dict[str, asyncssh.SSHClientConnection] = {}
        """Connections to nodes for the stacks programs: apart, so a finished take does not cut the
        GPU agents' streams (nor turning the agents off a take under way)."""
        """Connections to other nodes for channels (legacy pdb consoles); closed with the link."""
        self._dir = Path(tempfile.mkdtemp(prefix="cockpit-"))
        os.chmod(self._dir, 0o700)
        # Removed by close(); this also covers an exit that skips it (an uncaught error, sys.exit).
        self._rmtree_at_exit = functools.partial(shutil.rmtree, self._dir, True)
        atexit.register(self._rmtree_at_exit)
        self.socket_path = str(self._dir / "dashboard.sock")
        self._listeners: list[asyncssh.SSHListener] = []
        self._passphrase = options.passphrase
        self._lost = asyncio.Event()
        self._ready = asyncio.Event()
        self._supervisor: asyncio.Task[None] | None = None
        self._closed = False
        self.expose_url: str | None = None

    # -- connect ---------------------------------------------------------------------------------

    async def _open_once(self) -> None:
        chain = await asyncio.to_thread(hop_chain, self.target, self._paths)  # reads the SSH config
        conns: list[asyncssh.SSHClientConnection] = []
        try:
            for hop in chain:
                conns.append(await self._connect_hop(hop, conns[-1] if conns else None))
            await self._forward(conns[-1])
        except BaseException:
            for conn in reversed(conns):
                conn.close()
            raise
        self._conns = conns

    async def _connect_hop(
        self, hop: Hop, tunnel: asyncssh.SSHClientConnection | None, node: bool = False
    ) -> asyncssh.SSHClientConnection:
        """Connect to `hop` (through `tunnel`); `node`: a cluster node reached through the head, logged in
        to as `node_login` says."""
        # Read once per connection, off the event loop (a home directory on NFS can take its time); the
        # host-key checks asyncssh calls back into are synchronous and use what was read here.
        plan = await asyncio.to_thread(plan_hop, self.target, hop, node, self._paths)
        config = plan.config
        is_target = hop == self.target
        client = HostKeyClient(
            plan.known, plan.alias, self.options.accept_new, self._lost.set if is_target else None
        )
        keepalive = config.get("ServerAliveInterval") if config is not None else None
        kwargs: dict[str, Any] = {
            "username": plan.username,
            "port": hop.port or (),
            "config": self._paths or None,
            "tunnel": tunnel,
            # Nothing trusted up front, so asyncssh asks HostKeyClient about every key and every certificate's
            # CA; the revoked keys are given too, so a certificate over a revoked host key is refused.
            "known_hosts": ([], [], plan.revoked),
            "client_factory": lambda: client,
            "keepalive_interval": keepalive or DEFAULT_KEEPALIVE,
            "keepalive_count_max": 3,
            "connect_timeout": 15,
            "compression_algs": None,
            "server_host_key_algs": plan.algorithms,
        }
        if plan.client_keys:
            kwargs["client_keys"] = plan.client_keys
            # Given explicitly, asyncssh would fail on an encrypted file instead of skipping it (as it
            # does for the config's own IdentityFile): the agent may well hold that key.
            kwargs["ignore_encrypted"] = self._passphrase is None
        if self._passphrase is not None:
            kwargs["passphrase"] = self._passphrase
        label = hop.host if hop.port is None else f"{hop.host}:{hop.port}"
        try:
            return await self._handshake(hop.host, kwargs, client)
        except asyncssh.HostKeyNotVerifiable as exc:
            if client.problem is not None:
                raise client.problem from None
            raise refusal(plan.host, plan.port, plan.known, exc.reason, plan.alias) from None
        except asyncssh.PermissionDenied:
            # asyncssh skips an encrypted IdentityFile it cannot open: ask for its passphrase and retry.
            encrypted = None
            if self._passphrase is None:
                identities = plan.client_keys or identity_files(config)
                encrypted = await asyncio.to_thread(encrypted_identity, identities)
            if encrypted is None:
                raise AuthenticationFailed(
                    f"{label} refused every key offered (agent, IdentityFile): check User and IdentityFile "
                    "in your SSH config, or ssh-add the right key."
                ) from None
            answer = None
            if self.options.ask_passphrase is not None:
                answer = await self.options.ask_passphrase(f"Passphrase for {encrypted}")
            if not answer:
                raise PassphraseNeeded(
                    f"the SSH key {encrypted} is encrypted: load it into ssh-agent (ssh-add) "
                    "or run the cockpit in a terminal to be asked for its passphrase."
                ) from None
            self._passphrase = answer
            return await self._connect_hop(hop, tunnel, node)
        except (asyncssh.KeyImportError, asyncssh.KeyEncryptionError) as exc:
            self._passphrase = None
            error = AuthenticationFailed(f"cannot open the SSH key for {label}: {exc}.")
            raise error from None
        except asyncio.TimeoutError:
            raise SshError(f"cannot connect to {label}: no answer within 15 s") from None
        except UnicodeError:  # the name lookup's IDNA encoding: a part between dots over 63 characters
            raise SshError(
                f"cannot connect to {shown_target(label)}: "
                f"{host_name_problem(hop.host) or 'not a host name'}.",
                permanent=True,
            ) from None
        except (OSError, asyncssh.Error) as exc:
            reason = getattr(exc, "reason", None) or str(exc) or type(exc).__name__
            raise SshError(f"cannot connect to {label}: {reason}") from None

    @staticmethod
    async def _handshake(
        host: str, kwargs: dict[str, Any], client: HostKeyClient
    ) -> asyncssh.SSHClientConnection:
        """`asyncssh.connect`, then record the new host key the user accepted, if any: even when the login
        then fails (as OpenSSH does), and before a passphrase retry reads known_hosts again."""
        try:
            return await asyncssh.connect(host, **kwargs)
        finally:
            if client.accepted is not None:
                try:
                    await asyncio.to_thread(record_host_key, client.accepted)
                except OSError as exc:
                    where = client.accepted.known_hosts
                    raise SshError(
                        f"cannot add the host key to {where}: {exc.strerror or exc}.", permanent=True
                    ) from None

    async def _forward(self, conn: asyncssh.SSHClientConnection) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.socket_path)
        dest = (self.options.dashboard_host, self.options.dashboard_port)
        listeners: list[asyncssh.SSHListener] = []
        try:
            # The 0700 directory already keeps others out; the socket itself is made 0600 as well.
            listener = await conn.forward_local_path_to_port(self.socket_path, *dest)
            os.chmod(self.socket_path, 0o600)
            listeners.append(listener)
            if self.options.expose_port is not None:
                # Loopback only, and only on request: anyone on this machine can use this port.
                exposed = await conn.forward_local_port("127.0.0.1", self.options.expose_port, *dest)
                listeners.append(exposed)
                self.expose_url = f"http://127.0.0.1:{exposed.get_port()}"
        except OSError as exc:
            for opened in listeners:
                opened.close()
            raise SshError(f"cannot open the local end of the tunnel: {exc.strerror or exc}") from None
        self._listeners = listeners

    async def start(self) -> None:
        """Connect (raises SshError); afterwards the link keeps itself up until `close()`."""
        try:
            await self._open_once()
        except SshError as exc:
            self.status = LinkStatus(state="failed", detail=str(exc))
            raise
        self.status = LinkStatus(state="connected")
        self._ready.set()
        self._supervisor = asyncio.get_running_loop().create_task(self._supervise())

    async def _supervise(self) -> None:
        while not self._closed:
            await self._lost.wait()
            if self._closed:
                return
            self._ready.clear()
            self._drop_connections()
            attempt = 0
            while not self._closed:
                delay = BACKOFF_SECONDS[min(attempt, len(BACKOFF_SECONDS) - 1)]
                attempt += 1
                self.status = LinkStatus(
                    state="reconnecting", attempt=attempt, next_retry_at=time.time() + delay, detail=""
                )
                await asyncio.sleep(delay)
                self._lost.clear()
                try:
                    await self._open_once()
                except SshError as exc:
                    if is_permanent(exc):
                        self.status = LinkStatus(state="failed", detail=str(exc))
                        return
                    self.status.detail = str(exc)
                    continue
                except Exception as exc:  # a bug must not leave the link "reconnecting" forever
                    self.status = LinkStatus(state="failed", detail=f"internal error: {exc!r}")
                    return
                self.status = LinkStatus(state="connected")
                self._ready.set()
                break

    def _drop_connections(self) -> None:
        for listener in self._listeners:
            listener.close()
        self._listeners = []
        for node_conn in (
            *self._node_conns.values(),
            *self._channel_conns.values(),
            *self._stack_conns.values(),
        ):
            node_conn.close()
        self._node_conns = {}
        self._channel_conns = {}
        self._stack_conns = {}
        for conn in reversed(self._conns):
            conn.close()
        self._conns = []

    def status_line(self) -> str | None:
        """None while connected; else what the header should say about the link."""
        return None if self.status.state == "connected" else self.status.describe()

    async def wait_connected(self, timeout: float) -> bool:
        try:
            await asyncio.wait_for(self._ready.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    async def open_channel(
        self, host: str, port: int, via: str | None = None
    ) -> tuple[asyncssh.SSHReader[bytes], asyncssh.SSHWriter[bytes]]:
        """A byte stream to host:port as seen from the head, or from node `via` (reached through the head
        as `start_process` does): direct-tcpip, no local listener."""
        conn = await self._node_connection(via, self._channel_conns)
        try:
            return await conn.open_connection(host, port, encoding=None)
        except asyncssh.ChannelOpenError as exc:
            where = "the head" if via is None else via
            raise SshError(f"{where} cannot reach {host}:{port} ({exc.reason}).") from None

    async def forward_loopback(self, host: str, port: int) -> tuple[int, Callable[[], None]]:
        """Listen on 127.0.0.1 (a free port) and forward to host:port as the head sees it: for a tool
        that needs a TCP port (VS Code). Anyone on this machine can use that port while it is open;
        returns the port and the function that closes it."""
        conn = await self._node_connection(None)
        try:
            listener = await conn.forward_local_port("127.0.0.1", 0, host, port)
        except OSError as exc:
            raise SshError(f"cannot open a local port: {exc.strerror or exc}") from None
        self._listeners.append(listener)
        return listener.get_port(), listener.close

    async def _node_connection(
        self, host: str | None, pool: dict[str, asyncssh.SSHClientConnection] | None = None
    ) -> asyncssh.SSHClientConnection:
        """The head's connection, or one to node HOST through it, kept in POOL (the GPU agents' by
        default; channels keep their own, so closing the agents does not cut a debugger console)."""
        if not self._conns:
            raise SshError(f"no SSH connection to {self.target.host} right now ({self.status.describe()}).")
        conn = self._conns[-1]
        if host is None:
            return conn
        pool = self._node_conns if pool is None else pool
        node_conn = pool.get(host)
        if node_conn is None or node_conn.is_closed():
            node_conn = await self._connect_hop(Hop(host=host), conn, node=True)
            pool[host] = node_conn
        return node_conn

    async def start_process(
        self, command: str, host: str | None = None, pool: str = "agents"
    ) -> asyncssh.SSHClientProcess[str]:
        """Run `command` on the head (`host` None) or on another node, reached through the head with the
        same user, SSH config and host-key checks as the head itself. POOL: whose connections to nodes
        (`agents`, the GPU agents; `stacks`), closed apart by `close_node_connections`."""
        conn = await self._node_connection(host, self._stack_conns if pool == "stacks" else None)
        return await conn.create_process(command, encoding="utf-8", errors="replace")

    async def close_node_connections(self, pool: str = "agents") -> None:
        """Close the connections to other nodes that POOL's processes opened (the head's stays)."""
        if pool == "stacks":
            conns, self._stack_conns = list(self._stack_conns.values()), {}
        else:
            conns, self._node_conns = list(self._node_conns.values()), {}
        for node_conn in conns:
            node_conn.close()
        if conns:
            waits = (asyncio.wait_for(node_conn.wait_closed(), 5) for node_conn in conns)
            await asyncio.gather(*waits, return_exceptions=True)

    def remove_socket(self) -> None:
        """Remove the tunnel socket and its private directory now, from any thread: for a process that
        ends without closing the link (its connections end with it)."""
        shutil.rmtree(self._dir, ignore_errors=True)

    async def close(self) -> None:
        self._closed = True
        self._lost.set()
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
        self._drop_connections()
        shutil.rmtree(self._dir, ignore_errors=True)
        atexit.unregister(self._rmtree_at_exit)
