"""Provides how text from the cluster is made safe to print: one line, no escape, no control character.

Every string the cluster sends (actor and node names, death causes, job ids, error text) is hostile input:
written to a terminal as is, its escapes and control characters move the cursor, retitle the window or
break a table's columns. `clean` is the pure rule the command line and the UI's `safe_text` share.
"""

from __future__ import annotations

import re

ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC: titles, hyperlinks
    r"|\x1b[@-Z\\-_]"  # other two-byte escapes
)
"""An ANSI escape: CSI (colours, cursor moves), OSC (titles, hyperlinks), other two-byte escapes."""


def strip_ansi(text: str) -> str:
    """TEXT without its ANSI escape sequences (colours, cursor moves, OSC titles)."""
    return ANSI.sub("", text) if "\x1b" in text else text


MASK = "••••••"
"""What a secret shows as (a profile's `${env:WANDB_API_KEY}`, an actor's env var named like a key)."""

REPLACEMENT = "\ufffd"
"""What a control character shows as: one character for one, so offsets into the text stay valid."""

CONTROLS = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
"""What must not reach the terminal, tab aside: C0, DEL, C1 (U+0080-U+009F: a terminal may read U+009B as
CSI), the line and paragraph separators, the bidirectional overrides and isolates (U+202A-U+202E,
U+2066-U+2069: they reorder what follows, so a name could show as something else), and lone
surrogates (str holds them, UTF-8 cannot write them)."""

_SPACES = re.compile("[\t\n\u2028\u2029]")
"""Whitespace that would break a one-line label: shown as a space."""


def clean(value: object) -> str:
    """VALUE as one line of safe text: ANSI escapes removed, tabs and newlines as spaces, every other
    control character as U+FFFD (`str()` of anything that is not a str)."""
    text = value if isinstance(value, str) else str(value)
    if text.isprintable():  # about 0.1 us for a short name: the common case costs next to nothing
        return text
    text = strip_ansi(text)
    text = _SPACES.sub(" ", text)
    return CONTROLS.sub(REPLACEMENT, text)


def shortened(text: str, width: int) -> str:
    """TEXT, or its first WIDTH - 1 characters and "…" (WIDTH characters in all) when it is longer."""
    return text if len(text) <= width else text[: max(1, width - 1)] + "…"


def cut(value: object, width: int) -> str:
    """VALUE `clean`ed, then `shortened` to WIDTH: the cluster's text made to fit a column."""
    return shortened(clean(value), width)
