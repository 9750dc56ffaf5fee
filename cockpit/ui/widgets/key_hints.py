"""Provides the hint line under a screen: its keys, read from the `BINDINGS` of the screen and its panes.

Keys are spelled once, where the binding is declared; the hint line and `?` help both read them, so a
key changed (or remapped by the user: `keys:` in the config) is shown right everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from rich.text import Text
from textual.app import App
from textual.binding import Binding

from cockpit.ui.widgets.text_line import TextLine

MOVES = frozenset({"escape", "up", "down", "left", "right", "pageup", "pagedown", "home", "end"})
"""Keys every view answers the same way: never worth a hint (`?` lists them)."""


def hinted(owners: Iterable[object]) -> list[Binding]:
    """The bindings worth a hint: named (`id`), described, and not escape nor a cursor move."""
    found: list[Binding] = []
    for owner in owners:
        for binding in getattr(owner, "BINDINGS", []):
            named = isinstance(binding, Binding) and binding.id and binding.description
            if named and binding.key.split(",")[0] not in MOVES:
                found.append(binding)
    return found


def effective_key(app: Any, binding: Binding) -> Binding:
    """BINDING with the key the user mapped its id to (`keys:` in config; its own when none), first key
    only."""
    mapped = getattr(app, "user_keys", {}).get(binding.id) if binding.id else None
    if mapped:
        return replace(binding, key=mapped.split(",")[0], key_display=None)
    return replace(binding, key=binding.key.split(",")[0])


def key_of(app: App[Any], owner: object, binding_id: str) -> str:
    """How the key of OWNER's binding BINDING_ID reads on screen (for sentences such as "press n")."""
    for binding in getattr(owner, "BINDINGS", []):
        if isinstance(binding, Binding) and binding.id == binding_id:
            return key_label(app, binding)
    raise KeyError(binding_id)


def key_label(app: App[Any], binding: Binding) -> str:
    """How the key reads on screen: the key in effect (the user's key map first), its first key only
    (`N,shift+n` reads `N`), as Textual shows keys."""
    return app.get_key_display(effective_key(app, binding))


class KeyHints(TextLine):
    """One dim line: `key what · key what ...` for the bindings of `owners` (classes or instances)."""

    DEFAULT_CSS = """
    KeyHints { height: 1; color: $text-muted; padding: 0 1; }
    """

    def __init__(self, *owners: object, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self.owners = owners

    def on_mount(self) -> None:
        self.show(self.keys_text())

    def keys_text(self) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        for n, binding in enumerate(hinted(self.owners)):
            if n:
                text.append(" · ")
            text.append(key_label(self.app, binding), style="bold")
            description = binding.description
            text.append(f" {description[:1].lower()}{description[1:]}")
        return text
