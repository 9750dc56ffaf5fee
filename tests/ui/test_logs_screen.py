"""Pilot tests of the Logs screen against the real cluster: the demo job's driver and actor logs, merged,
searched and filtered, and the first exception of a failing job found for the user."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Input, OptionList

from cockpit.core.targets import parse_target
from cockpit.ui.app import CockpitApp
from cockpit.ui.messages import ShowJobLog
from cockpit.ui.screens.logs import LogsScreen
from cockpit.ui.screens.picker import PickScreen
from cockpit.ui.widgets.log_view import LogView
from tests.harness.cluster import ClusterHandle
from tests.harness.run import until

pytestmark = pytest.mark.cluster


def lines_with(view: LogView, text: str, source: str | None = None) -> list[str]:
    return [
        line.plain for line in view.buffer if text in line.plain and (source is None or line.source == source)
    ]


async def open_logs_of(app: CockpitApp, pilot: Pilot[int], job_id: str) -> LogView:
    await until(
        pilot,
        lambda: app.state.snapshot is not None and any(j.key == job_id for j in app.state.snapshot.jobs),
    )
    assert app.state.snapshot is not None
    job = next(j for j in app.state.snapshot.jobs if j.key == job_id)
    app.post_message(ShowJobLog(job))
    await until(pilot, lambda: isinstance(app.screen, LogsScreen) and app.screen.job is not None)
    assert isinstance(app.screen, LogsScreen)
    return app.screen.query_one(LogView)


async def test_driver_and_actor_logs_merged_searched_filtered(
    ray_cluster: ClusterHandle, demo_job: str
) -> None:
    app = CockpitApp(parse_target("local"))
    async with app.run_test(size=(140, 40)) as pilot:
        view = await open_logs_of(app, pilot, demo_job)
        await until(pilot, lambda: len(lines_with(view, " reward=", "driver")) >= 3, timeout=30)
        assert "driver" in str(app.screen.query_one("#log-sources").render())
        steps = [line.split()[0] for line in lines_with(view, " reward=", "driver")]
        assert len(steps) == len(set(steps)), "each driver line arrives once"

        # Add RolloutWorker_0's stdout: its own lines arrive, tagged with their source.
        await pilot.press("o")
        await until(pilot, lambda: isinstance(app.screen, PickScreen), timeout=30)
        app.screen.query_one(Input).value = "RolloutWorker_0 stdout"
        await pilot.pause()
        picked = app.screen.query_one(OptionList)
        assert "RolloutWorker_0" in str(picked.get_option_at_index(picked.highlighted or 0).prompt)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, LogsScreen))
        await until(pilot, lambda: lines_with(view, "rollout rank=0", "RolloutWorker_0"), timeout=60)
        assert set(view.buffer.sources) >= {"driver", "RolloutWorker_0"}
        steps = [line.split()[0] for line in lines_with(view, " reward=", "driver")]
        assert len(steps) == len(set(steps)), "adding a source does not replay the others"

        # Search: the cursor lands on a matching line; n moves to another one.
        await pilot.press("slash")
        await pilot.press(*"reward=", "enter")
        first = view.cursor
        assert first is not None and "reward=" in first.plain
        await pilot.press("n")
        assert (
            view.cursor is not None and "reward=" in view.cursor.plain and view.cursor.number != first.number
        )

        # Filter: only matching lines are rows, and new matching lines keep arriving.
        await pilot.press("ampersand")
        await pilot.press(*"policy update", "enter")
        rows_now = view.rows.count
        assert rows_now > 0 and all("policy update" in line.plain for line in view.rows.lines())
        await until(pilot, lambda: view.rows.count > rows_now, timeout=30)

        # One actor's log alone (its own pane): only its lines, from its own worker file.
        await pilot.press("ampersand", "enter")  # an empty filter shows everything again
        await pilot.press("O")
        await until(pilot, lambda: isinstance(app.screen, PickScreen), timeout=30)
        app.screen.query_one(Input).value = "Critic stdout"
        await pilot.pause()
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, LogsScreen))
        await until(pilot, lambda: lines_with(view, "critic step=", "Critic"), timeout=60)
        assert set(view.buffer.sources) == {"Critic"}


async def test_first_exception_banner_and_jump(ray_cluster: ClusterHandle, tmp_path: Path) -> None:
    script = tmp_path / "crash.py"
    script.write_text(
        "import time\nfor i in range(30):\n    print(f'warming up {i}', flush=True)\n"
        "def load_shard(i):\n    raise RuntimeError(f'shard {i} is corrupt')\n"
        "load_shard(7)\n"
    )
    app = CockpitApp(parse_target("local"))
    async with app.run_test(size=(140, 40)) as pilot:
        client = await app.dashboard()
        job_id = await client.submit_job(
            {"entrypoint": f"{sys.executable} {script}", "submission_id": "crash-logs"}
        )
        app.action_refresh_now()
        await until(
            pilot,
            lambda: (
                app.state.snapshot is not None
                and any(j.key == job_id and j.driver_node_id for j in app.state.snapshot.jobs)
            ),
        )
        view = await open_logs_of(app, pilot, job_id)
        banner = app.screen.query_one("#log-banner")
        await until(pilot, lambda: banner.has_class("shown"), timeout=60)
        assert "first exception" in str(banner.render())
        view.focus()
        await pilot.press("e")
        assert view.cursor is not None and view.cursor.plain.startswith("Traceback")
        assert lines_with(view, "RuntimeError: shard 7 is corrupt")
