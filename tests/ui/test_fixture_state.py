"""Screens fed a fixture state, with no cluster at all: the screens read the state, nothing else.

The state is built from dashboard answers captured from Ray 2.60 (`shared/ray-2.60-samples`); the app
runs `offline` (no feed starts, no connection is opened), so whatever the screens show came from it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from textual.widgets import DataTable

from cockpit.core import parse
from cockpit.core.gpu_board import GpuBoard
from cockpit.core.snapshots import ClusterSnapshot
from cockpit.core.targets import parse_target
from cockpit.ui.app import CockpitApp
from cockpit.ui.screens.cluster import ClusterScreen
from cockpit.ui.screens.gpus import GpuScreen
from cockpit.ui.screens.jobs import JobsScreen
from cockpit.ui.state import CockpitState, StateChanged
from cockpit.ui.widgets.join_progress import JoinPanel
from cockpit.ui.widgets.key_hints import KeyHints
from cockpit.ui.widgets.node_table import NodeTable
from cockpit.ui.widgets.status_bar import StatusBar
from tests.harness.run import until

SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "ray-2.60-samples"


def sample(name: str) -> object:
    return json.loads((SAMPLES / name).read_text())


def fixture_state() -> CockpitState:
    summary = sample("nodes_summary_fakeamd.json")
    assert isinstance(summary, dict)
    nodes = tuple(parse.node_from_summary(entry) for entry in summary["data"]["summary"])
    jobs_doc = sample("jobs_list.json")
    assert isinstance(jobs_doc, list)
    jobs = tuple(parse.job_row(row) for row in jobs_doc)
    version = sample("version.json")
    assert isinstance(version, dict)
    state = CockpitState(target=parse_target("http://127.0.0.1:1"), expect_nodes=4, expect_gpus=2)
    state.info = parse.cluster_info(version, None)
    state.snapshot = ClusterSnapshot(nodes=nodes, jobs=jobs, fetched_at=time.time())
    state.connection.phase = "connected"
    board = GpuBoard()
    board.ingest_nodes(nodes, job_running=True, local_time=time.time())
    state.gpu_fleet = board.fleet()
    state.gpu_board = board
    return state


async def test_cluster_jobs_and_gpu_screens_show_a_fixture_state() -> None:
    state = fixture_state()
    assert state.snapshot is not None and state.gpu_fleet is not None
    app = CockpitApp(state.target, state=state, offline=True)
    async with app.run_test(size=(120, 40)) as pilot:
        # Cluster screen: every captured node, the join gate against the expected shape, the header.
        assert isinstance(app.screen, ClusterScreen)
        table = app.screen.query_one(NodeTable)
        assert {key.value for key in table.rows} == {n.node_id for n in state.snapshot.nodes}
        join = str(app.screen.query_one(JoinPanel).render())
        assert "3/4" in join  # 3 nodes joined of the 4 expected
        header = str(app.screen.query_one(StatusBar).render())
        assert "Ray 2.60.0" in header and "connected" in header

        # Jobs screen: the captured jobs, keys in the hint line read from the screen's bindings.
        await pilot.press("4")
        assert isinstance(app.screen, JobsScreen)
        jobs = app.screen.query_one("#jobs-table", DataTable)
        assert {key.value for key in jobs.rows} == {"cockpit-test-1", "cockpit-test-2", "cockpit-test-3"}
        hint = app.screen.query_one(KeyHints).text.plain
        assert "n new job" in hint and "s stop" in hint

        # GPU screen: the fleet's totals.
        await pilot.press("2")
        assert isinstance(app.screen, GpuScreen)
        totals = app.screen.query_one("#gpu-totals").render()
        assert f"{state.gpu_fleet.totals.gpus} GPUs" in str(totals)

        # A change written to the state and announced reaches the screen on view.
        await pilot.press("4")
        state.connection.phase = "unreachable"
        state.connection.detail = "cannot reach the Ray dashboard (fixture)"
        app.post_message(StateChanged("connection"))
        await pilot.pause()
        header = str(app.screen.query_one(StatusBar).render())
        assert "unreachable" in header and "(fixture)" in header
        assert app.screen.query_one("#jobs-table").has_class("stale")

    # Offline: no connection was ever opened.
    assert app.cluster_feed._connection is None


async def test_the_launcher_refuses_a_malformed_override_with_the_clis_words() -> None:
    from textual.widgets import Input

    from cockpit.core import launch
    from cockpit.ui.screens.launcher import LaunchScreen

    try:
        launch.parse_overrides(["steps=2", "oops"])
    except launch.OverrideError as exc:
        expected = str(exc)  # what `cockpit submit ... steps=2 oops` prints (tests/unit/test_launch.py)
    else:
        raise AssertionError("'oops' was taken for KEY=VALUE")
    state = fixture_state()
    app = CockpitApp(state.target, state=state, offline=True)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("4", "n")
        await until(pilot, lambda: isinstance(app.screen, LaunchScreen))
        launcher = app.screen
        assert isinstance(launcher, LaunchScreen)
        launcher.query_one("#filter", Input).value = "demo"
        await pilot.pause()
        launcher.query_one("#overrides", Input).value = "steps=2 oops"
        await pilot.pause()
        assert expected in str(launcher.query_one("#preview-text").render())
        assert launcher.plan is None and launcher.problem == expected
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert isinstance(app.screen, LaunchScreen)  # not submitted, nothing lost: the field keeps its text
        assert launcher.query_one("#overrides", Input).value == "steps=2 oops"
        # Fixed, the preview is the plan's exact request (checked against the fixture's nodes).
        launcher.query_one("#overrides", Input).value = "steps=2 step_seconds=0.1"
        await pilot.pause()
        assert launcher.plan is not None and launcher.plan.cluster_checked
        assert launcher.plan.request["entrypoint"].endswith("steps=2 step_seconds=0.1")
        assert "steps=2 step_seconds=0.1" in str(launcher.query_one("#preview-text").render())
