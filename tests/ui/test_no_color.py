"""NO_COLOR is honoured: the app draws through Textual's monochrome filter (every colour a grey), and the
command line never writes colour codes; the light and the dark theme both start."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.segment import Segment
from rich.style import Style
from textual.filter import Monochrome, NoColor
from textual.strip import Strip

from cockpit.core.config import load
from cockpit.ui.app import CockpitApp
from tests.harness.run import run_cockpit
from tests.ui.test_fixture_state import fixture_state


async def test_no_color_draws_in_greys_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    state = fixture_state()
    app = CockpitApp(state.target, state=state, offline=True)
    filters = [f for f in app._filters if isinstance(f, (Monochrome, NoColor))]
    assert app.no_color and filters
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        # The app's own colours (the connected mark is bold green) come out grey or without colour.
        strip = Strip([Segment("● connected", Style.parse("bold green on dark_blue"))])
        for filter_ in filters:
            for segment in strip.apply_filter(filter_, app.screen.styles.background):
                for colour in (segment.style.color, segment.style.bgcolor) if segment.style else ():
                    if colour is not None and colour.triplet is not None:
                        red, green, blue = colour.triplet
                        assert red == green == blue


async def test_without_no_color_there_is_no_filter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    state = fixture_state()
    app = CockpitApp(state.target, state=state, offline=True)
    assert not app.no_color and not any(isinstance(f, (Monochrome, NoColor)) for f in app._filters)


@pytest.mark.parametrize("theme", ["dark", "light"])
async def test_both_themes_start(theme: str, tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(f"theme: {theme}\n")
    state = fixture_state()
    app = CockpitApp(state.target, state=state, offline=True, config=load(path, env={}))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert app.theme == f"textual-{theme}"
        assert app.current_theme.dark == (theme == "dark")


def test_the_command_line_writes_no_colour_codes(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "NO_COLOR": "1"}
    for args in (("profiles", "list"), ("config", "show"), ("status", "slurm:")):
        done = run_cockpit(*args, env=env)
        assert "\x1b[" not in done.stdout + done.stderr, args
        assert done.stdout or done.stderr
