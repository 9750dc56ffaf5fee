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
    """The host's key is in no known_hosts file; the user may accept it (`accept` then retry)."""

    permanent = True

    def __init__(self, host: str, port: int, key: Any, known_hosts: Path) -> None:
        self.host, self.port, self.key, self.known_hosts = host, port, key, known_hosts
        self.fingerprint = key.get_fingerprint("sha256")
        super().__init__(
            f"the host key of {host_label(host, port)} is unknown "
            f"({key.get_algorithm()} {self.fingerprint}); "
            f"verify it, then accept it once with --accept-new (it is added to {known_hosts})."
        )

    def accept(self) -> None:
        """Record the key in known_hosts (what `StrictHostKeyChecking=accept-new` does)."""
        record_host_key(self.known_hosts, self.host, self.port, self.key)


class PassphraseNeeded(SshError):
    permanent = True


def host_label(host: str, port: int) -> str:
    return host if port == 22 else f"[{host}]:{port}"


def record_host_key(known_hosts: Path, host: str, port: int, key: Any) -> None:
    known_hosts.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    line = f"{host_label(host, port)} {key.export_public_key('openssh').decode().strip()}\n"
    with open(known_hosts, "a") as fh:
        fh.write(line)
