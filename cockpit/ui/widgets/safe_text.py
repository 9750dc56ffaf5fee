"""Provides how text from the cluster is shown: as plain `Text`, never as markup, with no control character.

Every string the cluster sends (job ids, entrypoints, messages, actor and node names, death causes, file
names, error text) is hostile input. Handed to a widget as a `str` it is parsed as markup (an entrypoint
holding `[/data/a.parquet]` raises `MarkupError` and the screen dies); written to the terminal as is,
its escapes and control characters move the cursor, retitle the window or break the layout (they take no
cells, so widths are wrong). `plain` makes a `Text` that is never parsed, with ANSI escapes removed and
every control character replaced; `clean` is the same for the `str` a `Segment` or a `Text.append` takes.
"""

from __future__ import annotations

import re

from rich.style import Style
from rich.text import Text

from cockpit.core.logs import strip_ansi

REPLACEMENT = "\ufffd"
"""What a control character shows as: one character for one, so offsets into the text stay valid."""

CONTROLS = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
"""What must not reach the terminal, tab aside: C0, DEL, C1 (U+0080-U+009F: a terminal may read U+009B as
CSI), the line and paragraph separators, and lone surrogates (str holds them, UTF-8 cannot write them)."""

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


def plain(value: object, style: str | Style = "") -> Text:
    """VALUE as a `Text` that is never read as markup, cleaned as `clean` does, in STYLE."""
    return Text(clean(value), style=style, end="")
