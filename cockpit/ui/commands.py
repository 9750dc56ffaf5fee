"""Provides the command palette's cockpit commands (ctrl+p): every action of every screen, by name.

An action is a binding with an id (`jobs.stop`, `logs.wrap`): the app's, a main screen's, or one of a
widget the screen shows (the Logs screen's `LogView`, the Actors screen's table). A widget's actions
belong to the main screen whose module uses that widget (the dedicated screen before the composite
cockpit screen). Choosing one switches to its screen, focuses the widget and runs the action exactly
as its key would: a destructive action still asks first. Each hit shows the key in effect (the user's
key map included), so the palette also teaches the keys. A query matches the title ("jobs stop") or
the verb first ("stop job"). Quit is Textual's own entry (the same action), not listed twice.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import TYPE_CHECKING, Any

from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.screen import Screen

from cockpit.ui.keymap import _subclasses
from cockpit.ui.navigation import MAIN_SCREENS, import_all
from cockpit.ui.widgets.key_hints import key_label

if TYPE_CHECKING:
    from textual.app import App
    from textual.dom import DOMNode


@dataclass(frozen=True)
class PaletteAction:
    title: str
    """What the palette lists: "Jobs: Stop"."""
    binding: Binding
    mode: str | None
    """The main screen it runs on; None: the app's own (works anywhere)."""
    owner: type[DOMNode]
    """The class that declares the binding (the app, a screen or a widget)."""
    words: str = ""
    """The title verb first, also matched: "Stop Jobs" for "Jobs: Stop", "Jobs screen" for "Screen: Jobs"."""

    def candidates(self) -> tuple[str, ...]:
        return (self.title, self.words) if self.words else (self.title,)


def _uses(screen: type[Screen[Any]], owner: type[Any]) -> bool:
    module = sys.modules.get(screen.__module__)
    return module is not None and any(value is owner for value in vars(module).values())


_TEXTUAL_HAS = frozenset({"app.quit"})
"""Ids of the app's bindings whose action Textual's system commands already offer."""


def _on_screen(label: str, binding: Binding, mode: str, owner: type[DOMNode]) -> PaletteAction:
    title = f"{label}: {binding.description}"
    return PaletteAction(title, binding, mode, owner, f"{binding.description} {label}")


@lru_cache(maxsize=1)
def palette_actions(app_class: type[Any]) -> tuple[PaletteAction, ...]:
    """Every action with an id: the app's (navigation first), each main screen's, and each widget's under
    the screen that shows it. Widgets no main screen uses (dialogs, the debug console) are left out:
    they act on what they were opened for."""
    from textual.dom import DOMNode

    import_all()  # each screen's module, with its widgets (the app imports a screen when first shown)
    actions: list[PaletteAction] = []
    for binding in app_class.BINDINGS:
        # Quit is in Textual's own commands already (the same action).
        if isinstance(binding, Binding) and binding.id and binding.id not in _TEXTUAL_HAS:
            name = binding.description or binding.action
            if binding.id.startswith("nav."):
                actions.append(PaletteAction(f"Screen: {name}", binding, None, app_class, f"{name} screen"))
            else:
                actions.append(PaletteAction(name, binding, None, app_class))
    screens = [(entry.mode, entry.label, entry.screen) for entry in MAIN_SCREENS]
    for mode, label, screen in screens:
        for binding in screen.__dict__.get("BINDINGS", []):
            # Escape closes what is open (a prompt, details): nothing to choose from a list.
            if isinstance(binding, Binding) and binding.id and binding.key != "escape":
                actions.append(_on_screen(label, binding, mode, screen))
    # Dedicated screens before the composite cockpit screen (mode "cockpit"), which uses them all.
    ordered = sorted(screens, key=lambda s: s[0] == "cockpit")
    for widget in _subclasses(DOMNode):
        if not widget.__module__.startswith("cockpit.ui.widgets") or issubclass(widget, Screen):
            continue
        bindings = [b for b in widget.__dict__.get("BINDINGS", []) if isinstance(b, Binding) and b.id]
        home = next(((mode, label) for mode, label, screen in ordered if _uses(screen, widget)), None)
        if home is None:
            continue
        for binding in bindings:
            cursor = (binding.id or "").endswith((".up", ".down", ".left", ".right"))
            if binding.description and not cursor:
                actions.append(_on_screen(home[1], binding, home[0], widget))
    return tuple(actions)


async def run_palette_action(app: App[Any], item: PaletteAction) -> None:
    """Go to the action's screen, focus its widget, and run it as its key would."""
    from textual.widget import Widget

    target: DOMNode = app
    if item.mode is not None:
        if app.current_mode != item.mode:
            await app.switch_mode(item.mode)
        target = app.screen
        if issubclass(item.owner, Widget) and not issubclass(item.owner, Screen):
            found = app.screen.query(item.owner)
            if not found:
                app.notify(f"{item.title}: not on this screen right now", severity="warning")
                return
            target = found.first()
            if target.focusable:
                target.focus()
    await app.run_action(item.binding.action, target)


class CockpitCommands(Provider):
    """The palette's source of every cockpit action (Textual's own commands stay: theme, keys, quit)."""

    def _items(self) -> list[tuple[PaletteAction, str]]:
        app = self.app
        items = []
        for item in palette_actions(type(app)):
            key = key_label(app, item.binding)
            tip = item.binding.tooltip
            items.append((item, f"key {key}" + (f" · {tip}" if tip else "")))
        return items

    async def discover(self) -> Hits:
        for item, help_text in self._items():
            yield DiscoveryHit(item.title, partial(run_palette_action, self.app, item), help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for item, help_text in self._items():
            score = max(matcher.match(text) for text in item.candidates())
            if score > 0:
                # The title is what is shown; its letters are highlighted where it matched itself.
                title = matcher.highlight(item.title) if matcher.match(item.title) > 0 else item.title
                yield Hit(
                    score,
                    title,
                    partial(run_palette_action, self.app, item),
                    help=help_text,
                )
