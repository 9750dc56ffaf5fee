"""The key map on fixture state (no cluster): a key remapped in the config works, `?` and the hint line and
footer show it, the old key no longer does it, and a destructive action still asks first; an unknown id
or a bad value in the config is one line with file, line and key, and the rest applies."""

from __future__ import annotations

from pathlib import Path

from cockpit.core.config.settings import load
from cockpit.ui.app import CockpitApp
from cockpit.ui.screens.confirm import ConfirmScreen
from cockpit.ui.screens.help import HelpScreen
from cockpit.ui.screens.jobs import JobsScreen
from cockpit.ui.widgets.key_hints import KeyHints
from tests.ui.test_fixture_state import fixture_state


async def test_a_remapped_key_works_and_shows_in_help_hints_and_footer(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("keys:\n  jobs.delete: x\n  app.help: f1\n  nav.jobs: j\n")
    config = load(path, env={})
    assert config.problems == ()
    state = fixture_state()
    app = CockpitApp(state.target, state=state, offline=True, config=config)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("4")  # the old key of the Jobs screen no longer goes there
        assert not isinstance(app.screen, JobsScreen)
        await pilot.press("j")
        assert isinstance(app.screen, JobsScreen)
        hint = app.screen.query_one(KeyHints).keys_text().plain
        assert "x delete" in hint and "d delete" not in hint
        # The footer (Textual's) follows the key map.
        active = app.screen.active_bindings
        assert "f1" in active and active["f1"].binding.id == "app.help"
        assert "j" in active and active["j"].binding.id == "nav.jobs"

        await pilot.press("d")  # the default key does nothing now
        assert isinstance(app.screen, JobsScreen)
        await pilot.press("x")  # the first row is a finished job: delete, after a confirmation
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        assert isinstance(app.screen, JobsScreen)

        await pilot.press("question_mark")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        lines = app.screen.plain.splitlines()
        assert "x Delete" in lines and "d Delete" not in lines
        assert "f1 Help" in lines or "F1 Help" in lines
        assert "j Jobs" in lines


async def test_a_broken_config_is_one_line_each_and_the_rest_applies(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("theme: light\nkeys:\n  jobs.nothing: x\nrefresh:\n  actors: never\n")
    config = load(path, env={})
    state = fixture_state()
    app = CockpitApp(state.target, state=state, offline=True, config=config)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await pilot.pause()
        messages = [str(n.message) for n in app._notifications]
        bad = f"{path}:5: refresh.actors: must be a number of seconds from 0.5 to 3600 (default 5 used)"
        assert bad in messages
        start = f"{path}:3: keys: no binding has the id 'jobs.nothing'"
        unknown = [m for m in messages if m.startswith(start)]
        assert len(unknown) == 1 and "\n" not in unknown[0]
        assert app.theme == "textual-light"  # the good line still counts


async def test_a_key_another_binding_has_is_refused_unless_that_one_moves_too(tmp_path: Path) -> None:
    """`app.help: 5` took 5 from the Logs screen without a word: refused in one line, 5 still goes to
    Logs. Given with Logs moved away (`nav.logs: L`), both apply. A key a screen binds too applies, and is
    told (the screen's binding wins there)."""
    from cockpit.ui.keymap import check_keys, usable_keys
    from cockpit.ui.screens.logs import LogsScreen

    path = tmp_path / "config.yaml"
    path.write_text('keys:\n  app.help: "5"\n')
    config = load(path, env={})
    (problem,) = check_keys(config)
    assert problem == (
        f"{path}:2: keys: app.help: '5' is already the key of nav.logs "
        "(ignored; `cockpit config keys` lists them)"
    )
    assert usable_keys(config) == {}
    state = fixture_state()
    app = CockpitApp(state.target, state=state, offline=True, config=config)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("5")
        assert isinstance(app.screen, LogsScreen)

    path.write_text('keys:\n  app.help: "5"\n  nav.logs: L\n')
    config = load(path, env={})
    assert check_keys(config) == [] and usable_keys(config) == {"app.help": "5", "nav.logs": "L"}
    path.write_text('keys:\n  nav.logs: "0"\n  app.help: "5"\n')  # nav.logs refused: 5 stays its key
    config = load(path, env={})
    assert [line.split(": ")[2] for line in check_keys(config)] == ["nav.logs", "app.help"]
    assert usable_keys(config) == {}
    path.write_text("keys:\n  nav.jobs: j\n")
    config = load(path, env={})
    (told,) = check_keys(config)
    assert "'j' is also the key of" in told and "logs.job" in told
    assert usable_keys(config) == {"nav.jobs": "j"}
