"""Provides the taking of stacks for the Doctor screen: on request only (a key), never on a timer.

One take at a time. It chooses the processes (`doctor.selection.select`), then runs py-spy on every node at
once; the groups are redrawn as processes arrive (at most four times a second), so a slow node does not
hold back the others, and the nodes not yet answered are named. Its cost on the head is three or four
list requests, and on each node one SSH session (or, with profiling on at the head, one request per
process, eight at a time).
"""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING

from cockpit.core.errors import CockpitError
from cockpit.ui.feeds import ConnectedFeed, start_worker
from cockpit.ui.state import CockpitState, StateChanged

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from textual.app import App
    from textual.worker import Worker

    from cockpit.core.connect.connection import Connection
    from cockpit.core.doctor.stacks import Collector

REDRAW_SECONDS = 0.25


class StacksFeed(ConnectedFeed):
    def __init__(
        self, app: App[int], state: CockpitState, connection: Callable[[], Awaitable[Connection]]
    ) -> None:
        super().__init__(app, state, connection)
        self._worker: Worker[None] | None = None
        self._drawn = 0.0

    def take(self, job: str = "", native: bool = False) -> bool:
        """Take the stacks of JOB (its key; "" for every worker of the cluster); False: one is under way."""
        doctor = self.state.doctor
        if doctor.taking:
            return False
        doctor.taking, doctor.error, doctor.native = True, "", native
        doctor.job, doctor.partial, doctor.taking_what = job, None, (job and f"job {job}") or "the cluster"
        doctor.progress = "choosing the processes…"
        self.app.post_message(StateChanged("doctor"))
        self._worker = start_worker(
            self.app, functools.partial(self._take, job, native), group="stacks", description="Taking stacks"
        )
        return True

    def cancel(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            self._worker = None
        self.state.doctor.taking, self.state.doctor.partial = False, None

    async def _take(self, job: str, native: bool) -> None:
        from cockpit.core.doctor.errors import SelectionError
        from cockpit.core.doctor.gather import take
        from cockpit.core.doctor.selection import select

        doctor = self.state.doctor
        try:
            connection = await self.connection()
            selection = await select(connection.client, job=job or None)
            doctor.taking_what = selection.what
            doctor.progress = f"{len(selection.members)} processes on {len(selection.nodes)} node(s)…"
            self.app.post_message(StateChanged("doctor"))
            report = await take(
                connection,
                selection,
                native=native,
                local=self.state.target.kind == "local",
                on_update=self._update,
            )
        except (CockpitError, SelectionError) as exc:
            doctor.error = str(exc)
        else:
            doctor.report, doctor.what = report, doctor.taking_what
            doctor.taken_at = time.time()
            doctor.progress = ""
        finally:
            doctor.taking, doctor.partial = False, None
            self.app.post_message(StateChanged("doctor"))

    def _update(self, collector: Collector) -> None:
        doctor = self.state.doctor
        taken = len(collector.dumps) + len([f for f in collector.failures if f.pid])
        total = sum(len(m) for m in collector.expected.values())
        doctor.progress = (
            f"{taken} of {total} processes · {len(collector.done_nodes)} of {len(collector.expected)} nodes"
        )
        now = time.monotonic()
        if now - self._drawn >= REDRAW_SECONDS:
            self._drawn = now
            doctor.partial = collector.report()
            self.app.post_message(StateChanged("doctor"))
