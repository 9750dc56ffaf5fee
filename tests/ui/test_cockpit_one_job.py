"""The cockpit screen on the real local cluster: its driver-log pane, its training curves and the hang watch
follow the same job (the newest running one) and read its driver log on one dashboard stream, counted on
the app's own dashboard client; leaving the screen takes the pane off the stream, not the stream away."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from cockpit.core.targets import parse_target
from cockpit.ui.app import CockpitApp
from cockpit.ui.screens.cluster import ClusterScreen
from cockpit.ui.screens.cockpit import CockpitLayoutScreen, PaneBox
from cockpit.ui.widgets.log_view import LogView
from tests.harness.cluster import ClusterHandle
from tests.harness.debug_jobs import _stop
from tests.harness.run import until
from tests.harness.streams import CountedStreams

pytestmark = pytest.mark.cluster

TRAINER = """\
import time
for step in range(1, 1000000):
    print(f"step={step} reward={step / 100:.2f} kl=0.01", flush=True)
    time.sleep(0.2)
"""


@pytest.mark.parametrize("layout", ["wide", "default"])
async def test_the_panes_and_the_hang_watch_follow_one_job_on_one_stream(
    ray_cluster: ClusterHandle, tmp_path: Path, layout: str
) -> None:
    script = tmp_path / "trainer.py"
    script.write_text(TRAINER)
    key = f"one-stream-{layout}"
    app = CockpitApp(parse_target("local"), layout=layout)
    try:
        async with app.run_test(size=(200, 50)) as pilot:
            assert isinstance(app.screen, CockpitLayoutScreen)
            screen = app.screen
            client = await app.dashboard()
            streams = CountedStreams(client, f"job-driver-{key}.log")
            await client.submit_job({"entrypoint": f"{sys.executable} -u {script}", "submission_id": key})
            app.action_refresh_now()
            pane = screen.query_one("#pane-driver_log", PaneBox)
            view = pane.widget
            assert isinstance(view, LogView)
            metrics = app.state.metrics

            def followed() -> bool:
                return (
                    screen.job is not None
                    and screen.job.key == key
                    and metrics.job is not None
                    and metrics.job.key == key
                    and [j.key for j in app.hang_feed.watched()][:1] == [key]
                    and app.hang_feed.watch_of(key) is not None
                    and any("step=" in line.plain for line in view.buffer)
                    and metrics.loaded
                    and metrics.store is not None
                    and "reward" in metrics.store
                    and app.state.doctor.watches[key].last_progress.startswith("step=")
                )

            await until(pilot, followed, timeout=180)
            # The three name the same job: the pane's title, the curves' job, the hang watch's job.
            assert key in str(pane.border_subtitle)
            assert metrics.job is not None and metrics.job.key == key
            assert app.state.doctor.watches[key].job.key == key
            # One stream of its driver log, shared by the three readers.
            assert (streams.open, streams.opened, streams.most) == (1, 1, 1)
            assert len(app.driver_logs.logs[key].readers) == 3
            steps = [line.plain.split()[0] for line in view.buffer if line.plain.startswith("step=")]
            assert len(steps) == len(set(steps)), "each line once in the pane"

            # Another screen: the pane leaves the stream; the curves and the hang watch keep it open.
            await pilot.press("1")
            assert isinstance(app.screen, ClusterScreen)
            await until(pilot, lambda: len(app.driver_logs.logs[key].readers) == 2, timeout=30)
            await pilot.pause(1.0)
            assert streams.open == 1 and app.driver_logs.open_streams(key) == 1
            await pilot.press("0")
            await until(pilot, lambda: len(app.driver_logs.logs[key].readers) == 3, timeout=30)
            await until(pilot, lambda: len(view.buffer) > len(steps) + 3, timeout=60)
            steps = [line.plain.split()[0] for line in view.buffer if line.plain.startswith("step=")]
            numbers = [int(step.removeprefix("step=")) for step in steps]
            assert numbers == list(range(numbers[0], numbers[0] + len(numbers))), "no line lost or repeated"
            assert (streams.open, streams.opened, streams.most) == (1, 1, 1)
    finally:
        await asyncio.to_thread(_stop, ray_cluster, key)
