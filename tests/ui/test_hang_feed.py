"""The TUI's hang feed judges each running job with the one `HangWatch` of `cockpit watch`: fed the same
log, place and node readings, it writes the verdict `cockpit watch` would print, the straggler hint
included, with no GPU fleet in the state (the fleet exists only while a GPU view is shown)."""

from __future__ import annotations

import time

from cockpit.core.doctor.hang import hang_policy
from cockpit.core.doctor.watch import HangWatch
from cockpit.core.errors import CockpitError
from cockpit.core.snapshots import ClusterSnapshot
from cockpit.core.targets import parse_target
from cockpit.ui.app import CockpitApp
from cockpit.ui.feeds.driver_logs import DriverLogs
from cockpit.ui.feeds.hang import HangFeed
from cockpit.ui.state import CockpitState
from tests.harness.run import until
from tests.unit.test_hang_watch import JOB, PLACE, nodes


async def refused() -> object:
    raise CockpitError("the dashboard at http://127.0.0.1:1 refused the connection")


async def test_the_tui_writes_what_the_one_hang_watch_says() -> None:
    state = CockpitState(target=parse_target("http://127.0.0.1:1"))
    state.snapshot = ClusterSnapshot(
        nodes=tuple(nodes(rollout=0.0, policy=90.0)), jobs=(JOB,), fetched_at=time.time()
    )
    state.connection.phase = "connected"
    app = CockpitApp(state.target, state=state, offline=True)
    async with app.run_test() as pilot:
        logs = DriverLogs(app, refused)  # type: ignore[arg-type]
        feed = HangFeed(app, state, refused, logs)  # type: ignore[arg-type]
        feed.tick()
        await until(pilot, lambda: feed.watch_of(JOB.key) is not None, timeout=30)
        tui = feed.watch_of(JOB.key)
        assert tui is not None and feed.watched() == [JOB]
        cli = HangWatch(JOB, hang_policy(None), time.monotonic())
        for watch in (tui, cli):
            watch.placed(PLACE, time.monotonic())
        for step in range(4):
            for watch in (tui, cli):
                watch.feed_log(f"step={step} reward=0.5\n".encode(), time.monotonic())
            feed.tick()
            expected = cli.check(state.snapshot.nodes, time.monotonic())
        entry = state.doctor.watches[JOB.key]
        assert state.gpu_fleet is None
        assert (entry.hung, entry.line, entry.straggler, entry.last_progress) == (
            expected.hung,
            expected.line,
            expected.straggler,
            expected.last_progress,
        )
        assert entry.straggler == "straggler? rollout GPUs at 0 % while policy's are at 90 %"
        assert entry.last_progress == "step=3 reward=0.5"
        # The driver log could not be followed (no dashboard here): the watch says so, in one line.
        await until(pilot, lambda: (feed.tick(), entry.error)[1] != "", timeout=30)
        assert entry.error == (
            "cannot follow the driver log: the dashboard at http://127.0.0.1:1 refused the connection"
        )
        feed.stop()
        assert logs.logs == {}  # the hang watch left: the job's log has no reader, its stream is closed
