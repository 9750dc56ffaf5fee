"""Provides the key map: every binding of the cockpit by id, and the user's remapping checked against them.

Bindings are declared next to their action with an `id` (`jobs.stop`, `nav.cluster`); `keys:` in the
config maps ids to keys and the app hands that to Textual's `set_keymap`, so the footer follows by itself;
the hint lines and `?` read the key in effect through `key_hints.effective_key`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from textual.binding import Binding
from textual.dom import DOMNode

from cockpit.core.config.settings import Config


def _subclasses(cls: type[Any]) -> Iterator[type[Any]]:
    sub: type[Any]
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def all_bindings() -> dict[str, Binding]:
    """Every binding with an id of every screen, pane and dialog of the cockpit (id -> binding); every
    main screen's module is imported first (the app imports each only when it is first shown)."""
    from cockpit.ui.navigation import import_all

    import_all()
    found: dict[str, Binding] = {}
    for cls in _subclasses(DOMNode):
        if not cls.__module__.startswith("cockpit."):
            continue
        for binding in cls.__dict__.get("BINDINGS", []):
            if isinstance(binding, Binding) and binding.id and binding.id not in found:
                found[binding.id] = binding
    return found


def check_keys(config: Config) -> list[str]:
    """One line per id in `keys:` that no binding has (that entry is ignored)."""
    if not config.keys:
        return []  # nothing to check: the screens need not all be imported for it
    known = all_bindings()
    return [
        f"{config.where(f'keys.{binding_id}')}: keys: no binding has the id {binding_id!r} "
        "(ignored; `cockpit config keys` lists the ids)"
        for binding_id in config.keys
        if binding_id not in known
    ]


def usable_keys(config: Config) -> dict[str, str]:
    """The user's key map less the ids no binding has."""
    if not config.keys:
        return {}
    known = all_bindings()
    return {binding_id: key for binding_id, key in config.keys.items() if binding_id in known}
