"""The keys help names the cockpit and its version in its header (what a bug report asks first), drawn
on fixture state (no cluster)."""

from __future__ import annotations

import cockpit
from cockpit.ui.app import CockpitApp
from cockpit.ui.screens.help import HelpScreen
from tests.ui.test_actors_fixture import screen_text
from tests.ui.test_fixture_state import fixture_state


async def test_the_help_header_shows_the_version() -> None:
    state = fixture_state()
    app = CockpitApp(state.target, state=state, offline=True)
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        header = f"ray-cockpit {cockpit.__version__} · Keys"
        assert app.screen.header == header
        await pilot.pause()
        assert header in screen_text(app)
