"""A `slurm:` target's job on fixture state (captured `scontrol show job` lines, no Slurm, no cluster): queued
with its reason and estimate, running with the walltime left, ended; at 80x24 and 200x50 (text
snapshots); a hostile job name stays text."""

from __future__ import annotations

import re
import time
from dataclasses import replace
from pathlib import Path

from cockpit.core.slurm import queue as slurm
from cockpit.core.targets import parse_target
from cockpit.ui.app import CockpitApp
from cockpit.ui.state import CockpitState
from cockpit.ui.widgets.join_progress import JoinPanel
from cockpit.ui.widgets.status_bar import StatusBar, slurm_segment
from tests.harness.snapshots import check_snapshot
from tests.ui.test_actors_fixture import screen_text, settled_text
from tests.ui.test_fixture_state import fixture_state

CAPTURED = Path(__file__).parents[1] / "fixtures" / "slurm"


def captured(name: str) -> slurm.SlurmJob:
    text = (CAPTURED / f"{name}.txt").read_text()
    return slurm.parse_job(next(ln for ln in text.splitlines() if ln.startswith("JobId=")))


def queued_state(job: slurm.SlurmJob) -> CockpitState:
    state = CockpitState(target=parse_target(f"slurm:{job.job_id}"))
    state.slurm = job
    state.connection.phase = "queued"
    state.connection.detail = job.queue_line()
    return state


def masked(text: str) -> str:
    return re.sub(r"~\d\d:\d\d", "~HH:MM", text)


async def test_a_queued_job_shows_its_reason_estimate_and_shape() -> None:
    job = replace(captured("job_pending_resources"), start_time=time.time() + 3600, gpus=16, num_nodes=2)
    for size in ((80, 24), (200, 50)):
        app = CockpitApp(parse_target(f"slurm:{job.job_id}"), state=queued_state(job), offline=True)
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            bar = str(app.screen.query_one(StatusBar).render())
            assert "⧗ queued in Slurm · PENDING (Resources) · start ~" in bar
            panel = str(app.screen.query_one(JoinPanel).render())
            assert "QUEUED in Slurm: PENDING (Resources) · expected start " in panel
            assert "will have 2 node(s) x 8 GPUs" in panel
            shown = await settled_text(pilot, app)
            text = re.sub(r"expected start \d\d:\d\d", "expected start HH:MM", masked(shown))
            check_snapshot(f"slurm_queued_{size[0]}x{size[1]}.txt", text)


async def test_a_running_job_counts_its_walltime_down_and_warns_at_the_end() -> None:
    state = fixture_state()
    now = time.time()
    job = replace(captured("job_running"), end_time=now + 3 * 3600 + 65)
    state.target = parse_target(f"slurm:{job.job_id}")
    state.slurm = job
    text, low = slurm_segment(state, now)
    assert text.startswith("⏱ 3h") and text.endswith(f"left (slurm {job.job_id})") and not low
    state.slurm = replace(job, end_time=now + 300)
    text, low = slurm_segment(state, now)
    assert text == f"⏱ 5m00s left (slurm {job.job_id})" and low
    app = CockpitApp(state.target, state=state, offline=True)
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        bar = app.screen.query_one(StatusBar).render()
        assert f"left (slurm {job.job_id})" in str(bar)
        assert any(
            "red" in str(span.style) for span in bar.spans if "left" in str(bar)[span.start : span.end]
        )
        # Running with a snapshot: the join panel shows the join, not the queue.
        panel = str(app.screen.query_one(JoinPanel).render())
        assert panel.startswith("Nodes") and "QUEUED" not in panel


async def test_an_ended_job_says_so_and_a_hostile_name_stays_text() -> None:
    hostile = "[bold]evil[/] \x1b]0;pwned\x07"
    job = replace(captured("job_cancelled"), name=hostile)
    state = CockpitState(target=parse_target(f"slurm:{job.job_id}"))
    state.slurm = job
    state.connection.phase = "ended"
    state.connection.detail = f"{job.describe()} (not retrying)"
    app = CockpitApp(state.target, state=state, offline=True)
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        text = screen_text(app)
        assert "■ Slurm job ended" in text and "ended: CANCELLED" in text and "(not retrying)" in text
        assert "[bold]evil[/]" in text and "pwned" not in text and "\x1b" not in text
