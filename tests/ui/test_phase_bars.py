"""The Metrics screen's step anatomy (`p`) on fixture state (no cluster): verl's timing keys (lines built as
verl prints them, tests/unit/test_metrics_phases.py) drawn as a bar a step at 80x24 and 200x50 (text
snapshots), a letter per phase so the bars read without colour; `p` again brings the curves back."""

from __future__ import annotations

from rich.text import Text

from cockpit.core.metrics.lines import MetricsParser
from cockpit.core.metrics.phases import anatomy
from cockpit.core.metrics.series import SeriesStore
from cockpit.ui.app import CockpitApp
from cockpit.ui.screens.metrics import MetricsScreen
from cockpit.ui.widgets.metric_chart import MetricChart
from cockpit.ui.widgets.phase_bars import PhaseBars, letters, render_bars
from tests.harness.snapshots import check_snapshot
from tests.ui.test_actors_fixture import screen_text
from tests.ui.test_fixture_state import fixture_state
from tests.ui.test_metrics_fixture import JOB, normalized
from tests.unit.test_metrics_phases import VERL_LOG


def verl_store() -> SeriesStore:
    store = SeriesStore()
    parser = MetricsParser("verl")
    store.extend(parser.feed(VERL_LOG) + parser.flush())
    return store


def test_a_letter_per_phase_and_bars_as_long_as_the_steps() -> None:
    assert letters(["gen", "update_actor", "update_critic", "update_weights", "other"]) == {
        "gen": "G",
        "update_actor": "U",
        "update_critic": "P",
        "update_weights": "D",
        "other": "·",
    }
    found = anatomy(verl_store(), last=3)
    assert found is not None
    text = render_bars(found, 80, 24).plain.splitlines()
    rows = text[-3:]
    assert [r.split()[0] for r in rows] == ["10", "11", "12"]
    # the longest step (10, with its checkpoint) fills the bar; each phase's letters are its share of it
    bar_width = 80 - 7 - 9
    assert all(len(row) == 80 for row in rows) and rows[0][7 : 7 + bar_width].count(" ") == 0
    assert rows[1][7 : 7 + bar_width].count(" ") == round(
        bar_width - found.steps[-2].total / found.steps[-3].total * bar_width
    )
    assert rows[0].count("G") == round(30.0 / found.steps[-3].total * bar_width)
    assert "S" in rows[0] and "S" not in rows[1]  # the checkpoint at step 10 only
    assert text[0].startswith("Step time by phase (verl: timing_s/*) · checkpoint 4.0s at step 10")


def test_hostile_phase_names_are_text() -> None:
    store = SeriesStore()
    store.extend([(1, "timing_s/[bold red]x[red]", 1.0), (1, "timing_s/step", 2.0)])
    found = anatomy(store)
    assert found is not None
    assert "[bold red]x[red]" in render_bars(found, 80, 10).plain
    assert isinstance(render_bars(found, 80, 10), Text)


async def test_phase_bars_at_80x24_and_200x50() -> None:
    for size in ((80, 24), (200, 50)):
        state = fixture_state()
        view = state.metrics
        view.job, view.store, view.form, view.loaded = JOB, verl_store(), "verl", True
        app = CockpitApp(state.target, state=state, offline=True)
        async with app.run_test(size=size) as pilot:
            await pilot.press("7")
            assert isinstance(app.screen, MetricsScreen)
            await pilot.press("p")
            await pilot.pause()
            assert app.screen.query_one(PhaseBars).display
            assert not app.screen.query_one(MetricChart).display
            text = normalized(screen_text(app))
            assert "Step time by phase" in text and "GGGG" in text
            check_snapshot(f"metrics_phases_{size[0]}x{size[1]}.txt", text)
            await pilot.press("p")
            await pilot.pause()
            assert app.screen.query_one(MetricChart).display
            assert "Step time by phase" not in screen_text(app)
