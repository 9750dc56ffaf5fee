"""Provides parsing of TARGET: `local`, an `http://host:port` dashboard, `slurm:JOBID` / `slurm:NAME`, or
an SSH destination."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from cockpit.core.errors import CockpitError

TargetKind = Literal["local", "http", "ssh", "slurm"]

_DESTINATION_FORMS = "expected alias, user@host, host:port or user@[v6addr]:port"


class TargetError(CockpitError):
    """A TARGET argument that cannot be understood."""


@dataclass(frozen=True)
class Target:
    """Where the cluster is, in the user's words, and how the cockpit reaches its dashboard."""

    kind: TargetKind
    """`local` (the cluster `cockpit local up` started), `http` (a dashboard URL) or `ssh`."""
    raw: str
    """The TARGET exactly as the user typed it; shown in the header."""
    url: str | None = None
    """Dashboard base URL, for `http` targets."""
    host: str | None = None
    """SSH host or `~/.ssh/config` alias, for `ssh` targets."""
    user: str | None = None
    port: int | None = None
    slurm_job: str | None = None
    """Job id or name, for `slurm` targets: the Ray head is the first host of that job's allocation."""

    def __str__(self) -> str:
        return self.raw


def parse_target(raw: str) -> Target:
    """Parse TARGET as the command-line contract defines it.

    Raises:
        TargetError: with one sentence naming the accepted forms.
    """
    text = raw.strip()
    if not text:
        raise TargetError(
            "TARGET is empty: give `local`, http://HOST:PORT, slurm:JOBID or an SSH destination (user@host)."
        )
    if text == "local":
        return Target(kind="local", raw=text)
    if text.startswith("slurm:"):
        job = text[6:].strip()
        if not job or any(c.isspace() or c in "/\\'\"" for c in job):
            raise TargetError(
                f"{shown_target(text)} is not a Slurm TARGET: use slurm:JOBID (e.g. slurm:123456) or "
                "slurm:JOBNAME."
            )
        return Target(kind="slurm", raw=text, slurm_job=job)
    if "://" in text:
        parts = urlsplit(text)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise TargetError(
                f"{shown_target(text)} is not a dashboard address: use http://HOST:PORT (for example http://127.0.0.1:8265)."
            )
        try:
            parts.port  # noqa: B018 - raises ValueError on a bad port
        except ValueError:
            raise TargetError(f"{shown_target(text)} has a bad port: use http://HOST:PORT.") from None
        problem = host_name_problem(parts.hostname)
        if problem:
            raise TargetError(f"{shown_target(text)} is not a dashboard address: {problem}.")
        return Target(kind="http", raw=text, url=f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}")
    if text.startswith("ssh:"):
        text = text[4:].lstrip("/")
    try:
        user, host, port = parse_destination(text)
    except ValueError as exc:
        raise TargetError(
            f"{shown_target(raw)} is not a TARGET ({exc}): use `local`, http://HOST:PORT, "
            "or an SSH destination (alias, user@host, host:port)."
        ) from None
    return Target(kind="ssh", raw=raw, host=host, user=user, port=port)


def host_name_problem(host: str) -> str:
    """Why HOST cannot be looked up as a host name (a part between dots longer than 63 characters, or
    one that IDNA cannot spell), or "" when it can."""
    try:
        host.encode("idna")
    except UnicodeError:
        return "the host name is not one (each part between dots is 1 to 63 characters)"
    return ""


def shown_target(text: str) -> str:
    """TEXT quoted for a message, its middle left out when long (a TARGET can be any length)."""
    return repr(text) if len(text) <= 80 else repr(f"{text[:40]}…{text[-20:]}")


def parse_destination(text: str) -> tuple[str | None, str, int | None]:
    """Split an SSH destination into (user, host, port), as OpenSSH reads one.

    `alias`, `user@host`, `host:port`, `user@[v6addr]:port` or a bare IPv6 address (which cannot carry a
    port). The user is what comes before the last `@`: some sites' accounts contain one. Used for TARGET
    and for the hops of a `ProxyJump`.

    Raises:
        ValueError: what is wrong, as a phrase the caller puts in its own sentence.
    """
    user, at, host = text.rpartition("@")
    port_text: str | None = None
    if host.startswith("["):
        host, bracket, rest = host[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise ValueError(_DESTINATION_FORMS)
        port_text = rest[1:] if rest else None
    elif host.count(":") == 1:
        host, port_text = host.split(":")
    elif ":" in host:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(_DESTINATION_FORMS) from None
    if (
        not host
        or (at and not user)
        or any(c.isspace() or c in "/[]" for c in host)
        or any(c.isspace() or c in "/:" for c in user)
    ):
        raise ValueError(_DESTINATION_FORMS)
    port = None
    if port_text is not None:
        if not (port_text.isascii() and port_text.isdigit() and 0 < int(port_text) < 65536):
            raise ValueError("the port must be a number from 1 to 65535")
        port = int(port_text)
    return user or None, host, port
