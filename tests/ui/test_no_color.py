"""NO_COLOR is honoured: the app draws through Textual's monochrome filter (every colour a grey), and the
command line never writes colour codes; the light and the dark theme both start."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.filter import Monochrome, NoColor

from cockpit.core.config.settings import load
from cockpit.ui.app import CockpitApp
from tests.harness.run import run_cockpit, run_cockpit_in_pty
from tests.ui.test_fixture_state import fixture_state


def colours(app: CockpitApp) -> set[tuple[int, int, int]]:
    """Every colour (foreground and background) of what the screen drew, filters applied."""
    found = set()
    for strip in app.screen._compositor.render_strips():
        for segment in strip:
            for colour in (segment.style.color, segment.style.bgcolor) if segment.style else ():
                if colour is not None:
                    found.add(tuple(colour.get_truecolor()))
    return found


async def drawn_colours(app: CockpitApp) -> set[tuple[int, int, int]]:
    """The colours of the cluster, GPU heatmap, jobs and cockpit screens as drawn on fixture state."""
    found = set()
    async with app.run_test(size=(100, 30)) as pilot:
        for key in ("1", "2", "4", "0"):
            await pilot.press(key)
            await pilot.pause()
            found |= colours(app)
    return found


async def test_no_color_draws_in_greys_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    state = fixture_state()
    app = CockpitApp(state.target, state=state, offline=True)
    assert app.no_color and any(isinstance(f, (Monochrome, NoColor)) for f in app._filters)
    drawn = await drawn_colours(app)
    assert drawn and all(red == green == blue for red, green, blue in drawn), drawn


async def test_without_no_color_there_is_colour(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    state = fixture_state()
    app = CockpitApp(state.target, state=state, offline=True)
    assert not app.no_color and not any(isinstance(f, (Monochrome, NoColor)) for f in app._filters)
    drawn = await drawn_colours(app)
    assert any(not red == green == blue for red, green, blue in drawn)  # the check above can fail


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
    """With NO_COLOR, without it to a pipe, and without it on a terminal: the cockpit's own output has
    no colour at all (`--json` included)."""
    commands = (("profiles", "list"), ("profiles", "show", "demo"), ("config", "show"), ("status", "slurm:"))
    commands += (("jobs", "slurm:", "--json"), ("actors", "slurm:", "--json"), ("config", "keys"))
    base = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TERM": "xterm-256color"}
    for env in ({**base, "NO_COLOR": "1"}, base):
        for args in commands:
            done = run_cockpit(*args, env=env)
            assert "\x1b" not in done.stdout + done.stderr, (args, env)
            assert done.stdout or done.stderr
    for args in (("config", "show"), ("profiles", "list"), ("status", "slurm:")):
        on_a_terminal = run_cockpit_in_pty(*args, env=base)
        assert on_a_terminal.strip() and "\x1b" not in on_a_terminal, args
