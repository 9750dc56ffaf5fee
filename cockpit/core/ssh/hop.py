"""Provides what connecting one hop takes: what is read from disk for it (`HopPlan`, read in a worker
thread), and the asyncssh client that applies the host-key policy during the handshake (`HostKeyClient`).

The client runs on the event loop, in asyncssh's synchronous callbacks: it only looks at what
`read_known_hosts` parsed beforehand, and leaves recording an accepted key (a file write) to the link.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import asyncssh

from cockpit.core.ssh.config import Hop, host_config, known_hosts_files, node_login
from cockpit.core.ssh.errors import HostKeyChanged, SshError, UnknownHostKey
from cockpit.core.ssh.host_keys import (
    KnownHosts,
    check_host_ca,
    check_host_key,
    offered_algorithms,
    read_known_hosts,
    revoked_keys,
)


class HostKeyClient(asyncssh.SSHClient):
    """Checks host keys (and host certificates' CAs) our way and tells the link when the connection is
    lost."""

    def __init__(
        self, known: KnownHosts, alias: str | None, accept_new: bool, on_lost: Callable[[], None] | None
    ) -> None:
        self._known = known
        self._alias = alias
        self._accept_new = accept_new
        self._on_lost = on_lost
        self.problem: SshError | None = None
        self.accepted: UnknownHostKey | None = None
        """A new key the user accepted (--accept-new), to record once the handshake is over."""

    def validate_host_public_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        try:
            check_host_key(host, port, key, self._known, self._alias)
        except UnknownHostKey as unknown:
            if not self._accept_new:
                self.problem = unknown
                return False
            self.accepted = unknown
        except HostKeyChanged as changed:
            self.problem = changed
            return False
        return True

    def validate_host_ca_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        try:
            check_host_ca(host, port, key, self._known, self._alias)
        except HostKeyChanged as refused:
            self.problem = refused
            return False
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        if self._on_lost is not None:
            self._on_lost()


@dataclass(frozen=True)
class HopPlan:
    """Everything `_connect_hop` needs from disk (the SSH config, known_hosts), read in one go off the
    event loop."""

    config: Any
    username: Any
    client_keys: list[str]
    """Given explicitly to nodes behind the head (`node_login`); empty: asyncssh's own choice."""
    host: str
    port: int
    alias: str | None
    known: KnownHosts
    algorithms: list[str]
    revoked: list[asyncssh.SSHKey]


def plan_hop(head: Hop, hop: Hop, node: bool, paths: list[str]) -> HopPlan:
    """Read what connecting to `hop` needs (blocking: the SSH config and known_hosts files); `node`: a
    cluster node behind `head`, logged in to as `node_login` says."""
    config = host_config(hop, paths) if paths else None
    if node:
        username, client_keys, files = node_login(head, hop, paths)
        # OpenSSH passes over an IdentityFile that does not exist; asyncssh fails on an explicit one.
        client_keys = [key for key in client_keys if os.path.isfile(key)]
    else:
        username, client_keys, files = hop.user or (), [], known_hosts_files(config)
    host = str(config.get("Hostname", hop.host)) if config is not None else hop.host
    port = hop.port or (int(config.get("Port", 22)) if config is not None else 22)
    alias = config.get("HostKeyAlias") if config is not None else None
    alias = str(alias) if alias else None
    known = read_known_hosts(files)
    return HopPlan(
        config=config,
        username=username,
        client_keys=client_keys,
        host=host,
        port=port,
        alias=alias,
        known=known,
        algorithms=offered_algorithms(host, port, known, alias),
        revoked=revoked_keys(host, port, known, alias),
    )
