"""The key footer (`cockpit.ui.widgets.footer.KeyFooter`) in the real app on the fixture state: switching
screens does not keep the keys of every footer it drew. Textual's own `Footer` keeps each recompose's keys
alive through their `data_bind` watchers (textual#6666): 80 switches of the real app left 1,600 of them,
never freed. Counted with the cyclic GC's view of live objects (the app freezes its start-up
objects, so they are unfrozen first)."""

from __future__ import annotations

import gc
from typing import ClassVar

import pytest
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from cockpit.ui.app import CockpitApp
from cockpit.ui.widgets.footer import KeyFooter, drop_removed_watchers
from tests.ui.test_fixture_state import fixture_state

KEYS = "12345670"


def live_footer_keys() -> int:
    gc.unfreeze()
    gc.collect()
    return sum(1 for thing in gc.get_objects() if isinstance(thing, FooterKey))


async def test_switching_screens_does_not_keep_old_footer_keys() -> None:
    state = fixture_state()
    app = CockpitApp(state.target, state=state, offline=True)
    async with app.run_test(size=(120, 40)) as pilot:

        async def round_of_screens() -> None:
            for key in KEYS:
                await pilot.press(key)
                await pilot.pause()
                await pilot.pause()

        for _ in range(2):  # every screen made, every footer drawn at least twice
            await round_of_screens()
        before = live_footer_keys()
        for _ in range(4):  # about 110 more keys alive with Textual's own Footer
            await round_of_screens()
        after = live_footer_keys()
        assert after <= before, (before, after)
        footers = list(app.query(KeyFooter)) + [f for s in app.screen_stack for f in s.query(KeyFooter)]
        assert footers and all(type(footer) is KeyFooter for footer in footers)


class FooterApp(App[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("a", "bell", "A"), Binding("b", "bell", "B")]

    def __init__(self, footer: Footer) -> None:
        super().__init__()
        self.footer = footer

    def compose(self) -> ComposeResult:
        yield self.footer


def removed_watchers(footer: Footer) -> int:
    """Watchers on FOOTER whose widget was removed: what keeps old keys alive."""
    watchers: dict[str, list[tuple[object, object]]] = getattr(footer, "__watchers", {})
    return sum(
        1 for entries in watchers.values() for watcher, _ in entries if getattr(watcher, "_closed", False)
    )


@pytest.mark.parametrize(("kind", "leaks"), [(Footer, True), (KeyFooter, False)])
async def test_a_recomposed_footer_keeps_old_keys_only_if_textuals(kind: type[Footer], leaks: bool) -> None:
    """Textual's `Footer` keeps every recompose's keys (so the workaround is still needed: when a Textual
    release fixes it, the first case fails and `KeyFooter` can go); `KeyFooter` drops them."""
    footer = kind(compact=True)
    app = FooterApp(footer)
    async with app.run_test(size=(60, 5)) as pilot:
        await pilot.pause()
        for _ in range(10):
            app.screen.refresh_bindings()  # what a screen switch or a focus move does: the footer recomposes
            await pilot.pause()
            await pilot.pause()
        keys = len(footer.query(FooterKey))
        assert keys >= 2
        kept = removed_watchers(footer)
        if leaks:
            assert kept >= 2 * keys  # the keys of more than the last recompose, kept
            assert drop_removed_watchers(footer) == kept and removed_watchers(footer) == 0
        else:
            assert kept <= keys  # at most the last recompose's, dropped at the next
