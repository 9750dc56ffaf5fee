"""The Metrics screen on fixture state (no cluster): the demo's metric lines parsed into series, drawn
at 80x24 and 200x50 (text snapshots), one pane a key; a key gone NaN in red and on every screen's status
bar; space, smoothing and the filter."""

from __future__ import annotations

import math
import random
import re

from cockpit.core.metrics.lines import MetricsParser
from cockpit.core.metrics.series import SeriesStore
from cockpit.core.snapshots import JobRow
from cockpit.ui.app import CockpitApp
from cockpit.ui.screens.metrics import MetricsScreen
from cockpit.ui.state import CockpitState
from cockpit.ui.widgets.status_bar import StatusBar
from tests.harness.snapshots import check_snapshot
from tests.ui.test_actors_fixture import screen_text
from tests.ui.test_fixture_state import fixture_state

JOB = JobRow(
    submission_id="demo-20261126-165305-d49f",
    job_id="05000000",
    type="SUBMISSION",
    status="RUNNING",
    entrypoint="python -m cockpit.demo.trainer",
    message="",
    start_time=None,
    end_time=None,
    driver_node_id="ab" * 28,
    metadata={"cockpit_profile": "demo"},
)


def demo_log(steps: int, nan_at: int = 0, seed: int = 7) -> str:
    """Driver-log text as the demo prints it (Ray's actor lines between), deterministic."""
    rng = random.Random(seed)
    lines = []
    for step in range(1, steps + 1):
        lines.append(
            f"\x1b[36m(PolicyTrainer pid=9348)\x1b[0m policy update step={step} loss=0.5 version={step}"
        )
        reward = 0.2 + 0.5 * (1 - math.exp(-step / 40)) + rng.gauss(0, 0.03)
        kl = "nan" if nan_at and step >= nan_at else f"{0.02 + 0.01 * math.sin(step / 7):.4f}"
        lines.append(
            f"step={step} reward={reward:.3f} kl={kl} throughput={60000 + rng.randint(-5000, 5000)} tok/s"
        )
    return "\n".join(lines) + "\n"


def metrics_state(state: CockpitState, nan_at: int = 0) -> CockpitState:
    store = SeriesStore()
    store.extend(MetricsParser("demo").feed(demo_log(120, nan_at)))
    view = state.metrics
    view.job, view.store, view.form, view.loaded = JOB, store, "demo", True
    view.alarms = tuple(store.nonfinite())
    return state


def normalized(text: str) -> str:
    """The status bar's clock masked (the job has no start time: no elapsed time on screen)."""
    return re.sub(r"data \d+s ago", "data 0s ago", text)


async def test_metrics_screen_at_80x24_and_200x50() -> None:
    for size in ((80, 24), (200, 50)):
        state = metrics_state(fixture_state())
        app = CockpitApp(state.target, state=state, offline=True)
        async with app.run_test(size=size) as pilot:
            await pilot.press("7")
            assert isinstance(app.screen, MetricsScreen)
            await pilot.pause()
            text = normalized(screen_text(app))
            assert ("step 120" in text and "3 keys · format demo" in text) or size[0] == 80
            assert state.metrics.keys == ["reward", "kl", "throughput"]
            assert "reward" in text and "⢕⢕ kl" in text
            check_snapshot(f"metrics_{size[0]}x{size[1]}.txt", text)


async def test_a_nan_is_red_and_on_every_screen() -> None:
    state = metrics_state(fixture_state(), nan_at=100)
    app = CockpitApp(state.target, state=state, offline=True)
    async with app.run_test(size=(200, 50)) as pilot:
        bar = str(app.screen.query_one(StatusBar).render())  # the Cluster screen
        assert "✖ kl went nan at step 100 (7)" in bar
        await pilot.press("7")
        await pilot.pause()
        text = screen_text(app)
        assert "✖ kl went nan at step 100" in text
        table = app.screen.query_one("#metric-keys")
        row = [str(cell) for cell in table.get_row("kl")]
        assert row[3] == "nan"


async def test_space_smoothing_and_the_filter() -> None:
    state = metrics_state(fixture_state())
    app = CockpitApp(state.target, state=state, offline=True)
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.press("7")
        await pilot.pause()
        await pilot.press("space")  # the cursor's key (reward) leaves the chart
        assert state.metrics.keys == ["kl", "throughput"]
        await pilot.press("space")
        assert state.metrics.keys == ["kl", "throughput", "reward"]
        await pilot.press("s")
        assert state.metrics.smoothing == 0.6
        await pilot.press("s", "s")
        assert state.metrics.smoothing == 0.0
        await pilot.press("slash", *"thr")
        await pilot.pause()
        table = app.screen.query_one("#metric-keys")
        assert table.row_count == 1 and str(table.get_row_at(0)[1]) == "throughput"
        await pilot.press("escape")
        await pilot.pause()
        assert table.row_count == 3
