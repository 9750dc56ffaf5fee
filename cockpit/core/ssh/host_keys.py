"""Provides the host-key policy of the SSH link: known_hosts read the OpenSSH way, and what a key means.

Host keys are checked here, not by asyncssh, so an unknown key and a changed key are told apart. A
changed (or revoked) key is refused, always, naming the known_hosts line to fix; an unknown key is
refused unless the user accepts its fingerprint (a prompt, or `--accept-new` like
`StrictHostKeyChecking=accept-new`), and then recorded in the first known_hosts file.

The files are read in one place (`read_known_hosts`), once per connection and off the event loop; the
checks work on what was read.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import asyncssh

from cockpit.core.ssh.errors import HostKeyChanged, UnknownHostKey

_RSA_ALGS = ["rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"]


class KnownHostsLine(NamedTuple):
    text: str
    """The entry, stripped; never blank nor a comment."""
    where: str
    """`file:line`, for messages that tell the user which line to fix."""


@dataclass(frozen=True)
class KnownHosts:
    """The known_hosts files of one destination (new keys are recorded in the first) and their entries."""

    files: tuple[Path, ...]
    lines: tuple[KnownHostsLine, ...]


def read_known_hosts(files: Sequence[Path]) -> KnownHosts:
    """Every entry of `files`, in order; a file that cannot be read counts as empty (as in OpenSSH)."""
    lines: list[KnownHostsLine] = []
    for path in files:
        try:
            text = path.read_text()
        except OSError:
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            entry = line.strip()
            if entry and not entry.startswith("#"):
                lines.append(KnownHostsLine(entry, f"{path}:{number}"))
    return KnownHosts(files=tuple(files), lines=tuple(lines))


def host_label(host: str, port: int) -> str:
    """host:port the way known_hosts and `ssh-keygen -R` write it."""
    return host if port == 22 else f"[{host}]:{port}"


def known_keys(host: str, port: int, known: KnownHosts) -> list[tuple[asyncssh.SSHKey, str]]:
    """Keys pinned for host:port, each with the `file:line` it comes from (OpenSSH's matching rules)."""
    found: list[tuple[asyncssh.SSHKey, str]] = []
    for text, where in known.lines:
        if text.startswith("@"):
            continue
        patterns = text.split()[0]
        # asyncssh falls back to port-less entries for other ports; OpenSSH does not: a plain
        # `host` line pins port 22 only (hashed entries encode the port in their hash).
        if port != 22 and not patterns.startswith("|") and f"]:{port}" not in patterns:
            continue
        try:
            entry = asyncssh.import_known_hosts(text + "\n")
        except (ValueError, asyncssh.KeyImportError):
            continue
        trusted, *_ = entry.match(host, "", port if port != 22 else None)
        found.extend((key, where) for key in trusted)
    return found


def host_key_algorithms(keys: list[tuple[asyncssh.SSHKey, str]]) -> list[str]:
    """Ask the server for the key types we have pinned (as OpenSSH does), so a host with several keys
    does not answer with one we never saw and look "changed"."""
    algs: list[str] = []
    for key, _where in keys:
        alg = key.get_algorithm()
        for name in _RSA_ALGS if alg == "ssh-rsa" else [alg]:
            if name not in algs:
                algs.append(name)
    return algs


def _revoked(host: str, port: int, key: asyncssh.SSHKey, known: KnownHosts) -> str | None:
    """The `file:line` of a `@revoked` entry for this key, if any."""
    for text, where in known.lines:
        if not text.startswith("@revoked"):
            continue
        try:
            _trusted, _ca, revoked, *_ = asyncssh.import_known_hosts(text + "\n").match(host, "", port)
        except (ValueError, asyncssh.KeyImportError):
            continue
        if any(k == key for k in revoked):
            return where
    return None


def check_host_key(host: str, port: int, key: asyncssh.SSHKey, known: KnownHosts) -> None:
    """Accept a pinned key; raise HostKeyChanged or UnknownHostKey otherwise."""
    label = host_label(host, port)
    revoked = _revoked(host, port, key, known)
    if revoked:
        raise HostKeyChanged(f"the host key of {label} is revoked ({revoked}).")
    pinned = known_keys(host, port, known)
    if any(k == key for k, _where in pinned):
        return
    same_type = [where for k, where in pinned if k.get_algorithm() == key.get_algorithm()]
    if same_type or pinned:
        where = (same_type or [w for _k, w in pinned])[0]
        raise HostKeyChanged(
            f"the host key of {label} CHANGED (now {key.get_fingerprint('sha256')}): "
            f"someone may be intercepting the connection; if the change is expected, remove "
            f"{where} (ssh-keygen -R '{label}') and connect again."
        )
    record_in = known.files[0]
    raise UnknownHostKey(
        f"the host key of {label} is unknown ({key.get_algorithm()} {key.get_fingerprint('sha256')}); "
        f"verify it, then accept it once with --accept-new (it is added to {record_in}).",
        host,
        port,
        key,
        record_in,
    )


def record_host_key(unknown: UnknownHostKey) -> None:
    """Trust the key the user accepted: add it to the first known_hosts file (what
    `StrictHostKeyChecking=accept-new` does).

    The file is rewritten beside itself and renamed over (a crash leaves the old file, never half of
    one), keeping its mode; a last entry without its newline gets one first (else both lines would be
    unreadable). A missing `~/.ssh` is created 0700 and a missing file 0600, as OpenSSH does; a
    symlinked file is written where it points. Two cockpits accepting at once both land (flock).
    """
    public = unknown.key.export_public_key("openssh").decode().split()[:2]
    entry = f"{host_label(unknown.host, unknown.port)} {' '.join(public)}\n"
    path = Path(os.path.realpath(unknown.known_hosts))
    if not path.parent.is_dir():
        path.parent.mkdir(parents=True, mode=0o700)
        path.parent.chmod(0o700)  # mkdir's mode is cut by the umask
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            # Another cockpit may have renamed a new file over the one locked here: lock that one.
            if os.stat(path).st_ino != os.fstat(fd).st_ino:
                continue
            with open(fd, closefd=False) as current:
                text = current.read()
            if text and not text.endswith("\n"):
                text += "\n"
            _replace(path, text + entry, stat.S_IMODE(os.fstat(fd).st_mode))
            return
        finally:
            os.close(fd)


def _replace(path: Path, text: str, mode: int) -> None:
    """Write `text` to a new file beside `path` with `mode`, then rename it over `path`."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as fh:
            os.fchmod(fh.fileno(), mode)
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
