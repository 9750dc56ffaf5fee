"""Provides KEY=VALUE overrides: parsed and checked once, then handed on already split.

An override is kept exactly as typed (`text`, what goes into the entrypoint and into the job's metadata)
beside its key and value (what the pre-flight checks read). Hydra's `+key=v` (append) and `++key=v`
(force) keep their prefix in `text` only; `~key=v` (delete) likewise.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from cockpit.core.errors import CockpitError

EXAMPLE = "trainer.total_epochs=1"


class OverrideError(CockpitError):
    """An item that is not KEY=VALUE; the message is one line naming the first bad item."""


@dataclass(frozen=True)
class Override:
    key: str
    """Without a leading `+`, `++` or `~`."""
    value: str
    """As typed (quotes kept)."""
    text: str
    """Exactly as typed, e.g. `+trainer.x=1`."""


def parse_override(text: str) -> Override:
    """One `KEY=VALUE` item.

    Raises:
        OverrideError: "'foo' is not KEY=VALUE (e.g. trainer.total_epochs=1)."
    """
    key, sep, value = text.partition("=")
    key = key.strip().lstrip("+~")
    if not sep or not key:
        raise OverrideError(f"{text!r} is not KEY=VALUE (e.g. {EXAMPLE}).")
    return Override(key=key, value=value, text=text)


def parse_overrides(texts: Iterable[str]) -> tuple[Override, ...]:
    """Every item parsed; the first bad one raises `OverrideError` (one line, shown as is)."""
    return tuple(parse_override(text) for text in texts)
