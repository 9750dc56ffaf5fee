"""The command palette (ctrl+p) on fixture state: every action of every screen by name, with its key in
effect; choosing one of another screen goes there and runs it as its key would (a destructive one still
asks first); `?` says where the palette is."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.command import CommandPalette, Hit

from cockpit.core.config.settings import load
from cockpit.ui.app import CockpitApp
from cockpit.ui.commands import CockpitCommands, palette_actions
from cockpit.ui.screens.confirm import ConfirmScreen
from cockpit.ui.screens.help import HelpScreen
from cockpit.ui.screens.jobs import JobsScreen
from cockpit.ui.screens.logs import LogsScreen
from cockpit.ui.widgets.log_view import LogView
from tests.harness.run import until
from tests.ui.test_fixture_state import fixture_state


def test_every_screen_and_its_panes_have_their_actions_listed() -> None:
    titles = {a.title for a in palette_actions(CockpitApp)}
    for expected in ("Screen: Jobs", "Jobs: Stop", "Logs: Wrap", "Doctor: Stacks of the job", "Stacks"):
        assert expected in titles
    ids = [a.binding.id for a in palette_actions(CockpitApp)]
    assert len(ids) == len(set(ids))  # each action once
    assert "logs.close" not in ids  # escape closes a prompt: nothing to pick from a list
    assert "app.quit" not in ids  # Textual's own Quit (kept) is the same action: not listed twice


async def hits(app: CockpitApp, query: str) -> list[Hit]:
    provider = CockpitCommands(app.screen)
    return [hit async for hit in provider.search(query)]  # type: ignore[misc]


async def test_a_query_matches_the_title_or_the_verb_first_and_shows_its_key(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("keys:\n  jobs.stop: x\n")
    state = fixture_state()
    app = CockpitApp(state.target, state=state, offline=True, config=load(path, env={}))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        for query in ("jobs stop", "stop job", "stpjob"):
            found = sorted(await hits(app, query), key=lambda h: -h.score)
            assert found and found[0].text == "Jobs: Stop", query
            assert found[0].help == "key x"  # the user's key, not the default s
        assert [h.text for h in await hits(app, "wrap log")][:1] == ["Logs: Wrap"]
        assert not await hits(app, "no such action zzz")
        # Textual's own commands are still offered next to the cockpit's.
        system = {command.title for command in app.get_system_commands(app.screen)}
        assert {"Quit", "Theme", "Keys"} <= system


async def pick(app: CockpitApp, pilot: object, query: str) -> None:
    await pilot.press("ctrl+p")  # type: ignore[attr-defined]
    await until(pilot, lambda: isinstance(app.screen, CommandPalette))  # type: ignore[arg-type]
    await pilot.press(*query)  # type: ignore[attr-defined]
    await pilot.pause(0.5)  # type: ignore[attr-defined]
    await pilot.press("enter")  # type: ignore[attr-defined]


async def test_an_action_of_another_screen_goes_there_and_runs() -> None:
    state = fixture_state()
    app = CockpitApp(state.target, state=state, offline=True)
    async with app.run_test(size=(120, 40)) as pilot:
        assert app.current_mode == "cluster"
        await pick(app, pilot, "logs wrap")
        await until(pilot, lambda: isinstance(app.screen, LogsScreen))
        view = app.screen.query_one(LogView)
        await until(pilot, lambda: view.wrap)  # off by default: the action turned it on
        # Run again from elsewhere: it toggles back (the same action as the key).
        await pilot.press("1")
        await pick(app, pilot, "logs wrap")
        await until(pilot, lambda: isinstance(app.screen, LogsScreen) and not view.wrap)


@pytest.mark.parametrize(("query", "running"), [("stop job", True), ("delete job", False)])
async def test_a_destructive_action_typed_on_another_screen_goes_there_and_asks_first(
    query: str, running: bool
) -> None:
    state = fixture_state()
    app = CockpitApp(state.target, state=state, offline=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("4")
        await until(pilot, lambda: isinstance(app.screen, JobsScreen))
        jobs = app.screen
        assert isinstance(jobs, JobsScreen)
        # The cursor to a running job (stop) or a finished one (delete): the action acts on that one.
        for _ in range(len(state.snapshot.jobs) if state.snapshot else 0):
            job = jobs.current_job()
            if job is not None and job.terminal != running:
                break
            await pilot.press("down")
        chosen = jobs.current_job()
        assert chosen is not None and chosen.terminal != running
        await pilot.press("1")
        await until(pilot, lambda: app.current_mode == "cluster")
        await pick(app, pilot, query)
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert app.current_mode == "jobs"
        confirm = app.screen
        assert isinstance(confirm, ConfirmScreen) and chosen.key in confirm.question.plain
        await pilot.press("n")  # no: nothing is stopped or deleted (and offline: nothing could be)
        await until(pilot, lambda: isinstance(app.screen, JobsScreen))


async def test_help_names_the_palette() -> None:
    state = fixture_state()
    app = CockpitApp(state.target, state=state, offline=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        assert isinstance(app.screen, HelpScreen)
        assert "ctrl+p every action of every screen by name" in app.screen.plain
