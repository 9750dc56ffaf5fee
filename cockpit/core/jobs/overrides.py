"""Provides KEY=VALUE overrides: parsed and checked once, then handed on already split.

An override is kept exactly as typed (`text`, what goes into the entrypoint and into the job's metadata)
beside its key and value (what the pre-flight checks read). Hydra's `+key=v` (append) and `++key=v`
(force) keep their prefix in `text` only; `~key=v` (delete) likewise.

It also holds the one reader of `${...}` variables (`variables`, `is_secret`): the profile resolver and
every guard that keeps `${env:NAME}` secrets out of the entrypoint read references the same way, so a
spelling the resolver accepts (`${ env:NAME}`) is a spelling the guards see.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from cockpit.core.jobs.errors import OverrideError

EXAMPLE = "trainer.total_epochs=1"
VARIABLE = re.compile(r"\$\{([^}]+)\}")
"""A `${...}` reference; what is between the braces, stripped, is its key (`variable_key`)."""
SECRET_HOME = "runtime_env.env_vars"


def variable_key(match: re.Match[str]) -> str:
    """The key of a `${...}` reference as the resolver reads it: `${ env:X }` is `env:X`."""
    return match.group(1).strip()


def is_secret(key: str) -> bool:
    """A key the resolver reads as a secret from the submitter's shell."""
    return key.startswith("env:")


def variables(text: str) -> Iterator[str]:
    """The keys of every `${...}` reference in `text`, in order."""
    return (variable_key(match) for match in VARIABLE.finditer(text))


def secret_reference(text: str) -> str | None:
    """The first `${env:NAME}` reference in `text` (any spelling the resolver accepts), as `${env:NAME}`."""
    key = next((key for key in variables(text) if is_secret(key)), None)
    return None if key is None else f"${{{key}}}"


@dataclass(frozen=True)
class Override:
    key: str
    """Without a leading `+`, `++` or `~`."""
    value: str
    """As typed (quotes kept)."""
    text: str
    """Exactly as typed, e.g. `+trainer.x=1`."""


def parse_override(text: str) -> Override:
    """One `KEY=VALUE` item. It may not hold a `${env:NAME}` secret: an override lands in the entrypoint
    and the job's metadata, which every user of the cluster can read (and a resubmit reads the metadata
    back, so an override there must never be resolved in the resubmitter's shell).

    Raises:
        OverrideError: "'foo' is not KEY=VALUE (e.g. trainer.total_epochs=1)." or the secret refused.
    """
    key, sep, value = text.partition("=")
    key = key.strip().lstrip("+~")
    if not sep or not key:
        raise OverrideError(f"{text!r} is not KEY=VALUE (e.g. {EXAMPLE}).")
    if secret_reference(text) is not None:
        raise OverrideError(
            f"{text!r}: a ${{env:...}} secret cannot be an override (the job list shows overrides to "
            f"everyone); put it in the profile's {SECRET_HOME} and refer to it as $NAME."
        )
    return Override(key=key, value=value, text=text)


def parse_overrides(texts: Iterable[str]) -> tuple[Override, ...]:
    """Every item parsed; the first bad one raises `OverrideError` (one line, shown as is)."""
    return tuple(parse_override(text) for text in texts)
