"""Provides the metrics feed: the training curves of one job, from its driver log, wherever the user is.

The job is the one chosen on the Metrics screen (`j`), else the newest running one (the one rule,
`cockpit.core.snapshots.newest_running`, that the driver-log pane and the hang watch follow too). A
running job's driver log comes from the shared driver-log feed: the whole file to where the stream is,
then each chunk as it comes, with no line lost or repeated, on the one stream of that log whoever else
reads it. An ended job's log is read once, to its end (the file endpoint: no stream). A job to compare
with (`c`) is read the same way. The parser keeps only metric lines and the series are bounded.

A key that goes NaN or infinite rings the bell and raises a banner once, and the status bar says so on
every screen (an RL run that went NaN at step 812 should not run six more hours unnoticed).
"""

from __future__ import annotations

import asyncio
import functools
import time
from typing import TYPE_CHECKING

from cockpit.core.doctor.progress import job_metrics_format
from cockpit.core.errors import CockpitError
from cockpit.core.logs.sources import LogSource, LogTail
from cockpit.core.metrics.lines import MetricsParser, format_label
from cockpit.core.metrics.series import SeriesStore
from cockpit.core.snapshots import job_to_show, newest_running
from cockpit.ui.feeds import ConnectedFeed, start_worker
from cockpit.ui.feeds.driver_logs import START
from cockpit.ui.state import CockpitState, StateChanged

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from textual.app import App
    from textual.worker import Worker

    from cockpit.core.connect.connection import Connection
    from cockpit.core.snapshots import JobRow
    from cockpit.ui.feeds.driver_logs import DriverLogs, LogReader

REDRAW_SECONDS = 0.5
RETRY_SECONDS = 10.0
MAX_POINTS = 4096
MAX_KEYS = 512
"""The UI's caps (smaller than the command line's): at most 512 keys x 4,096 points, 32 MiB."""


class MetricsFeed(ConnectedFeed):
    def __init__(
        self,
        app: App[int],
        state: CockpitState,
        connection: Callable[[], Awaitable[Connection]],
        logs: DriverLogs,
    ) -> None:
        super().__init__(app, state, connection)
        self.logs = logs
        self._worker: Worker[None] | None = None
        self._compare_worker: Worker[None] | None = None
        self._reader: LogReader | None = None
        self._compare_reader: LogReader | None = None
        self._drawn = 0.0
        self._announced: set[str] = set()
        self._failed_at: float | None = None
        """When the followed job's read last failed (it is tried again after RETRY_SECONDS)."""

    # -- which job -----------------------------------------------------------------------------

    def watch(self) -> None:
        """After each poll: follow the chosen job, else the newest running one (a new run takes over)."""
        view = self.state.metrics
        snapshot = self.state.snapshot
        if snapshot is None:
            return
        jobs = snapshot.jobs
        wanted = next((j for j in jobs if j.key == view.chosen), None) if view.chosen else None
        wanted = wanted or newest_running(jobs)
        if wanted is None and view.job is None:
            wanted = job_to_show(jobs)
        if wanted is not None and (view.job is None or wanted.key != view.job.key):
            self.follow(wanted)
            return
        current = view.job
        if wanted is not None and current is not None and wanted.driver_node_id and not wanted.terminal:
            # Chosen before its driver started (no log yet), or its read failed a while ago: read it now.
            retry = self._failed_at is not None and time.monotonic() - self._failed_at > RETRY_SECONDS
            if not current.driver_node_id or retry:
                self.follow(wanted)
                return
        # A followed job that ended: it leaves its log's readers (its series stay).
        ended = {j.key for j in jobs if j.terminal}
        if view.job is not None and view.job.key in ended and view.loaded and self._reader is not None:
            self._reader.leave()
            self._reader = None
        compared = view.compare is not None and view.compare.key in ended
        read = view.compare_store is not None and view.compare_store.version > 0
        if compared and read and self._compare_reader is not None:
            self._compare_reader.leave()
            self._compare_reader = None

    def follow(self, job: JobRow) -> None:
        view = self.state.metrics
        self._worker, self._reader = _stopped(self._worker, self._reader)
        view.job, view.store, view.loaded, view.error, view.alarms = job, None, False, "", ()
        view.step_times.clear()
        view.keys = []
        self._announced.clear()
        self._failed_at = None
        if not job.driver_node_id:  # pending: no driver log yet; `watch` reads it once the driver runs
            self.app.post_message(StateChanged("metrics"))
            return
        self._worker = start_worker(
            self.app, functools.partial(self._read, job, False), group="metrics", description="Metrics"
        )
        self.app.post_message(StateChanged("metrics"))

    def compare(self, job: JobRow | None) -> None:
        view = self.state.metrics
        self._compare_worker, self._compare_reader = _stopped(self._compare_worker, self._compare_reader)
        view.compare, view.compare_store = job, None
        if job is not None:
            self._compare_worker = start_worker(
                self.app,
                functools.partial(self._read, job, True),
                group="metrics-compare",
                description="Metrics to compare",
            )
        self.app.post_message(StateChanged("metrics"))

    def stop(self) -> None:
        self._worker, self._reader = _stopped(self._worker, self._reader)
        self._compare_worker, self._compare_reader = _stopped(self._compare_worker, self._compare_reader)

    # -- reading -------------------------------------------------------------------------------

    async def _read(self, job: JobRow, compared: bool) -> None:
        """The job's driver log: the whole file, then (while the job runs) what is written next."""
        view = self.state.metrics
        form, problem = await asyncio.to_thread(job_metrics_format, job, self.state.config.profile_dirs)
        store = SeriesStore(max_points=MAX_POINTS, max_keys=MAX_KEYS)
        parser = MetricsParser(form)
        if compared:
            view.compare_store = store
        else:
            view.store, view.form = store, format_label(form)
            view.error = problem
        if job.terminal:
            await self._read_ended(job, store, parser, compared)
            return
        failing = False

        def took(chunk: bytes, history: bool) -> None:
            nonlocal failing
            if failing and not compared:
                view.error, failing = problem, False  # the stream flows again
            self._took(store, parser.feed(chunk), compared, history)

        def said(message: str, failed: bool) -> None:
            nonlocal failing
            if failed and not compared:
                view.error, failing = f"{message} (trying again)", True
                reader = self._reader
                if reader is not None and reader.left:  # its history could not be read: read it again
                    self._failed_at = time.monotonic()
                self._redraw(force=True)

        def caught_up() -> None:
            if not compared:
                view.loaded = True
            self._redraw(force=True)

        reader = self.logs.join(job, took, since=START, said=said, caught_up=caught_up)
        if compared:
            self._compare_reader = reader
        else:
            self._reader = reader

    async def _read_ended(
        self, job: JobRow, store: SeriesStore, parser: MetricsParser, compared: bool
    ) -> None:
        """An ended job's driver log, read once to its end (no stream)."""
        view = self.state.metrics
        try:
            connection = await self.connection()
            tail = LogTail(connection.client, LogSource.driver(job), lines=-1)
            async for chunk in tail.rest():
                self._took(store, parser.feed(chunk), compared, history=True)
            if not compared:
                view.loaded = True
            self._took(store, parser.flush(), compared, history=True)
        except CockpitError as exc:
            if not compared:
                view.error = f"cannot read {job.key}'s driver log: {exc} (trying again)"
                self._failed_at = time.monotonic()
        self._redraw(force=True)

    def _took(self, store: SeriesStore, samples: list, compared: bool, history: bool) -> None:  # type: ignore[type-arg]
        if not samples:
            return
        last = store.last_step
        kept = store.extend(samples)
        if not kept:
            return
        view = self.state.metrics
        if not compared:
            if not history and store.last_step is not None and store.last_step != last:
                view.step_times.append((time.monotonic(), store.last_step))
            alarms = tuple(store.nonfinite())
            if alarms != view.alarms:
                view.alarms = alarms
                fresh = [a for a in alarms if a.key not in self._announced]
                if fresh:
                    self._announced.update(a.key for a in fresh)
                    self.alarm(f"✖ {fresh[0].line} (7: Metrics)", title="NaN")
                    self.app.post_message(StateChanged("metrics", "hang"))
        self._redraw()

    def _redraw(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._drawn >= REDRAW_SECONDS:
            self._drawn = now
            self.app.post_message(StateChanged("metrics"))


def _stopped(worker: Worker[None] | None, reader: LogReader | None) -> tuple[None, None]:
    """WORKER cancelled and READER gone from its log's readers."""
    if worker is not None:
        worker.cancel()
    if reader is not None:
        reader.leave()
    return None, None
