"""Provides the actors feed: the Actors screen's list while it is shown, and the stuck watch behind the
status bar's "not running" warning while a job is active.

Cost on the head. The list is one `/api/v0/actors?detail=true` (at most 10,000 rows, Ray's limit) with
its `summarize` beside it, plus the "why not running" report (pending actors and placement groups by
state, the node table, the autoscaler's usage and status: seven small reads), and every 15 s the
memory of the alive actors (one `/nodes/{id}` per node holding them, 64 nodes at most). It is fetched
only while the Actors screen is shown, one fetch at a time, and the next one waits
`max(5 s, 10 x the last fetch)`, so however large the cluster, the cockpit keeps the dashboard busy at
most a tenth of the time. While the list holds every actor, filters are applied here (a keystroke
costs the head nothing); once the cluster has more than the list holds, the filter's state, job, class
and node terms are sent to the dashboard and a changed filter refetches at once.

The stuck watch runs the report alone, every 15 s while a job is pending or running and the Actors
screen is not shown (which refreshes it on every fetch).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from typing import TYPE_CHECKING

from cockpit.core.actors.listing import (
    MAX_LIMIT,
    ActorList,
    ActorQuery,
    actor_memory,
    list_actors,
    parse_query,
    with_memory,
)
from cockpit.core.actors.pending import PendingReport, fetch_pending
from cockpit.core.actors.roles import DEFAULT_RULES, RoleRules
from cockpit.core.actors.table import ActorIndex
from cockpit.core.errors import CockpitError, is_permanent
from cockpit.ui.feeds import NOT_RETRYING, start_worker
from cockpit.ui.state import ActorTable, CockpitState, StateChanged, Topic

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from textual.app import App
    from textual.timer import Timer

    from cockpit.core.cluster.dashboard import DashboardClient
    from cockpit.core.snapshots import Metric, NodeSnapshot

LIST_SECONDS = 5.0
"""The least wait between two fetches of the list while the Actors screen is shown (the default of
`refresh.actors` in config)."""
HEAD_SHARE = 10.0
"""The next fetch waits at least this many times as long as the last one took (a slow head is asked less)."""
WATCH_SECONDS = 15.0
"""How often the stuck watch asks while a job is active and the Actors screen is not shown."""
LIST_LIMIT = MAX_LIMIT
WAIT_FOR_NODES_SECONDS = 0.5
MEMORY_SECONDS = 15.0
"""How often the alive actors' memory is read while the Actors screen is shown (`/nodes/{id}` of the
nodes holding them, 64 at most: `listing.actor_memory`)."""
QUERY_PAUSE_SECONDS = 0.3
"""A changed filter that needs a new list is sent once the typing pauses this long."""


def server_part(query: ActorQuery) -> ActorQuery:
    """The terms the dashboard filters on (role and free words are matched here)."""
    return ActorQuery(state=query.state, node=query.node, job=query.job, class_name=query.class_name)


def role_counts(by_class: Mapping[str, int], rules: RoleRules) -> dict[str, int]:
    """Counts by role from counts by class (the summary counts every actor; roles come from classes,
    so an actor whose role only its name gives is counted under its class's role)."""
    counts: Counter[str] = Counter()
    for cls, n in by_class.items():
        counts[rules.role(cls) or "other"] += n
    return dict(counts.most_common())


async def fetch_actor_table(
    client: DashboardClient,
    query: ActorQuery,
    nodes: Sequence[NodeSnapshot],
    rules: RoleRules = DEFAULT_RULES,
    everything: bool = False,
) -> tuple[ActorList, PendingReport | CockpitError]:
    """One fetch of the Actors screen: the list (with counts) and the "why not running" report.

    EVERYTHING: the last list of every actor came back complete. Then the list is asked for alone and
    its counts and its pending actors are read from it, so the head reads its actor table once per
    fetch instead of four times (list, summary, and once per pending state). A failed report is
    returned, not raised: the list is still worth showing.
    """
    listing = await list_actors(
        client, query, limit=LIST_LIMIT, nodes=nodes, rules=rules, summary=not everything
    )
    every_actor = [v.actor for v in listing.rows] if everything and listing.complete else None
    try:
        return listing, await fetch_pending(client, actors=every_actor, nodes=nodes or None)
    except CockpitError as exc:
        return listing, exc


def stuck_key(kind: str, ident: str, sentence: str) -> str:
    return f"{kind}:{ident or sentence}"


class ActorsFeed:
    def __init__(
        self,
        app: App[int],
        state: CockpitState,
        dashboard: Callable[[], Awaitable[DashboardClient]],
        rules: RoleRules = DEFAULT_RULES,
    ) -> None:
        self.app = app
        self.state = state
        self.dashboard = dashboard
        self.rules = rules
        self.list_seconds: float = state.config.refresh.actors
        self._timer: Timer | None = None
        self._fetched: ActorQuery | None = None
        """The server-side part of the query the shown list was fetched with."""
        self._asking: ActorQuery | None = None
        """The server-side query of the fetch in flight (None: none is)."""
        self._due = 0.0
        """When the next fetch is due (monotonic): coming back to the screen sooner does not refetch."""
        self._busy = False
        self._rss: Mapping[str, Metric] = {}
        self._rss_at = -MEMORY_SECONDS
        self._rss_read_at: float | None = None

    # -- the list (Actors screen shown) -------------------------------------------------------------

    @property
    def listing(self) -> bool:
        """Whether a fetch of the list is due or under way (only while the Actors screen is shown)."""
        return self._timer is not None or self._asking is not None

    def shown(self) -> None:
        """A screen came into view: fetch if it shows the list and the last list is older than the
        cadence allows (else when it is due); stop when no shown screen needs the list."""
        if self.state.needs("actor_list"):
            if self._asking is None:
                self._arm(max(0.0, self._due - time.monotonic()) if self.state.actor_table else 0.0)
        elif self._timer is not None:
            self._timer.stop()
            self._timer = None

    def query_changed(self) -> None:
        """The filter changed: refetch (after a short pause in the typing) if the dashboard must now be
        asked differently than the list on screen, or the one on its way, was."""
        if self.state.needs("actor_list") and self._wanted() != (self._asking or self._fetched):
            self._arm(QUERY_PAUSE_SECONDS)

    def _wanted(self) -> ActorQuery:
        """Everything while everything fits in the list (filters are applied here); once it does not,
        the filter's server-side terms, so the list holds what the user is looking for."""
        table = self.state.actor_table
        if table is None or (self._fetched == ActorQuery() and table.listing.complete):
            return ActorQuery()
        return server_part(parse_query(self.state.actor_query))

    def fetch_now(self) -> None:
        self._arm(0.0)

    def _arm(self, delay: float) -> None:
        """The next fetch in DELAY seconds (the one armed timer, replaced)."""
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        if delay <= 0:
            start_worker(self.app, self._fetch, group="actor-list", description="Listing actors")
        else:
            self._timer = self.app.set_timer(delay, self.fetch_now, name="actor-list")

    async def _fetch(self) -> None:
        state = self.state
        if not state.needs("actor_list"):
            return
        snapshot = state.snapshot
        if snapshot is None or state.connection.phase != "connected":
            # Nothing to ask yet (the first poll brings the host names), or the cluster poll is failing:
            # it owns the connection and its retries (a refused key is not retried from here).
            self._arm(WAIT_FOR_NODES_SECONDS if snapshot is None else self.list_seconds)
            return
        started = time.monotonic()
        query = self._wanted()
        table = state.actor_table
        everything = (
            query == ActorQuery()
            and self._fetched == ActorQuery()
            and table is not None
            and table.listing.complete
        )
        self._asking = query
        given_up = False
        try:
            client = await self.dashboard()
            listing, report = await fetch_actor_table(client, query, snapshot.nodes, self.rules, everything)
            took = time.monotonic() - started
            rss = await self._memory(client, listing)
            listing = await asyncio.to_thread(with_memory, listing, rss)
            index = await asyncio.to_thread(ActorIndex.build, listing.rows, state.actor_sort)
        except CockpitError as exc:
            # The one rule (`is_permanent`): a refusal is not asked again until the filter changes or
            # the user presses `r`; anything waiting may cure is, at the list's cadence.
            given_up = is_permanent(exc)
            state.stuck.error = str(exc) + (NOT_RETRYING if given_up else "")
            self.app.post_message(StateChanged("actors"))
            delay, again = self.list_seconds, False
        else:
            self._fetched = query
            state.actor_table = ActorTable(
                listing=listing,
                index=index,
                fetched_at=time.time(),
                took=took,
                by_role=role_counts(listing.by_class, self.rules),
                memory_read_at=self._rss_read_at,
            )
            state.stuck.error = ""
            topics: list[Topic] = ["actors"]
            if self._took_report(report):
                topics.append("pending")
            self.app.post_message(StateChanged(*topics))
            delay = max(self.list_seconds, HEAD_SHARE * took)
            again = self._wanted() != query  # the filter changed meanwhile: ask again now
        finally:
            self._asking = None
        self._due = time.monotonic() + delay
        if state.needs("actor_list") and not given_up:
            self._arm(0.0 if again else delay)

    async def _memory(self, client: DashboardClient, listing: ActorList) -> Mapping[str, Metric]:
        """The alive actors' RSS, read again at most every `MEMORY_SECONDS` (Ray's own refresh); the last
        reading stays when a read fails (the list is still worth showing)."""
        if time.monotonic() - self._rss_at >= MEMORY_SECONDS:
            self._rss_at = time.monotonic()
            with contextlib.suppress(CockpitError):
                self._rss = await actor_memory(client, listing)
                self._rss_read_at = time.time()
        return self._rss

    # -- the stuck watch (a job active, the screen not shown) ---------------------------------------

    def watch(self) -> None:
        """After each cluster poll: check what is stuck if a job is active and it is time."""
        state = self.state
        if state.needs("actor_list") or self._busy or state.connection.phase != "connected":
            return
        snapshot = state.snapshot
        active = snapshot is not None and any(job.status in ("PENDING", "RUNNING") for job in snapshot.jobs)
        if not active:
            if state.stuck.since:
                state.stuck.since.clear()
                state.stuck.report = None
                self.app.post_message(StateChanged("pending"))
            return
        if time.time() - state.stuck.checked_at < WATCH_SECONDS:
            return
        self._busy = True
        start_worker(self.app, self._watch, group="stuck-watch", description="Checking for stuck actors")

    async def _watch(self) -> None:
        try:
            client = await self.dashboard()
            snapshot = self.state.snapshot  # the cluster feed's node table, polled anyway
            nodes = snapshot.nodes if snapshot is not None else None
            report: PendingReport | BaseException = await fetch_pending(client, nodes=nodes)
        except CockpitError as exc:
            report = exc
        finally:
            self._busy = False
        if self._took_report(report):
            self.app.post_message(StateChanged("pending"))

    def _took_report(self, report: PendingReport | BaseException) -> bool:
        """Record a report and how long each item has been stuck; False if it failed (kept as it was)."""
        stuck = self.state.stuck
        now = time.time()
        stuck.checked_at = now
        if isinstance(report, CockpitError):
            return False  # the last report stays; the next fetch tries again
        if not isinstance(report, PendingReport):
            raise report  # a bug: the app's worker handler reports it
        before = stuck.since
        since: dict[str, float] = {}
        for item in report.items:
            key = stuck_key(item.kind, item.ident, item.sentence)
            since[key] = before.get(key, now)
        stuck.since = since
        stuck.report = report
        return True
