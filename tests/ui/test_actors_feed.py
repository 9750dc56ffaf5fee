"""`ActorsFeed`'s rules for asking the head, with the fetch itself replaced by a recorder (the real fetch
runs against the real cluster in test_actors_screen.py): what is asked for, when, and what is not."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from textual.app import App

from cockpit.core.actors.listing import ActorQuery, actor_list
from cockpit.core.actors.pending import PendingReport
from cockpit.core.snapshots import ActorRow, ClusterSnapshot, Listing, ListMeta
from cockpit.core.targets import parse_target
from cockpit.ui.feeds import NOT_RETRYING
from cockpit.ui.feeds import actors as feed_module
from cockpit.ui.feeds.actors import ActorsFeed
from cockpit.ui.state import CockpitState
from tests.harness.retry_cases import CASES, Case
from tests.harness.run import until

CLUSTER = 12_000
"""More actors than one list holds (10,000): filters must go to the dashboard."""


def row(i: int, state: str = "ALIVE") -> ActorRow:
    return ActorRow(f"{i:032x}", "RolloutWorker", f"rollout_{i}", state, "02000000", "", None, 0)


class Recorder:
    """Stands in for `fetch_actor_table`: records each call, answers like a cluster of `total` actors
    (a query with a state term gets 50 rows and a complete list), and can be held to answer later."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.calls: list[tuple[ActorQuery, bool]] = []
        self.gate = asyncio.Event()
        self.gate.set()

    async def __call__(
        self, client: object, query: ActorQuery, nodes: object, rules: object, everything: bool
    ):  # type: ignore[no-untyped-def]
        self.calls.append((query, everything))
        await self.gate.wait()
        if query.state:
            rows, matching = tuple(row(i, query.state) for i in range(50)), 50
        else:
            # A cluster that fits in one list comes back whole; a larger one cut (100 rows stand in
            # for the 10,000 a list holds).
            rows, matching = (
                tuple(row(i) for i in range(self.total if self.total <= 10_000 else 100)),
                self.total,
            )
        meta = ListMeta(
            total=self.total, num_after_truncation=self.total, num_filtered=matching, returned=len(rows)
        )
        return actor_list(Listing(rows=rows, meta=meta), query), PendingReport(
            items=(), alive_nodes=1, largest_free={}
        )


class FeedApp(App[int]):
    def __init__(self) -> None:
        super().__init__()
        self.state = CockpitState(target=parse_target("http://127.0.0.1:1"))
        self.state.snapshot = ClusterSnapshot(nodes=(), jobs=(), fetched_at=0.0)
        self.state.connection.phase = "connected"
        self.state.shown_needs = frozenset({"actor_list"})
        self.feed = ActorsFeed(self, self.state, self._dashboard)

    async def _dashboard(self) -> Any:
        return object()


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    fake = Recorder(CLUSTER)
    monkeypatch.setattr(feed_module, "fetch_actor_table", fake)
    return fake


async def test_a_filter_changed_while_a_list_is_asked_for_is_asked_for_next(recorder: Recorder) -> None:
    app = FeedApp()
    async with app.run_test() as pilot:
        app.feed.shown()
        await until(pilot, lambda: app.state.actor_table is not None, 5)
        assert recorder.calls == [(ActorQuery(), False)] and not app.state.actor_table.listing.complete
        # 12,000 actors, 10,000 at most listed: `state:DEAD` must go to the dashboard.
        recorder.gate.clear()
        app.state.actor_query = "state:DEAD"
        app.feed.query_changed()
        await until(pilot, lambda: len(recorder.calls) == 2, 5)
        assert recorder.calls[1][0] == ActorQuery(state="DEAD")
        # Typing on while it is asked for: the same query asks nothing more.
        app.state.actor_query = "state:DEAD roll"
        app.feed.query_changed()
        # The filter cleared before the answer came: the dead-only list must not stay on screen.
        app.state.actor_query = ""
        app.feed.query_changed()
        await pilot.pause(0.5)
        recorder.gate.set()
        await until(pilot, lambda: len(recorder.calls) == 3, 5)
        await until(pilot, lambda: app.feed._fetched == ActorQuery(), 5)
        assert recorder.calls[2] == (ActorQuery(), False)
        assert app.state.actor_table is not None and app.state.actor_table.listing.by_state != {"DEAD": 50}


async def test_typing_before_the_first_list_asks_once(recorder: Recorder) -> None:
    app = FeedApp()
    async with app.run_test() as pilot:
        recorder.gate.clear()
        app.feed.shown()
        await until(pilot, lambda: len(recorder.calls) == 1, 5)
        for text in ("r", "ro", "rol", "role:", "role:rollout"):
            app.state.actor_query = text
            app.feed.query_changed()
            await pilot.pause(0.05)
        await pilot.pause(0.5)
        assert len(recorder.calls) == 1  # no term the dashboard filters on: nothing more to ask
        recorder.gate.set()
        await until(pilot, lambda: app.state.actor_table is not None, 5)


async def test_the_lean_fetch_only_follows_a_complete_list_of_everything(
    recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(feed_module, "LIST_SECONDS", 0.2)
    recorder.total = 500  # fits in one list
    app = FeedApp()
    async with app.run_test() as pilot:
        app.feed.shown()
        await until(pilot, lambda: len(recorder.calls) >= 2, 5)
        assert recorder.calls[:2] == [(ActorQuery(), False), (ActorQuery(), True)]
        # A filtered list, even complete, is no list of everything: the next unfiltered fetch is a full one.
        recorder.total = CLUSTER
        await until(
            pilot, lambda: app.state.actor_table is not None and not app.state.actor_table.listing.complete, 5
        )
        app.state.actor_query = "state:DEAD"
        app.feed.query_changed()
        await until(pilot, lambda: app.feed._fetched == ActorQuery(state="DEAD"), 5)
        assert app.state.actor_table is not None and app.state.actor_table.listing.complete
        cleared = len(recorder.calls)
        app.state.actor_query = ""
        app.feed.query_changed()
        await until(pilot, lambda: any(q == ActorQuery() for q, _ in recorder.calls[cleared:]), 5)
        first = next(call for call in recorder.calls[cleared:] if call[0] == ActorQuery())
        assert first == (ActorQuery(), False)


async def test_nothing_is_asked_while_the_cluster_poll_fails_or_the_screen_is_away(
    recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(feed_module, "LIST_SECONDS", 0.2)
    app = FeedApp()
    async with app.run_test() as pilot:
        app.state.connection.phase = "unreachable"  # e.g. a refused key: the poll stopped retrying
        app.feed.shown()
        await pilot.pause(1.0)
        assert recorder.calls == []
        app.state.connection.phase = "connected"
        await until(pilot, lambda: len(recorder.calls) >= 1, 5)
        app.state.shown_needs = frozenset({"nodes"})
        app.feed.shown()
        asked = len(recorder.calls)
        await pilot.pause(1.0)
        assert len(recorder.calls) == asked and not app.feed.listing


@pytest.mark.parametrize("case", [c for c in CASES if c.name in ("auth-rejected", "unreachable")], ids=str)
async def test_a_failed_list_is_asked_again_only_when_the_one_rule_says(
    case: Case, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refusal is said and not asked again until `r` (or a new filter); what waiting may cure is asked
    again at the list's cadence (`is_permanent`, as everywhere)."""
    error = case.make()
    failing = True

    async def fetch(*args: Any) -> Any:
        recorder.calls.append((args[1], args[4]))
        if failing:
            raise error
        return await Recorder(500)(*args)

    monkeypatch.setattr(feed_module, "fetch_actor_table", fetch)
    app = FeedApp()
    app.feed.list_seconds = 0.2
    async with app.run_test() as pilot:
        app.feed.shown()
        await until(pilot, lambda: app.state.stuck.error != "", 5)
        if case.permanent:
            assert app.state.stuck.error == str(error) + NOT_RETRYING
            await pilot.pause(1.0)
            assert len(recorder.calls) == 1 and not app.feed.listing
            failing = False
            app.feed.shown()  # what `r` does
        else:
            assert app.state.stuck.error == str(error)
            await until(pilot, lambda: len(recorder.calls) >= 3, 5)
            failing = False
        await until(pilot, lambda: app.state.actor_table is not None and app.state.stuck.error == "", 5)
