"""The Metrics screen (key 7) on the real local cluster: the session's demo job's driver log read and
followed, reward and KL drawn against step and redrawn as steps arrive; a second run of the same profile
overlaid with `c` (the session's finished run of the demo profile)."""

from __future__ import annotations

import pytest

from cockpit.core.targets import parse_target
from cockpit.ui.app import CockpitApp
from cockpit.ui.screens.metrics import MetricsScreen
from tests.harness.run import FinishedRun, until
from tests.ui.test_actors_fixture import screen_text

pytestmark = pytest.mark.cluster


async def test_the_demo_s_curves_are_drawn_and_follow_and_compare(
    demo_job: str, finished_demo: FinishedRun
) -> None:
    short_run = finished_demo.submission_id  # a finished run of the same profile (the session's)
    app = CockpitApp(parse_target("local"))
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.press("7")
        assert isinstance(app.screen, MetricsScreen)
        view = app.state.metrics
        view.chosen = demo_job  # other tests' jobs may be newer
        await until(pilot, lambda: view.job is not None and view.job.key == demo_job, timeout=60)

        def last_step() -> int:
            store = view.store
            return store.last_step or 0 if store is not None and "reward" in store and "kl" in store else 0

        await until(pilot, lambda: view.loaded and last_step() >= 3, timeout=60)
        first = last_step()
        # The shown keys are chosen when the screen draws the store, a refresh after it was read.
        await until(pilot, lambda: bool(view.keys), timeout=30)
        assert view.form == "demo" and view.keys[:2] == ["reward", "kl"]
        await until(pilot, lambda: last_step() >= first + 2, timeout=60)  # followed: new steps arrive
        await pilot.pause()
        text = screen_text(app)
        assert f"step {last_step()}" in text or f"step {last_step() - 1}" in text
        assert "⢕⢕ reward" in text and "⢕⢕ kl" in text
        assert "s/step (latest)" in text

        await pilot.press("c")
        assert view.compare is not None and view.compare.key == short_run
        await until(
            pilot, lambda: view.compare_store is not None and "reward" in view.compare_store, timeout=60
        )
        compare_store = view.compare_store
        assert compare_store is not None and compare_store.last_step == finished_demo.steps
        await pilot.pause()
        assert f"reward ({short_run[-8:]})" in screen_text(app)
        await pilot.press("C")
        assert view.compare is None
