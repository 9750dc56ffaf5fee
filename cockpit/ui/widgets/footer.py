"""Provides `KeyFooter`: Textual's `Footer` without its leak of a screen's keys per change of bindings.

`Footer.compose` binds each `FooterKey` it makes to the footer's `compact` (`data_bind`), which stores a
watcher (the key and a setter that holds it) on the footer. Textual drops a watcher of a removed widget
only when the watched value changes (textual#6666), and `compact` never does, so every recompose (each
screen switch, focus move or binding change) left its keys alive, with their styles, strips and caches:
80 screen switches of the real app left 1,600 keys (`tests/ui/test_key_footer.py`). Before composing,
`KeyFooter` drops the watchers whose widget has been removed.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.dom import DOMNode
from textual.widgets import Footer


def drop_removed_watchers(node: DOMNode) -> int:
    """Drop NODE's watchers whose watching widget was removed from the DOM; returns how many went."""
    watchers = getattr(node, "__watchers", None)  # Textual's own name for them (`reactive._watch`)
    if not watchers:
        return 0
    dropped = 0
    for entries in watchers.values():
        kept = [(watcher, callback) for watcher, callback in entries if not _removed(watcher)]
        dropped += len(entries) - len(kept)
        entries[:] = kept
    return dropped


def _removed(watcher: object) -> bool:
    return bool(getattr(watcher, "_closing", False) or getattr(watcher, "_closed", False))


class KeyFooter(Footer):
    """The key footer of every main screen."""

    def compose(self) -> ComposeResult:
        drop_removed_watchers(self)
        yield from super().compose()
