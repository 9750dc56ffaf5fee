"""Pilot tests of the Jobs screen against the real cluster: launch, follow to SUCCEEDED, stop, delete."""

from __future__ import annotations

import json

import pytest
from textual.widgets import DataTable, Input

from cockpit.core.targets import parse_target
from cockpit.ui.app import CockpitApp
from cockpit.ui.screens.confirm import ConfirmScreen
from cockpit.ui.screens.jobs import JobsScreen
from cockpit.ui.screens.launcher import LaunchScreen, fuzzy_score
from cockpit.ui.screens.logs import LogsScreen
from cockpit.ui.widgets.log_view import LogView
from tests.harness.cluster import ClusterHandle
from tests.harness.run import run_cockpit, until

pytestmark = pytest.mark.cluster


def status_of(app: CockpitApp, job_id: str) -> str:
    table = app.screen.query_one("#jobs-table", DataTable)
    keys = [row.value for row in table.rows]
    return str(table.get_cell(job_id, "status")) if job_id in keys else ""


async def why_not_done(app: CockpitApp, cluster: ClusterHandle, key: str) -> str:
    """The job's row as the app last saw it, and every actor not DEAD on the cluster with its job, state
    and resources: what a job still running after its bound was waiting for."""
    jobs = app.state.snapshot.jobs if app.state.snapshot else ()
    row = next((j for j in jobs if j.key == key), None)
    said = f"job {key}: {row.status if row else 'not listed'} {row.message if row else ''!r}; table: "
    said += repr(status_of(app, key))
    async with cluster.client() as client:
        actors = await client.actors()
    alive = [a for a in actors.rows if a.state != "DEAD"]
    return (
        said
        + "; actors not DEAD: "
        + "; ".join(
            f"{a.class_name} {a.name} job {a.job_id} {a.state} {dict(a.required_resources)}" for a in alive
        )
    )


def select(app: CockpitApp, job_id: str) -> None:
    table = app.screen.query_one("#jobs-table", DataTable)
    table.move_cursor(row=table.get_row_index(job_id))


def test_fuzzy_score() -> None:
    assert fuzzy_score("vppo", "verl-ppo-gsm8k") is not None
    assert fuzzy_score("xyz", "verl-ppo-gsm8k") is None
    assert fuzzy_score("demo", "demo") < fuzzy_score("demo", "d-e-m-o")  # type: ignore[operator]


async def test_launch_from_the_tui_runs_to_success_then_delete(ray_cluster: ClusterHandle) -> None:
    app = CockpitApp(parse_target("local"))
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("4")
        assert isinstance(app.screen, JobsScreen)
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, LaunchScreen))
        launcher = app.screen
        assert isinstance(launcher, LaunchScreen)
        await pilot.press(*"democrash")
        assert launcher.selected() is not None and launcher.selected().name == "demo-crash"  # type: ignore[union-attr]
        launcher.query_one("#filter", Input).value = "demo"
        await pilot.pause()
        assert launcher.selected().name == "demo"  # type: ignore[union-attr]
        launcher.query_one("#overrides", Input).value = "steps=4 step_seconds=0.2 rollout_workers=1"
        await pilot.pause()
        preview = str(launcher.query_one("#preview-text").render())
        assert (
            "cockpit.demo.trainer steps=300 step_seconds=1.0 steps=4 step_seconds=0.2 rollout_workers=1"
            in preview
            and "cluster shape" in preview
        )
        before = {j.key for j in (app.state.snapshot.jobs if app.state.snapshot else ())}
        await pilot.press("ctrl+s")
        await until(pilot, lambda: isinstance(app.screen, JobsScreen))

        def launched() -> list[str]:
            jobs = app.state.snapshot.jobs if app.state.snapshot else ()
            # This launch's own: profile `demo` with these overrides (other tests launch `demo-hang-fast`
            # and other demo profiles with overrides on the same session cluster, some still listed).
            return [
                j.key
                for j in jobs
                if j.key not in before
                and j.metadata.get("cockpit_profile") == "demo"
                and json.loads(j.metadata.get("cockpit_overrides") or "[]")
                == [
                    "steps=4",
                    "step_seconds=0.2",
                    "rollout_workers=1",
                ]
            ]

        await until(pilot, launched, timeout=30)
        job_id = launched()[0]
        # A bound only: 5 actors to start and 4 steps, on a 2-core machine shared with the other part.
        # 25-45 s in most whole runs here; 187 s in one and over 300 s in two, under the heaviest load
        # (run alone or after every other session-cluster test: 27 s). What held it is said on failure.
        try:
            await until(pilot, lambda: status_of(app, job_id) == "SUCCEEDED", timeout=480)
        except AssertionError as exc:  # say what the job and the cluster's actors were doing
            raise AssertionError(f"{exc}: {await why_not_done(app, ray_cluster, job_id)}") from None

        select(app, job_id)
        await pilot.press("enter")
        # Enter opens the Logs screen on that job's driver log.
        await until(pilot, lambda: isinstance(app.screen, LogsScreen))
        view = app.screen.query_one(LogView)
        await until(pilot, lambda: any("step=4 reward=" in line.plain for line in view.buffer), timeout=30)
        await pilot.press("4")

        select(app, job_id)
        await pilot.press("r")  # resubmit with edits: the launcher comes back with profile and overrides
        await until(pilot, lambda: isinstance(app.screen, LaunchScreen))
        assert app.screen.query_one("#overrides", Input).value == "steps=4 step_seconds=0.2 rollout_workers=1"
        assert app.screen.selected().name == "demo"  # type: ignore[attr-defined]
        await pilot.press("escape")

        select(app, job_id)
        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await until(pilot, lambda: status_of(app, job_id) == "", timeout=30)


async def test_stop_asks_first_then_the_job_ends_stopped(ray_cluster: ClusterHandle) -> None:
    from cockpit.core.jobs import launch, profiles

    plan = launch.plan(
        profiles.load(profiles.find("demo")), launch.parse_overrides(["steps=1000", "rollout_workers=1"])
    )
    app = CockpitApp(parse_target("local"))
    async with app.run_test(size=(140, 40)) as pilot:
        job_id = await launch.submit(await app.dashboard(), plan)
        await pilot.press("4")
        await until(pilot, lambda: status_of(app, job_id) in ("PENDING", "RUNNING"), timeout=30)
        select(app, job_id)
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("n")  # no: nothing happens
        await pilot.pause(1)
        assert status_of(app, job_id) in ("PENDING", "RUNNING")
        select(app, job_id)
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await until(pilot, lambda: status_of(app, job_id) == "STOPPED", timeout=60)


async def test_a_job_submitted_from_the_cli_is_resubmitted_with_its_overrides(
    ray_cluster: ClusterHandle,
) -> None:
    submitted = run_cockpit(
        "submit", "local", "demo", "steps=2", "step_seconds=0.1", "rollout_workers=1", timeout=240
    )
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.split()[-1]
    app = CockpitApp(parse_target("local"))
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("4")
        await until(pilot, lambda: status_of(app, job_id) != "", timeout=30)
        select(app, job_id)
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, LaunchScreen))
        launcher = app.screen
        assert isinstance(launcher, LaunchScreen)
        assert launcher.query_one("#overrides", Input).value == "steps=2 step_seconds=0.1 rollout_workers=1"
        assert launcher.selected() is not None and launcher.selected().name == "demo"  # type: ignore[union-attr]
        await pilot.pause()
        assert launcher.plan is not None
        assert [o.text for o in launcher.plan.overrides] == [
            "steps=2",
            "step_seconds=0.1",
            "rollout_workers=1",
        ]
        await pilot.press("escape")
