"""`PausedFeed`'s retries, with the connection replaced by one that fails (the real watch runs against
the real cluster in test_debugger_screen.py): a refusal is said and not asked again until `r`; what
waiting may cure is asked again at the watch's cadence (`cockpit.core.errors.is_permanent`)."""

from __future__ import annotations

from typing import Any

import pytest
from textual.app import App

from cockpit.core.snapshots import ClusterSnapshot
from cockpit.core.targets import parse_target
from cockpit.ui.feeds import NOT_RETRYING
from cockpit.ui.feeds.paused import PausedFeed
from cockpit.ui.state import CockpitState
from tests.harness.retry_cases import CASES, Case
from tests.harness.run import until


class FeedApp(App[int]):
    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self.error = error
        self.asked = 0
        self.state = CockpitState(target=parse_target("http://127.0.0.1:1"))
        self.state.snapshot = ClusterSnapshot(nodes=(), jobs=(), fetched_at=0.0)
        self.state.connection.phase = "connected"
        self.feed = PausedFeed(self, self.state, self._connection)
        self.feed.watch_seconds = 0.2

    async def _connection(self) -> Any:
        self.asked += 1
        raise self.error


@pytest.mark.parametrize("case", [c for c in CASES if c.name in ("auth-rejected", "unreachable")], ids=str)
async def test_the_paused_watch_stops_on_a_refusal_and_rides_out_a_drop(case: Case) -> None:
    error = case.make()
    app = FeedApp(error)
    async with app.run_test() as pilot:
        app.feed.start()
        await until(pilot, lambda: app.state.paused.error != "", 10)
        if case.permanent:
            assert app.state.paused.error == str(error) + NOT_RETRYING
            await pilot.pause(1.0)
            assert app.asked == 1
            app.feed.check_now()  # what `r` does
            await until(pilot, lambda: app.asked == 2, 5)
        else:
            assert app.state.paused.error == str(error)
            await until(pilot, lambda: app.asked >= 3, 5)
        app.feed.stop()
