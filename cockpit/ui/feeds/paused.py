"""Provides the paused-worker watch: workers stopped in the post-mortem debugger, found wherever the user is.

Cost on the head: one filtered request (`/api/v0/workers`, `num_paused_threads != 0`, filtered in the
GCS) every 10 s while connected, every 5 s while the Debugger screen is shown; one task lookup and one
peek (a short debugger attach that reads the exception and leaves the worker paused) per newly paused
worker. Legacy pdb sessions are looked for only while the Debugger screen is shown, every 15 s, only in
running jobs that set `RAY_DEBUG=legacy` (a short read of each running task's stderr, at most 64).

A worker seen paused for the first time rings the bell and raises a banner on any screen.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from cockpit.core.debug.paused import group_paused
from cockpit.core.errors import CockpitError, is_permanent
from cockpit.ui.feeds import NOT_RETRYING, ConnectedFeed, start_worker
from cockpit.ui.state import CockpitState, StateChanged

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from textual.app import App
    from textual.timer import Timer

    from cockpit.core.connect.connection import Connection

WATCH_SECONDS = 10.0
ANNOUNCE_MEMORY_SECONDS = 60.0
LEGACY_SECONDS = 15.0
"""Legacy sessions are searched at most this often (a read of each running task's stderr file)."""


class PausedFeed(ConnectedFeed):
    def __init__(
        self, app: App[int], state: CockpitState, connection: Callable[[], Awaitable[Connection]]
    ) -> None:
        super().__init__(app, state, connection)
        self.watch_seconds: float = state.config.refresh.paused
        """WATCH_SECONDS unless the config's `refresh.paused` says otherwise; half that while shown."""
        self._timer: Timer | None = None
        self._busy = False
        self._started = False
        self._announced: dict[str, float] = {}
        self._legacy_at = 0.0

    def start(self) -> None:
        self._started = True
        self._arm(1.0)

    def stop(self) -> None:
        self._started = False
        if self._timer is not None:
            self._timer.stop()
            self._timer = None

    def shown(self) -> None:
        """The shown screen changed: the Debugger screen asks at once."""
        if self._started and self.state.needs("paused"):
            self.check_now()

    def check_now(self) -> None:
        if self._busy or not self._started:
            return
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self._busy = True
        start_worker(self.app, self._check, group="paused-watch", description="Looking for paused workers")

    def _arm(self, delay: float) -> None:
        if not self._started:
            return
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.app.set_timer(delay, self.check_now, name="paused-watch")

    async def _check(self) -> None:
        state = self.state
        given_up = False
        try:
            if state.connection.phase != "connected" or state.snapshot is None:
                return
            shown = state.needs("paused")
            now = time.time()
            legacy = shown and now - self._legacy_at >= LEGACY_SECONDS
            if legacy:
                self._legacy_at = now
            skip = (state.paused.attached,) if state.paused.attached else ()
            try:
                from cockpit.core.debug.session import discover

                connection = await self.connection()
                listing = await discover(
                    connection,
                    state.paused.cache,
                    jobs=state.snapshot.jobs,
                    legacy=legacy,
                    skip=skip,
                    node_ips={n.node_id: n.ip for n in state.snapshot.nodes},
                )
            except CockpitError as exc:
                # The one rule (`is_permanent`): a refusal is not asked again until `r`.
                given_up = is_permanent(exc)
                state.paused.error = str(exc) + (NOT_RETRYING if given_up else "")
                self.app.post_message(StateChanged("paused"))
                return
            paused = state.paused
            before = (paused.workers, paused.total, paused.error)
            paused.workers = listing.workers
            paused.groups = group_paused(listing.workers)
            paused.total = max(listing.total_paused, len(listing.workers))
            paused.checked_at = time.time()
            paused.error = ""
            now = time.time()
            new = [w for w in listing.workers if w.key not in self._announced]
            keep = {w.key for w in listing.workers} | ({paused.attached} if paused.attached else set())
            for key in keep:
                self._announced[key] = now
            # A worker away for a minute (released, or held by this cockpit's session) rings again
            # when it pauses again; a peek's or a session's short absence does not.
            self._announced = {k: t for k, t in self._announced.items() if now - t < ANNOUNCE_MEMORY_SECONDS}
            if new:
                self._announce(len(new), new[0].exception.one_line() if new[0].exception else "")
            # Every 10 s on every screen: told only where it shows ("checked 5s ago" on the Debug screen)
            # or something changed, not a redraw of the status bar for nothing.
            if shown or (paused.workers, paused.total, paused.error) != before:
                self.app.post_message(StateChanged("paused"))
        finally:
            self._busy = False
            if not given_up:
                self._arm(self.watch_seconds / 2 if state.needs("paused") else self.watch_seconds)

    def _announce(self, count: int, exception: str) -> None:
        what = f": {exception}" if exception else ""
        workers = "worker" if count == 1 else "workers"
        self.alarm(
            f"⏸ {count} {workers} paused in the debugger{what} (6: Debugger)",
            title="Post-mortem",
            severity="warning",
            timeout=12,
        )
