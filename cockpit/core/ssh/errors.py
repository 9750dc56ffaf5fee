"""Provides the errors of the SSH link, importable without asyncssh (the UI catches them on every poll)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cockpit.core.errors import CockpitError


class SshError(CockpitError):
    """The SSH link failed; `permanent` errors are not retried."""

    permanent = False


class HostKeyChanged(SshError):
    permanent = True


class AuthenticationFailed(SshError):
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
    permanent = True
