"""The Debugger screen on fixture state (no cluster): 64 rollout workers paused on one error are one group
of 64 above a lone legacy session, at 80x24 and 200x50 (text snapshots); the status bar counts them on
every screen; hostile exception text stays text."""

from __future__ import annotations

import re
import time
from dataclasses import replace

from cockpit.core.debug.paused import ExceptionSummary, PausedWorker, group_paused
from cockpit.ui.app import CockpitApp
from cockpit.ui.screens.debugger import DebuggerScreen
from cockpit.ui.state import CockpitState
from cockpit.ui.widgets.status_bar import StatusBar
from tests.harness.snapshots import check_snapshot
from tests.ui.test_actors_fixture import screen_text
from tests.ui.test_fixture_state import fixture_state

HOUR = 3600.0


def paused_fleet(state: CockpitState, hostile: str = "") -> CockpitState:
    """64 rollout workers that raised the same error (ranks differ) an hour ago, and a legacy pdb session."""
    t0 = time.time() - HOUR
    workers = []
    for rank in range(64):
        workers.append(
            PausedWorker(
                mode="debugpy",
                worker_id=f"{rank:04x}" + "ab" * 26,
                node_id=f"{rank % 8:02x}" + "cd" * 27,
                ip=f"10.0.0.{rank % 8 + 1}",
                pid=9000 + rank,
                port=40000 + rank,
                host=f"10.0.0.{rank % 8 + 1}",
                job_id="03000000",
                task_name="vLLMRollout.generate_sequences",
                since=t0 + rank,
                exception=ExceptionSummary(
                    "RuntimeError",
                    hostile or f"CUDA error: device-side assert triggered on rank {rank}",
                    "rollout.py:212 in generate_sequences",
                ),
            )
        )
    workers.append(
        PausedWorker(
            mode="legacy",
            worker_id="ef" * 28,
            node_id="00" + "cd" * 27,
            ip="10.0.0.1",
            pid=8100,
            port=39265,
            host="localhost",
            job_id="04000000",
            task_name="reward_fn",
            since=t0 + 100,
        )
    )
    state.paused.workers = tuple(workers)
    state.paused.groups = group_paused(workers)
    state.paused.total = len(workers)
    state.paused.checked_at = t0 + 120
    return state


def normalized(text: str) -> str:
    text = re.sub(r"data \d+s ago", "data 0s ago", text)
    text = re.sub(r"checked \S+ ago", "checked 0s ago", text)
    return re.sub(r"\b\d+(h\d\dm|m\d\ds)\b", "1h00m", text)


async def test_debugger_screen_groups_at_80x24_and_200x50() -> None:
    for size in ((80, 24), (200, 50)):
        state = paused_fleet(fixture_state())
        app = CockpitApp(state.target, state=state, offline=True)
        async with app.run_test(size=size) as pilot:
            assert "⏸ 65 paused in debugger (6)" in str(app.screen.query_one(StatusBar).render())
            await pilot.press("6")
            assert isinstance(app.screen, DebuggerScreen)
            # Settled: the same screen twice in a row (on a loaded machine the footer and the details
            # line can come a frame or two after the table; bounded, a bound only).
            text, previous = "", None
            for _ in range(100):
                await pilot.pause(0.05)
                text = normalized(screen_text(app))
                if text == previous and "generate_sequences pid 9000" in text:
                    break
                previous = text
            assert "65 paused workers in 2 groups" in text
            assert "64x" in text and "RuntimeError: " in text and "[pdb]" not in text.split("64x")[0]
            assert "generate_sequences pid 9000" in text  # the oldest first, in the details line
            check_snapshot(f"debugger_{size[0]}x{size[1]}.txt", text)


async def test_hostile_exception_text_is_shown_as_text() -> None:
    hostile = "[bold]boom[/] [/data/a.parquet] \x1b]0;pwned\x07\x1b[31mred\x1b[0m \x00\x08end"
    state = paused_fleet(fixture_state(), hostile=hostile)
    state.paused.workers = state.paused.workers[:2]
    state.paused.groups = group_paused(state.paused.workers)
    state.paused.total = 2
    app = CockpitApp(state.target, state=state, offline=True)
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.press("6")
        await pilot.pause()
        text = screen_text(app)
        assert "[bold]boom[/] [/data/a.parquet] red" in text and "end" in text
        assert "pwned" not in text and "\x1b" not in text and "\x07" not in text and "\x00" not in text


def test_one_group_per_error_and_place() -> None:
    state = paused_fleet(fixture_state())
    other = replace(
        state.paused.workers[0],
        worker_id="99" * 28,
        exception=ExceptionSummary("RuntimeError", "CUDA error on rank 1", "other.py:1 in f"),
        since=time.time(),
    )
    groups = group_paused([*state.paused.workers, other])
    assert [len(g.members) for g in groups] == [64, 1, 1]


def test_an_escape_is_never_cut_in_half_in_the_table() -> None:
    """The exception was cut to its column before it was cleaned: an escape cut in half showed as `�`
    and the tail of its sequence."""
    from cockpit.ui.screens.debugger import worker_cells

    state = paused_fleet(fixture_state(), hostile="escape \x1b[31mred\x1b[0m end")
    group = state.paused.groups[0]
    for width in range(8, 40):
        shown = worker_cells(group, 0, group.members[0], time.time(), width)["exception"].plain
        assert "\ufffd" not in shown and "[31m" not in shown and len(shown) <= width, (width, shown)


async def test_a_long_exception_leaves_the_table_in_sight() -> None:
    """A 10,000-character message filled the screen under the table and hid its rows (80x24 and up)."""
    from cockpit.ui.screens.debugger import worker_details

    state = paused_fleet(fixture_state(), hostile="L" * 10_000)
    assert len(worker_details(state.paused.workers[0]).plain) < 1_000
    app = CockpitApp(state.target, state=state, offline=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("6")
        text = ""
        for _ in range(100):  # until the table and the details under it are drawn
            await pilot.pause(0.05)
            text = screen_text(app)
            if "64x" in text and "LLLL…" in text:
                break
        assert "64x" in text and text.count("└") >= 5  # the group and its rows stay in sight
        assert sum(1 for line in text.splitlines() if "LLLLLLLLLLLLLLLLLLLL" in line) <= 8


async def test_enter_pressed_fast_attaches_once() -> None:
    """Enters queued behind the one that attached each pushed a session of their own, which the first
    session's debugger then refused ("another debugger is attached")."""
    from cockpit.ui.screens.debug_session import DebugSessionScreen

    state = paused_fleet(fixture_state())
    app = CockpitApp(state.target, state=state, offline=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("6")
        await pilot.pause()
        debugger = app.screen
        assert isinstance(debugger, DebuggerScreen)
        for _ in range(3):  # as three queued Enters reach it: the table's, before the push shows
            debugger.action_attach()
        await pilot.pause()
        assert sum(isinstance(screen, DebugSessionScreen) for screen in app.screen_stack) == 1
