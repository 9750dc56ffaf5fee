"""Provides the errors of the SSH link, importable without asyncssh (the UI catches them on every poll)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cockpit.core.errors import CockpitError


class SshError(CockpitError):
    """The SSH link failed. Transient (no answer, a dropped connection, a hop that cannot reach the next:
    the link reconnects), unless a subclass or the raiser says permanent (a bad SSH config)."""

    permanent = False


class HostKeyChanged(SshError):
    """The host's key is not the one known_hosts holds, or it is revoked: never retried."""

    permanent = True


class AuthenticationFailed(SshError):
    """The server refused every key (or a key cannot be opened): retrying offers the same keys."""

    permanent = True


class UnknownHostKey(SshError):
    """The host's key is in no known_hosts file; the user may trust it (`host_keys.record_host_key`,
    then retry)."""

    permanent = True

    def __init__(
        self, message: str, host: str, port: int, key: Any, known_hosts: Path, alias: str | None = None
    ) -> None:
        self.host, self.port, self.key, self.known_hosts = host, port, key, known_hosts
        self.alias = alias
        """The `HostKeyAlias` the key is recorded under instead of host:port, if the config sets one."""
        self.fingerprint = key.get_fingerprint("sha256")
        super().__init__(message)


class PassphraseNeeded(SshError):
    """An encrypted key whose passphrase nobody can be asked for (no terminal)."""

    permanent = True
