"""The Debugger screen (key 6) on the real local cluster: a demo-crash job's paused worker found while
the user is on another screen (banner, status bar), listed with its exception, attached with Enter
(exception, stack, source, variables, an evaluated expression), detached and re-attached, then
released with `c` after the confirmation: the job ends FAILED with the original error."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from textual.widgets import Log, OptionList, Static, Tree

from cockpit.core.targets import parse_target
from cockpit.ui.app import CockpitApp
from cockpit.ui.screens.confirm import ConfirmScreen
from cockpit.ui.screens.debug_session import DebugSessionScreen
from cockpit.ui.screens.debugger import DebuggerScreen
from cockpit.ui.widgets.status_bar import StatusBar
from tests.harness.cluster import ClusterHandle
from tests.harness.debug_jobs import CRASH_LINE, CrashJob, demo_crash_job, wait_status
from tests.harness.run import until

pytestmark = pytest.mark.cluster


def rendered(widget: Static | StatusBar) -> str:
    return str(widget.render())


@pytest.fixture
def job(ray_cluster: ClusterHandle) -> Iterator[CrashJob]:
    """A demo-crash job (its job-runner uses asyncio.run: set up outside the test's event loop)."""
    with demo_crash_job(ray_cluster) as crash:
        yield crash


async def test_paused_worker_attach_evaluate_detach_release(
    ray_cluster: ClusterHandle, job: CrashJob
) -> None:
    app = CockpitApp(parse_target("local"))
    async with app.run_test(size=(200, 50)) as pilot:
        # On the Cluster screen: the pause is announced there (status bar and a banner).
        def mine() -> list:  # type: ignore[type-arg]
            return [w for w in app.state.paused.workers if w.job_id == job.job_id]

        await until(pilot, lambda: bool(mine()) and mine()[0].exception is not None, timeout=90)
        assert "paused in debugger" in rendered(app.screen.query_one(StatusBar))
        assert any("paused in the debugger" in str(n.message) for n in app._notifications)

        await pilot.press("6")
        assert isinstance(app.screen, DebuggerScreen)
        await until(pilot, lambda: app.screen.query_one("#paused-table").row_count >= 1, timeout=30)
        screen = app.screen
        keys = [w.key for _g, _i, w in screen.rows()]
        table = screen.query_one("#paused-table")
        table.move_cursor(row=keys.index(mine()[0].key))
        await pilot.pause()
        row = " ".join(str(cell) for cell in table.get_row(mine()[0].key))
        assert "RuntimeError: rollout rank 0: NaN in logits at step 3" in row and "RolloutWorker" in row
        await pilot.press("enter")
        assert isinstance(app.screen, DebugSessionScreen)
        session_screen = app.screen
        await until(pilot, lambda: session_screen.session is not None, timeout=30)
        header = rendered(session_screen.query_one("#dbg-exception", Static))
        assert "RuntimeError: rollout rank 0: NaN in logits at step 3" in header
        assert f"trainer.py:{CRASH_LINE} in generate" in header
        frames = session_screen.query_one("#dbg-frames", OptionList)
        assert frames.option_count >= 2 and "generate" in str(frames.get_option_at_index(0).prompt)
        await until(pilot, lambda: "NaN in logits" in rendered(session_screen.query_one("#dbg-source")))
        tree = session_screen.query_one("#dbg-vars", Tree)
        await until(
            pilot,
            lambda: any("step" in str(n.label) for scope in tree.root.children[:1] for n in scope.children),
        )

        await pilot.press("e", *"step * 10", "enter")
        output = session_screen.query_one("#dbg-output", Log)
        await until(pilot, lambda: ">>> step * 10" in "\n".join(output.lines) and "30" in output.lines[-1])

        # d: detached, the worker stays paused and comes back to the list.
        await pilot.press("escape")  # out of the prompt
        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, DebuggerScreen), timeout=15)
        await until(pilot, lambda: bool(mine()) and app.state.paused.attached == "", timeout=30)

        # Enter again, then c and y: released.
        keys = [w.key for _g, _i, w in app.screen.rows()]
        app.screen.query_one("#paused-table").move_cursor(row=keys.index(mine()[0].key))
        await pilot.press("enter")
        session_screen = app.screen
        assert isinstance(session_screen, DebugSessionScreen)
        await until(pilot, lambda: session_screen.session is not None, timeout=30)
        await pilot.press("c")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await until(pilot, lambda: isinstance(app.screen, DebuggerScreen), timeout=15)

    async def failed() -> None:
        async with ray_cluster.client() as client:
            finished = await wait_status(client, job.submission_id)
            assert finished.status == "FAILED" and "NaN in logits at step 3" in finished.message

    await failed()
