"""Provides parsing of TARGET: `local`, an `http://host:port` dashboard, or an SSH destination."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from cockpit.core.errors import TargetError

TargetKind = Literal["local", "http", "ssh"]

_SSH_RE = re.compile(
    r"^(?:(?P<user>[^@\s/:]+)@)?(?P<host>\[[0-9A-Fa-f:.]+\]|[^@\s/:\[\]]+)(?::(?P<port>\d+))?$"
)


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
            "TARGET is empty: give `local`, http://HOST:PORT or an SSH destination like user@host."
        )
    if text == "local":
        return Target(kind="local", raw=text)
    if "://" in text:
        parts = urlsplit(text)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise TargetError(
                f"{text!r} is not a dashboard address: use http://HOST:PORT (for example http://127.0.0.1:8265)."
            )
        try:
            parts.port  # noqa: B018 - raises ValueError on a bad port
        except ValueError:
            raise TargetError(f"{text!r} has a bad port: use http://HOST:PORT.") from None
        return Target(kind="http", raw=text, url=f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}")
    if text.startswith("ssh:"):
        text = text[4:].lstrip("/")
    match = _SSH_RE.match(text)
    if match is None:
        raise TargetError(
            f"{raw!r} is not a TARGET: use `local`, http://HOST:PORT, "
            "or an SSH destination (alias, user@host, host:port)."
        )
    port = int(match["port"]) if match["port"] else None
    if port is not None and not 0 < port < 65536:
        raise TargetError(f"{raw!r} has a port outside 1-65535.")
    return Target(kind="ssh", raw=raw, host=match["host"].strip("[]"), user=match["user"], port=port)
