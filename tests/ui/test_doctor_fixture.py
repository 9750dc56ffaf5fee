"""The Doctor screen on fixture state (no cluster): the captured stacks of the hung demo job, grouped (the
odd one out first, the idle workers last), a job seen hung in the progress watch and on the status bar
of every screen, at 80x24 and 200x50 (text snapshots); Enter gives the group's stack the screen; a
hostile function name stays text."""

from __future__ import annotations

import re
import time
from dataclasses import replace

from cockpit.core.doctor.stacks import Frame, ProcessStack, StacksReport, ThreadStack
from cockpit.core.snapshots import JobRow
from cockpit.ui.app import CockpitApp
from cockpit.ui.screens.doctor import DoctorScreen
from cockpit.ui.state import CockpitState, JobWatch
from cockpit.ui.widgets.status_bar import StatusBar
from tests.harness.snapshots import check_snapshot
from tests.ui.test_actors_fixture import screen_text
from tests.ui.test_fixture_state import fixture_state
from tests.unit.test_stacks import fixture_groups

JOB = JobRow(
    submission_id="demo-hang-20261126-160617-fbbc",
    job_id="02000000",
    type="SUBMISSION",
    status="RUNNING",
    entrypoint="python -m cockpit.demo.trainer",
    message="",
    start_time=time.time() - 900,
    end_time=None,
    metadata={"cockpit_profile": "demo-hang"},
)


def doctor_state(state: CockpitState) -> CockpitState:
    doctor = state.doctor
    doctor.report = StacksReport(
        groups=fixture_groups(), notes=("taken with py-spy over SSH, one session per node",), source="ssh"
    )
    doctor.what, doctor.job, doctor.taken_at = f"job {JOB.key}", JOB.key, time.time() - 5
    doctor.watches[JOB.key] = JobWatch(
        job=JOB,
        hung=True,
        line="no progress for 12 min · 6 GPUs at 0 % (idle)",
        last_progress="step=4 reward=0.298 kl=0.0254 throughput=60095 tok/s",
        last_progress_age=720.0,
        hang_after=600.0,
        watching="lines matching ^step=\\d+",
    )
    return state


def normalized(text: str) -> str:
    text = re.sub(r"taken \d+s ago", "taken 5s ago", text)
    return re.sub(r"data \d+s ago", "data 0s ago", text)


async def test_doctor_screen_at_80x24_and_200x50() -> None:
    for size in ((80, 24), (200, 50)):
        state = doctor_state(fixture_state())
        app = CockpitApp(state.target, state=state, offline=True)
        async with app.run_test(size=size) as pilot:
            # Wherever the user is, the status bar says which job is hung and which key takes its stacks.
            bar = str(app.screen.query_one(StatusBar).render())
            assert "⚠ no progress for 12 min" in bar
            assert f"{JOB.key} (S: stacks)" in bar or size[0] == 80
            await pilot.press("8")
            assert isinstance(app.screen, DoctorScreen)
            await pilot.pause()
            text = normalized(screen_text(app))
            assert "10 processes in 4 groups" in text
            rows = [line for line in text.splitlines() if re.match(r"^ \d+\s+(in |idle)", line)]
            assert [row.split()[0] for row in rows] == ["1", "3", "1", "5"]
            assert "wait_for_weights_sync" in rows[0] and "idle in Ray's task loop" in rows[3]
            check_snapshot(f"doctor_{size[0]}x{size[1]}.txt", text)

            # The first row (the hung rank): its whole stack and its member under the table.
            assert "wait_for_weights_sync  cockpit/demo/trainer.py:35" in screen_text(app)
            details = str(app.screen.query_one("#stack-details").render())
            assert "pid 9349 on" in details and "RolloutWorker_0 [rollout]" in details
            # Enter: the stack takes the screen; again: back to the table.
            await pilot.press("enter")
            await pilot.pause()
            assert not app.screen.query_one("#stack-groups").display
            await pilot.press("enter")
            await pilot.pause()
            assert app.screen.query_one("#stack-groups").display


async def test_hostile_names_in_a_stack_stay_text() -> None:
    hostile = "[bold]evil[/] \x1b]0;pwned\x07\x1b[31mred\x1b[0m\x00"
    state = doctor_state(fixture_state())
    report = state.doctor.report
    assert report is not None
    group = report.groups[1]
    thread = ThreadStack(1, "MainThread", False, (Frame(hostile, "user/code.py", 3),))
    stack = ProcessStack(pid=group.members[0].pid, title=hostile, threads=(thread,))
    member = replace(group.members[0], actor_name=hostile)
    state.doctor.report = replace(
        report, groups=(replace(group, label=f"in {hostile}", stack=stack, members=(member,)),)
    )
    app = CockpitApp(state.target, state=state, offline=True)
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.press("8")
        await pilot.pause()
        text = screen_text(app)
        assert "[bold]evil[/]" in text and "red" in text
        assert "pwned" not in text and "\x1b" not in text and "\x07" not in text and "\x00" not in text


async def test_the_cursor_stays_on_its_group_and_a_new_take_starts_at_the_top() -> None:
    state = doctor_state(fixture_state())
    app = CockpitApp(state.target, state=state, offline=True)
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.press("8")
        await pilot.press("down")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, DoctorScreen)
        chosen = screen.selected()
        assert chosen is not None and chosen.label == "in ray.get in all_gather_weights"
        # The same report redrawn (a tick of the hang watch): the cursor stays on its group.
        screen.refresh_view()
        await pilot.pause()
        assert screen.selected() == chosen
        # A new take: the cursor starts on its first group (the odd one out).
        report = state.doctor.report
        assert report is not None
        state.doctor.report = replace(report, groups=(report.groups[1], report.groups[0], *report.groups[2:]))
        screen.refresh_view()
        await pilot.pause()
        assert screen.selected() == report.groups[1]
        assert "all_gather_weights" in str(screen.query_one("#stack-details").render())
