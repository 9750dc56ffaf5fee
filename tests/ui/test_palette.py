"""The command palette (ctrl+p) on fixture state: every action of every screen by name, with its key in
effect; choosing one of another screen goes there and runs it as its key would (a destructive one still
asks first); `?` says where the palette is."""

from __future__ import annotations

from textual.command import CommandPalette

from cockpit.ui.app import CockpitApp
from cockpit.ui.commands import palette_actions
from cockpit.ui.screens.confirm import ConfirmScreen
from cockpit.ui.screens.help import HelpScreen
from cockpit.ui.screens.jobs import JobsScreen
from cockpit.ui.screens.logs import LogsScreen
from cockpit.ui.widgets.log_view import LogView
from tests.harness.run import until
from tests.ui.test_fixture_state import fixture_state


def test_every_screen_and_its_panes_have_their_actions_listed() -> None:
    titles = {a.title for a in palette_actions(CockpitApp)}
    for expected in ("Screen: Jobs", "Jobs: Stop", "Logs: Wrap", "Doctor: Stacks of the job", "Quit"):
        assert expected in titles
    ids = [a.binding.id for a in palette_actions(CockpitApp)]
    assert len(ids) == len(set(ids))  # each action once
    assert "logs.close" not in ids  # escape closes a prompt: nothing to pick from a list


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


async def test_a_destructive_action_from_the_palette_still_asks() -> None:
    state = fixture_state()
    app = CockpitApp(state.target, state=state, offline=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("4")
        await until(pilot, lambda: isinstance(app.screen, JobsScreen))
        jobs = app.screen
        assert isinstance(jobs, JobsScreen)
        job = jobs.current_job()
        assert job is not None
        await pilot.press("1")
        # The job under the cursor: a finished one can be deleted, a running one stopped; both ask.
        await pick(app, pilot, "jobs delete" if job.terminal else "jobs stop")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert app.current_mode == "jobs"
        await pilot.press("escape")  # nothing is stopped (and offline: nothing could be)
        await until(pilot, lambda: isinstance(app.screen, JobsScreen))


async def test_help_names_the_palette() -> None:
    state = fixture_state()
    app = CockpitApp(state.target, state=state, offline=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        assert isinstance(app.screen, HelpScreen)
        assert "ctrl+p every action of every screen by name" in app.screen.plain
