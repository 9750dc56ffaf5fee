"""Provides how text from the cluster is shown: as plain `Text`, never as markup, with no control character.

Every string the cluster sends (job ids, entrypoints, messages, actor and node names, death causes, file
names, error text) is hostile input. Handed to a widget as a `str` it is parsed as markup (an entrypoint
holding `[/data/a.parquet]` raises `MarkupError` and the screen dies); written to the terminal as is,
its escapes and control characters move the cursor, retitle the window or break the layout (they take no
cells, so widths are wrong). `plain` makes a `Text` that is never parsed, with ANSI escapes removed and
every control character replaced; `clean` (the pure rule, in `cockpit.core.text`) is the same for the
`str` a `Segment` or a `Text.append` takes.
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text

from cockpit.core.text import CONTROLS, REPLACEMENT, clean

__all__ = ["CONTROLS", "REPLACEMENT", "clean", "plain"]


def plain(value: object, style: str | Style = "") -> Text:
    """VALUE as a `Text` that is never read as markup, cleaned as `clean` does, in STYLE."""
    return Text(clean(value), style=style, end="")
