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
    return {binding_id: binding for binding_id, (binding, _owner) in _owned_bindings().items()}


def _owned_bindings() -> dict[str, tuple[Binding, type[Any]]]:
    """`all_bindings`, each with the class that declares it."""
    from cockpit.ui.navigation import import_all

    import_all()
    found: dict[str, tuple[Binding, type[Any]]] = {}
    for cls in _subclasses(DOMNode):
        if not cls.__module__.startswith("cockpit."):
            continue
        for binding in cls.__dict__.get("BINDINGS", []):
            if isinstance(binding, Binding) and binding.id and binding.id not in found:
                found[binding.id] = (binding, cls)
    return found


def _keys_in_effect(
    config: Config, owned: dict[str, tuple[Binding, type[Any]]]
) -> tuple[dict[str, str], dict[str, list[str]], dict[str, list[str]]]:
    """The user's remapping as it applies, and what it collides with, by id of `keys:`:
    - refused: its new key is another binding's of the same class (a screen's, a pane's, or the app's
      own): one of the two could never be pressed. Such entries are ignored, and the keys in effect are
      worked out again without them until none collides (an ignored entry's binding keeps its key, which
      may be what another entry took);
    - shadowed: an app binding (the screens' keys, help, quit) given a key a screen or pane binds too
      (or the other way round): both hold, the screen's where it is shown; told, not refused.
    """
    from textual.app import App

    remap = {binding_id: key for binding_id, key in config.keys.items() if binding_id in owned}

    def keys_of(binding_id: str) -> set[str]:
        given = remap.get(binding_id, owned[binding_id][0].key)
        return {key.strip() for key in given.split(",") if key.strip()}

    def colliding(binding_id: str, same_class: bool) -> list[str]:
        mine, owner = keys_of(binding_id), owned[binding_id][1]
        return [
            other
            for other, (_binding, other_owner) in owned.items()
            if other != binding_id
            and (owner is other_owner) == same_class
            and (same_class or issubclass(owner, App) or issubclass(other_owner, App))
            and mine & keys_of(other)
        ]

    refused: dict[str, list[str]] = {}
    while found := {binding_id: others for binding_id in remap if (others := colliding(binding_id, True))}:
        refused.update(found)
        for binding_id in found:
            del remap[binding_id]
    shadowed = {binding_id: others for binding_id in remap if (others := colliding(binding_id, False))}
    return remap, refused, shadowed


def check_keys(config: Config) -> list[str]:
    """One line per id in `keys:` that no binding has, or whose key another binding of the same screen
    (or the app's) has too (each such entry is ignored: `app.help: 5` took 5 from the Logs screen without
    a word), or that a screen's binding hides where that screen is shown (applied, and said)."""
    if not config.keys:
        return []  # nothing to check: the screens need not all be imported for it
    owned = _owned_bindings()
    problems = [
        f"{config.where(f'keys.{binding_id}')}: keys: no binding has the id {binding_id!r} "
        "(ignored; `cockpit config keys` lists the ids)"
        for binding_id in config.keys
        if binding_id not in owned
    ]
    _remap, refused, shadowed = _keys_in_effect(config, owned)
    for binding_id, others in refused.items():
        problems.append(
            f"{config.where(f'keys.{binding_id}')}: keys: {binding_id}: {config.keys[binding_id]!r} is "
            f"already the key of {_named(others)} (ignored; `cockpit config keys` lists them)"
        )
    for binding_id, others in shadowed.items():
        problems.append(
            f"{config.where(f'keys.{binding_id}')}: keys: {binding_id}: {config.keys[binding_id]!r} is also "
            f"the key of {_named(others)} (on their screens, theirs wins)"
        )
    return problems


def _named(ids: list[str]) -> str:
    return ", ".join(ids[:3]) + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")


def usable_keys(config: Config) -> dict[str, str]:
    """The user's key map as it applies: less the ids no binding has and the keys refused as taken."""
    if not config.keys:
        return {}
    return _keys_in_effect(config, _owned_bindings())[0]
