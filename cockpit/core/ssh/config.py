"""Provides what the user's OpenSSH config says about a destination: hops, logins, keys, known_hosts files.

asyncssh reads `~/.ssh/config` (HostName, User, Port, IdentityFile, ServerAliveInterval ...) the way
OpenSSH does; this module asks it the questions the link needs: which `ProxyJump` hops to open, how to
log in to a cluster node behind the head, which identity needs a passphrase, and which known_hosts files
pin a host's keys.
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncssh

from cockpit.core.ssh.errors import SshError
from cockpit.core.targets import parse_destination

MAX_HOPS = 8
_DEFAULT_IDENTITIES = ("~/.ssh/id_ed25519", "~/.ssh/id_ecdsa", "~/.ssh/id_rsa")


def config_files(explicit: str | None) -> list[str]:
    """The OpenSSH client config to read: `explicit` (like `ssh -F`), else `~/.ssh/config` if it exists."""
    if explicit:
        if not Path(explicit).is_file():
            raise SshError(f"the SSH config {explicit} does not exist.", permanent=True)
        return [explicit]
    default = Path.home() / ".ssh" / "config"
    return [str(default)] if default.is_file() else []


@dataclass(frozen=True)
class Hop:
    """One SSH destination of a chain, as the user wrote it (alias, user@host, host:port)."""

    host: str
    user: str | None = None
    port: int | None = None

    @classmethod
    def parse(cls, text: str) -> Hop:
        """`alias`, `user@host`, `host:port`, `[v6addr]:port` or a bare IPv6 address (`parse_destination`)."""
        try:
            user, host, port = parse_destination(text)
        except ValueError as exc:
            raise SshError(f"{text!r} is not an SSH destination ({exc}).", permanent=True) from None
        return cls(host=host, user=user, port=port)


def host_config(hop: Hop, paths: list[str]) -> Any:
    """The OpenSSH settings that apply to `hop` (asyncssh's SSHClientConfig)."""
    from asyncssh.config import SSHClientConfig

    local_user = getpass.getuser()
    return SSHClientConfig.load(
        None, paths, False, False, False, local_user, hop.user or (), hop.host, hop.port or ()
    )


def node_login(head: Hop, node: Hop, paths: list[str]) -> tuple[Any, list[str], list[Path]]:
    """How to log in to a cluster node reached through the head: (username, keys, known-hosts files).

    On a cluster the nodes share the head's account and site: the head's user (`user@head`, else the
    head's User; else the local user), the head's IdentityFile offered before any the config gives the
    node (a `Host *` key must not hide the head's), and the node's known-hosts files if the config names
    any, else the head's.
    """
    head_config = host_config(head, paths) if paths else None
    node_config = host_config(node, paths) if paths else None
    username = head.user or (head_config.get("User") if head_config is not None else None) or ()
    keys: list[str] = []
    for source in (head_config, node_config):
        for path in (source.get("IdentityFile") if source is not None else None) or ():
            expanded = os.path.expanduser(str(path))
            if expanded not in keys:
                keys.append(expanded)
    own_files = node_config is not None and node_config.get("UserKnownHostsFile")
    return username, keys, known_hosts_files(node_config if own_files else head_config)


def hop_chain(target: Hop, paths: list[str]) -> list[Hop]:
    """The hops to open in order, the target last: ProxyJump is followed like OpenSSH does."""
    chain = [target]
    while len(chain) <= MAX_HOPS:
        jump = host_config(chain[0], paths).get("ProxyJump") if paths else None
        if not jump or str(jump).lower() == "none":
            return chain
        hops = [Hop.parse(part.strip()) for part in str(jump).split(",") if part.strip()]
        chain = hops + chain
    raise SshError(
        f"ProxyJump for {target.host} nests more than {MAX_HOPS} hops (a loop in the SSH config?).",
        permanent=True,
    )


def identity_files(config: Any) -> list[str]:
    """The identities asyncssh offers for a destination: its IdentityFile, else the default ones."""
    names = (config.get("IdentityFile") if config is not None else None) or _DEFAULT_IDENTITIES
    return [os.path.expanduser(str(name)) for name in names]


def encrypted_identity(identities: Sequence[str]) -> str | None:
    """The first of `identities` (paths) that needs a passphrase to open. Blocking: reads the files."""
    for path in identities:
        if not os.path.isfile(path):
            continue
        try:
            asyncssh.read_private_key(path)
        except asyncssh.KeyImportError as exc:
            if "passphrase" in str(exc).lower():
                return path
        except OSError:
            continue
    return None


def known_hosts_files(config: Any) -> list[Path]:
    """The user's files first (new keys are recorded in the first), then the system-wide ones.

    `/dev/null` is no file: the entries SkyPilot and dstack generate set `UserKnownHostsFile /dev/null`
    (with `StrictHostKeyChecking no`), which would throw every key away. The cockpit verifies host keys
    whatever the config says, so there it keeps them in OpenSSH's default files instead.
    """

    def files_of(value: Any) -> list[Path]:
        paths = [Path(os.path.expanduser(str(p))) for p in value or ()]
        return [p for p in paths if str(p) != os.devnull]

    user = files_of(config.get("UserKnownHostsFile") if config is not None else None)
    system = files_of(config.get("GlobalKnownHostsFile") if config is not None else None)
    # OpenSSH's defaults are two files each; a `@revoked` line in the second ones counts as well.
    home = Path.home() / ".ssh"
    files = user or [home / "known_hosts", home / "known_hosts2"]
    etc = [Path("/etc/ssh/ssh_known_hosts"), Path("/etc/ssh/ssh_known_hosts2")]
    return files + (system or etc)
