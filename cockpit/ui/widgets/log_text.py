"""Provides how one log line reads on screen: its plain text, its width in cells, and its coloured `Text`.

`Text.from_ansi` costs about 17 us for a 100-byte line with a coloured Ray prefix, most of it re-parsing
the same few SGR sequences; `line_text` splits the escapes out with one regex and looks the resulting
styles up by the line's sequence of SGR codes (an LRU cache: a program's log repeats a handful), about
4x cheaper. Other escapes (cursor moves, OSC titles and links) are dropped, as `strip_ansi` drops them,
so the plain text always matches `display_plain` and wrapped heights measured from it.

Any str is a line: escapes without colours, partial sequences and lone escapes render as text, and
no control character (C0, DEL, C1, a lone surrogate) reaches the terminal; each shows as U+FFFD.
"""

from __future__ import annotations

import re
from functools import lru_cache

from rich.ansi import AnsiDecoder
from rich.cells import cell_len
from rich.style import Style
from rich.text import Span, Text

from cockpit.core.text import strip_ansi
from cockpit.ui.widgets.safe_text import CONTROLS, REPLACEMENT

_ESCAPE = re.compile(
    r"\x1b\[([0-?]*)([ -/]*)([@-~])"  # CSI; an SGR (colours) when it ends in "m"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC
    r"|\x1b[@-Z\\-_]"
)


def display_plain(text: str) -> str:
    """What a line shows without colours: escapes removed, tabs expanded, control characters as U+FFFD."""
    plain = strip_ansi(text)
    if not plain.isprintable():
        plain = CONTROLS.sub(REPLACEMENT, plain)
    if "\t" in plain:  # by cells, as `line_text` expands them (`str.expandtabs` counts characters)
        expanded = Text(plain)
        expanded.expand_tabs()
        plain = expanded.plain
    return plain


def display_width(text: str) -> int:
    """The cells a line takes on screen (about 0.1 us for a plain ASCII line)."""
    if text.isascii() and text.isprintable():
        return len(text)
    plain = display_plain(text)
    return len(plain) if plain.isascii() else cell_len(plain)


@lru_cache(maxsize=1024)
def _sgr_states(codes: tuple[str, ...]) -> tuple[Style, ...]:
    """The style in force after each SGR sequence of a line, as rich's own decoder reads them."""
    decoder = AnsiDecoder()
    states = []
    for code in codes:
        decoder.decode_line(f"\x1b[{code}m")
        states.append(decoder.style)
    return tuple(states)


def line_text(raw: str, colours: bool = True) -> Text:
    """The `Text` of one line: its colours (when COLOURS) as spans over `display_plain(raw)`."""
    if not colours or "\x1b" not in raw:
        return Text(display_plain(raw), end="")
    parts: list[str] = []
    codes: list[str] = []
    starts: list[int] = []
    length = position = 0
    for match in _ESCAPE.finditer(raw):
        part = raw[position : match.start()]
        parts.append(part)
        length += len(part)
        if match.group(3) == "m" and not match.group(2):
            codes.append(match.group(1))
            starts.append(length)
        position = match.end()
    parts.append(raw[position:])
    plain = "".join(parts)
    if not plain.isprintable():
        plain = CONTROLS.sub(REPLACEMENT, plain)  # one character for one: the spans stay in place
    spans = []
    if codes:  # a line may hold escapes and no colour at all (`\x1b[K`, tqdm's `\x1b[A`, a title)
        ends = [*starts[1:], len(plain)]
        for style, start, end in zip(_sgr_states(tuple(codes)), starts, ends, strict=True):
            if style and end > start:
                spans.append(Span(start, end, style))
    text = Text(plain, spans=spans, end="")
    if "\t" in plain:
        text.expand_tabs()
    return text
