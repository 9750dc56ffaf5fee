"""Provides the host-key policy of the SSH link: known_hosts read the OpenSSH way, and what a key means.

Host keys are checked here, not by asyncssh, so an unknown key and a changed key are told apart. A
changed (or revoked) key is refused, always, naming the known_hosts line to fix; an unknown key is
refused unless the user accepts its fingerprint (a prompt, or `--accept-new` like
`StrictHostKeyChecking=accept-new`), and then recorded in the first known_hosts file.

Entries are matched as OpenSSH does, not as asyncssh does: the name looked up is `host` on port 22 and
`[host]:port` elsewhere (or the `HostKeyAlias`), against patterns (`*`, `?`, `!negation`, case
ignored) or a hashed name (`ssh-keygen -H`); there is no fall-back to a port-less entry, so neither a
plain nor a hashed `host` line pins another port, and a `@revoked` line counts on every port it names.
A host certificate is trusted when its CA is listed `@cert-authority` for the name (and not revoked);
its principals and validity are then checked by asyncssh, the way OpenSSH checks them.

The files are read and parsed in one place (`read_known_hosts`), once per connection and off the event
loop; the checks work on what was read.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import functools
import hashlib
import hmac
import os
import re
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import asyncssh

from cockpit.core.ssh.errors import HostKeyChanged, UnknownHostKey

_RSA_ALGS = ["rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"]
_MARKERS = {"": "", "@cert-authority": "cert-authority", "@revoked": "revoked"}


@dataclass(frozen=True)
class KnownHostsEntry:
    """One parsed known_hosts line."""

    marker: str
    """"" (a host key), "cert-authority" or "revoked"."""
    hosts: str
    """The host field: comma-separated patterns, or one hashed name `|1|salt|hash`."""
    key: asyncssh.SSHKey
    where: str
    """`file:line`, for messages that tell the user which line to fix."""

    def matches(self, name: str) -> bool:
        """Whether the entry is for `name` (`host` or `[host]:port`), by OpenSSH's rules."""
        if self.hosts.startswith("|"):
            return _hashed_match(self.hosts, name)
        matched = False
        for pattern in self.hosts.split(","):
            negated = pattern.startswith("!")
            if _pattern(pattern[1:] if negated else pattern).fullmatch(name.lower()):
                if negated:
                    return False
                matched = True
        return matched


@dataclass(frozen=True)
class KnownHosts:
    """The known_hosts files of one destination (new keys are recorded in the first) and their entries."""

    files: tuple[Path, ...]
    entries: tuple[KnownHostsEntry, ...]

    def matching(self, name: str, marker: str = "") -> list[KnownHostsEntry]:
        return [e for e in self.entries if e.marker == marker and e.matches(name)]


@functools.lru_cache(maxsize=1024)
def _pattern(text: str) -> re.Pattern[str]:
    """An OpenSSH host pattern (`*` any run, `?` one character, case ignored) as a regex."""
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in text.lower()))


def _hashed_match(field: str, name: str) -> bool:
    """`|1|salt|hash`: HMAC-SHA1 of the name keyed with the salt (what `HashKnownHosts` writes)."""
    try:
        magic, salt, digest = field[1:].split("|")
        if magic != "1":
            return False
        expected = base64.b64decode(digest, validate=True)
        mac = hmac.new(base64.b64decode(salt, validate=True), name.encode(), hashlib.sha1).digest()
    except ValueError:
        return False
    return hmac.compare_digest(mac, expected)


def read_known_hosts(files: Sequence[Path]) -> KnownHosts:
    """Every usable entry of `files`, in order; a file that cannot be read counts as empty, and a line
    that cannot be parsed is skipped (both as in OpenSSH). Blocking: call it off the event loop."""
    entries: list[KnownHostsEntry] = []
    for path in files:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            fields = line.split()
            if not fields or fields[0].startswith("#"):
                continue
            marker = fields.pop(0) if fields[0].startswith("@") else ""
            if marker not in _MARKERS or len(fields) < 3:
                continue
            try:
                key = asyncssh.import_public_key(f"{fields[1]} {fields[2]}")
            except (ValueError, asyncssh.KeyImportError):
                continue
            entries.append(KnownHostsEntry(_MARKERS[marker], fields[0], key, f"{path}:{number}"))
    return KnownHosts(files=tuple(files), entries=tuple(entries))


def host_label(host: str, port: int) -> str:
    """host:port the way known_hosts and `ssh-keygen -R` write it."""
    return host if port == 22 else f"[{host}]:{port}"


def lookup_name(host: str, port: int, alias: str | None = None) -> str:
    """The name known_hosts entries are matched against: the `HostKeyAlias` (OpenSSH uses it as is,
    without the port), else `host_label`."""
    return alias or host_label(host, port)


def known_keys(
    host: str, port: int, known: KnownHosts, alias: str | None = None
) -> list[tuple[asyncssh.SSHKey, str]]:
    """Keys pinned for host:port, each with the `file:line` it comes from (OpenSSH's matching rules)."""
    return [(e.key, e.where) for e in known.matching(lookup_name(host, port, alias))]


def revoked_keys(host: str, port: int, known: KnownHosts, alias: str | None = None) -> list[asyncssh.SSHKey]:
    """The keys `@revoked` for host:port: host keys and CA keys alike."""
    return [e.key for e in known.matching(lookup_name(host, port, alias), "revoked")]


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


def offered_algorithms(host: str, port: int, known: KnownHosts, alias: str | None = None) -> list[str]:
    """The host-key algorithms to ask the server for: certificates first where a CA is listed for the
    host, then the pinned key types (all plain types for a host with none pinned).

    Certificates are not asked for where no CA is listed: such a certificate could not be verified,
    while the plain key under it can be accepted like any new key (OpenSSH falls back the same way).
    """
    name = lookup_name(host, port, alias)
    plain = host_key_algorithms(known_keys(host, port, known, alias)) or [
        alg.decode() for alg in asyncssh.public_key.get_default_public_key_algs()
    ]
    if not known.matching(name, "cert-authority"):
        return plain
    certificates = [alg.decode() for alg in asyncssh.public_key.get_default_certificate_algs()]
    return certificates + plain


def _revoked(name: str, key: asyncssh.SSHKey, known: KnownHosts) -> str | None:
    """The `file:line` of a `@revoked` entry for this key, if any."""
    return next((e.where for e in known.matching(name, "revoked") if e.key == key), None)


def check_host_key(
    host: str, port: int, key: asyncssh.SSHKey, known: KnownHosts, alias: str | None = None
) -> None:
    """Accept a pinned key; raise HostKeyChanged or UnknownHostKey otherwise."""
    name = lookup_name(host, port, alias)
    revoked = _revoked(name, key, known)
    if revoked:
        raise HostKeyChanged(f"the host key of {name} is revoked ({revoked}).")
    pinned = known_keys(host, port, known, alias)
    if any(k == key for k, _where in pinned):
        return
    same_type = [where for k, where in pinned if k.get_algorithm() == key.get_algorithm()]
    if same_type or pinned:
        where = (same_type or [w for _k, w in pinned])[0]
        raise HostKeyChanged(
            f"the host key of {name} CHANGED (now {key.get_fingerprint('sha256')}): "
            f"someone may be intercepting the connection; if the change is expected, remove "
            f"{where} (ssh-keygen -R '{name}') and connect again."
        )
    record_in = known.files[0]
    raise UnknownHostKey(
        f"the host key of {name} is unknown ({key.get_algorithm()} {key.get_fingerprint('sha256')}); "
        f"verify it, then accept it once with --accept-new (it is added to {record_in}).",
        host,
        port,
        key,
        record_in,
        alias,
    )


def check_host_ca(
    host: str, port: int, ca_key: asyncssh.SSHKey, known: KnownHosts, alias: str | None = None
) -> None:
    """Accept the CA that signed the host's certificate when it is listed `@cert-authority` for the host
    and not revoked; raise HostKeyChanged otherwise. (The certificate itself, its type, principals and
    validity, is checked by asyncssh once this returns.)"""
    name = lookup_name(host, port, alias)
    revoked = _revoked(name, ca_key, known)
    if revoked:
        raise HostKeyChanged(f"the CA that signed the host certificate of {name} is revoked ({revoked}).")
    listed = known.matching(name, "cert-authority")
    if any(e.key == ca_key for e in listed):
        return
    others = f"; its @cert-authority line is {listed[0].where}" if listed else ""
    raise HostKeyChanged(
        f"the host certificate of {name} is signed by a CA not listed for it "
        f"({ca_key.get_fingerprint('sha256')}){others}: someone may be intercepting the connection."
    )


def refusal(host: str, port: int, known: KnownHosts, reason: str, alias: str | None = None) -> HostKeyChanged:
    """The error for a host key asyncssh refused itself (a revoked key under a certificate, or a
    certificate whose principals or validity do not fit); `reason` is asyncssh's."""
    name = lookup_name(host, port, alias)
    if "revoked" in reason.lower():
        lines = ", ".join(e.where for e in known.matching(name, "revoked")) or reason
        if "ca key" in reason.lower():
            return HostKeyChanged(f"the CA that signed the host certificate of {name} is revoked ({lines}).")
        return HostKeyChanged(f"the host key of {name} is revoked ({lines}).")
    return HostKeyChanged(f"the host certificate of {name} was refused ({reason}).")


def record_host_key(unknown: UnknownHostKey) -> None:
    """Trust the key the user accepted: add it to the first known_hosts file (what
    `StrictHostKeyChecking=accept-new` does).

    The file is rewritten beside itself and renamed over (a crash leaves the old file, never half of
    one), keeping its mode; a last entry without its newline gets one first (else both lines would be
    unreadable). A missing `~/.ssh` is created 0700 and a missing file 0600, as OpenSSH does; a
    symlinked file is written where it points. Two cockpits accepting at once both land (flock).
    """
    public = unknown.key.export_public_key("openssh").decode().split()[:2]
    entry = f"{lookup_name(unknown.host, unknown.port, unknown.alias)} {' '.join(public)}\n"
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
