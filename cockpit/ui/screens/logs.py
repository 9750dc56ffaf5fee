"""Provides the Logs screen (key 5): live driver, actor and node logs, merged, searchable, filterable.

Each source is one dashboard stream fed into the Line-API `LogView`: a job's driver log is read from the
shared driver-log feed (the one stream of that log, which the hang watch, the curves and the cockpit
screen's pane read too), any other log through a `LogTail` of its own. Streams are read only while the
screen is shown (they count against the dashboard's limit of concurrent requests) and continue where
they stopped when it is shown again. At most `MAX_STREAMS` sources at once.
"""

from __future__ import annotations

import contextlib
import functools
import re
import time
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Input, Static
from textual.worker import Worker

from cockpit.core.errors import CockpitError
from cockpit.core.logs.sources import LocalFileTail, LogSource, LogTail
from cockpit.core.snapshots import ActorRow, JobRow, LogIndex, NodeSnapshot, job_to_show
from cockpit.ui.feeds.driver_logs import LogPosition, LogReader, driver_logs_of
from cockpit.ui.screens.base import CockpitScreen, type_into
from cockpit.ui.screens.picker import PickScreen
from cockpit.ui.widgets.key_hints import KeyHints, key_of
from cockpit.ui.widgets.log_view import LogView
from cockpit.ui.widgets.safe_text import clean, plain

MAX_STREAMS = 4
"""Open log streams at once: each holds one of the dashboard's 100 concurrent state requests."""
START_LINES = 1000


# The pickers' items: (id, label). Ids, names, entrypoints and file names are the cluster's, so every
# label is `Text` (never markup) with its control characters replaced.


def job_items(jobs: list[JobRow]) -> list[tuple[str, Text]]:
    return [
        (j.key, Text.assemble(plain(j.key), "  ", plain(f"{j.status}  {j.entrypoint[-50:]}", "dim")))
        for j in jobs
    ]


def actor_items(actors: list[ActorRow]) -> list[tuple[str, Text]]:
    """Each actor's stdout and stderr, by class then name."""
    items = []
    for actor in sorted(actors, key=lambda a: (a.class_name, a.name)):
        name = plain(actor.name or actor.actor_id[:8])
        for suffix, stream in (("out", "stdout"), ("err", "stderr")):
            label = Text.assemble(name, "  ", plain(f"{actor.class_name} {stream}", "dim"))
            items.append((f"{actor.actor_id}:{suffix}", label))
    return items


def node_items(nodes: list[NodeSnapshot] | tuple[NodeSnapshot, ...]) -> list[tuple[str, Text]]:
    return [
        (
            n.node_id,
            Text.assemble(
                plain(f"{n.node_id[:8]}{' (head)' if n.is_head else ''}"),
                "  ",
                plain(f"{n.hostname} {n.ip}", "dim"),
            ),
        )
        for n in nodes
    ]


def file_items(index: LogIndex) -> list[tuple[str, Text]]:
    """Every file of a node's log index (directories left out), by kind."""
    return [
        (name, Text.assemble(plain(name), "  ", plain(kind, "dim")))
        for kind, names in sorted(index.files.items())
        for name in names
        if not name.endswith("/")
    ]


class LogsScreen(CockpitScreen):
    TITLE = "5 Logs"
    NEEDS = frozenset({"nodes", "jobs"})
    # In the hint line and in `?` help; the footer keeps navigation, `?` and `q` visible at 80 columns.
    BINDINGS = [
        Binding(
            "slash", "ask('search')", "Search", key_display="/", id="logs.search", show=False, priority=True
        ),
        Binding(
            "ampersand",
            "ask('filter')",
            "Filter",
            key_display="&",
            id="logs.filter",
            show=False,
            priority=True,
            tooltip="keep only the lines matching a regular expression",
        ),
        Binding("j", "pick_job", "Job", id="logs.job", show=False, tooltip="a job's driver log"),
        Binding("o", "add_actor", "+actor", id="logs.actor", show=False, tooltip="add an actor's log"),
        Binding(
            "O,shift+o",
            "add_actor(True)",
            "Actor alone",
            id="logs.actor_alone",
            show=False,
            tooltip="an actor's log alone",
        ),
        Binding(
            "b", "browse_node", "Node files", id="logs.node", show=False, tooltip="any log file of any node"
        ),
        Binding(
            "x",
            "only_driver",
            "Driver only",
            id="logs.reset",
            show=False,
            tooltip="back to the driver log alone",
        ),
        Binding(
            "u",
            "slurm_files",
            "Slurm files",
            id="logs.slurm",
            show=False,
            tooltip="a slurm: job's output and ray.sub logs, read here (before any dashboard exists)",
        ),
        Binding("s", "save", "Save", id="logs.save", show=False, tooltip="save what is shown to a file"),
        Binding("escape", "close_input", "Close the prompt", id="logs.close", show=False),
    ]
    DEFAULT_CSS = """
    LogsScreen #log-sources { height: 1; background: $boost; padding: 0 1; }
    LogsScreen #log-banner { height: 1; background: $error 30%; padding: 0 1; display: none; }
    LogsScreen #log-banner.shown { display: block; }
    LogsScreen LogView { height: 1fr; }
    LogsScreen #log-input { display: none; }
    LogsScreen #log-input.shown { display: block; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.job: JobRow | None = None
        self.sources: list[LogSource] = []
        self.tails: dict[LogSource, LogTail] = {}
        self.local_tails: dict[LogSource, LocalFileTail] = {}
        """Files of this machine (a Slurm job's output), followed without the dashboard."""
        self.streams: dict[LogSource, Worker[None]] = {}
        """The running stream of each source: never two for one source (its lines would repeat)."""
        self.readers: dict[LogSource, LogReader] = {}
        """The screen among the readers of a job's driver log (the shared feed's), while shown."""
        self.positions: dict[LogSource, LogPosition] = {}
        """Where each driver log shown ends: shown again, it goes on from there."""
        self.event = ""
        self.input_mode = "search"

    def compose_body(self) -> ComposeResult:
        yield Static("", id="log-sources", markup=False)
        yield Static("", id="log-banner")
        yield LogView(id="log-view")
        yield Input(id="log-input", compact=True)
        yield KeyHints(self, LogView, id="log-hint")

    @property
    def view(self) -> LogView:
        return self.query_one(LogView)

    # -- which sources -------------------------------------------------------------------------

    def refresh_view(self) -> None:
        requested = self.state.requested_log_job
        actor = self.state.requested_log_actor
        if actor is not None:
            self.state.requested_log_actor = None
            self._set_sources([LogSource.actor(actor, "out"), LogSource.actor(actor, "err")])
        elif requested is not None and (self.job is None or requested.key != self.job.key):
            self.state.requested_log_job = None
            self.show_job(requested)
        elif self.job is None and not self.sources:  # nothing chosen yet: the newest job
            job = self._default_job()
            if job is not None:
                self.show_job(job)
            elif self.state.slurm is not None and self.state.slurm.stdout:
                # No Ray job (yet, or the head never came up): the Slurm job's own output says why.
                self._set_sources([LogSource.local(self.state.slurm.stdout)])
        self._describe()

    def _default_job(self) -> JobRow | None:
        """The newest running job, else the newest with a driver log: the one the cockpit follows."""
        snapshot = self.state.snapshot
        return job_to_show(snapshot.jobs) if snapshot is not None else None

    def show_job(self, job: JobRow) -> None:
        """Follow `job`'s driver log alone, from its last lines."""
        self.job = job
        if not job.driver_node_id:
            self.notify(
                clean(f"{job.key} has no driver log yet ({job.status})"), severity="warning", markup=False
            )
            return
        self._set_sources([LogSource.driver(job)])

    def _set_sources(self, sources: list[LogSource]) -> None:
        self._stop_streams()
        self.tails = {s: t for s, t in self.tails.items() if s in sources}
        self.local_tails = {s: t for s, t in self.local_tails.items() if s in sources}
        self.positions = {s: p for s, p in self.positions.items() if s in sources}
        kept = {*self.tails, *self.local_tails, *self.positions}
        if [s for s in sources if s not in kept] or len(sources) < len(self.sources):
            self.view.clear()
            self.tails = {}
            self.local_tails = {}
            self.positions = {}
        self.sources = sources
        self._start_streams()
        self._describe()

    def _add_source(self, source: LogSource) -> None:
        if source in self.sources:
            return
        if len(self.sources) >= MAX_STREAMS:
            self.notify(
                f"at most {MAX_STREAMS} logs at once (each holds a dashboard stream): x resets",
                severity="warning",
            )
            return
        self.sources = [*self.sources, source]
        self._follow(source)
        self._describe()

    def _describe(self) -> None:
        without = self.state.connection.without_dashboard
        if not self.sources and without:  # logs come through the dashboard's State API
            text = f"logs unavailable: {without}"
        elif not self.sources:
            text = "no log yet: pick a job with j (no job has a driver log)"
        else:
            labels = " + ".join(s.label for s in self.sources)
            job = f"{self.job.key} · " if self.job else ""
            dropped = f" · {self.view.dropped} older lines dropped" if self.view.dropped else ""
            text = f"{job}{labels}{dropped}" + (f" · {self.event}" if self.event else "")
        self.query_one("#log-sources", Static).update(plain(text))  # ids, actor and file names, errors

    # -- streams -------------------------------------------------------------------------------

    def on_screen_resume(self) -> None:
        super().on_screen_resume()
        self._start_streams()
        self.view.focus()

    def on_screen_suspend(self) -> None:
        self._stop_streams()

    def _start_streams(self) -> None:
        if self.is_current:
            for source in self.sources:
                self._follow(source)

    def _stop_streams(self) -> None:
        for worker in self.streams.values():
            worker.cancel()
        self.streams.clear()
        for source, reader in self.readers.items():
            position = reader.position
            if position is not None:
                self.positions[source] = position
            reader.leave()
        self.readers.clear()

    def _follow(self, source: LogSource) -> None:
        job = self.job
        if job is not None and job.driver_node_id and source == LogSource.driver(job):
            self._read_driver_log(job, source)
            return
        running = self.streams.get(source)
        if running is not None and not running.is_finished:
            return
        # A callable, not a coroutine: a worker cancelled before it starts leaves nothing un-awaited.
        self.streams[source] = self.run_worker(
            functools.partial(self._stream, source),
            group="log-streams",
            exit_on_error=False,
            description=f"Following {source.label}",
        )

    async def _stream(self, source: LogSource) -> None:
        if source.path:
            local = self.local_tails.get(source)
            if local is None:
                local = self.local_tails[source] = LocalFileTail(
                    source.path, lines=START_LINES, on_event=self._on_event
                )
            async for chunk in local.chunks():
                self.view.append(source.label, chunk)
            return
        try:
            client = await self.host.dashboard()
        except CockpitError as exc:
            self._on_event(f"{source.label}: {exc}")
            return
        tail = self.tails.get(source)
        if tail is None:
            tail = self.tails[source] = LogTail(client, source, lines=START_LINES, on_event=self._on_event)
        tail.client = client  # a reconnect may have opened a new connection
        try:
            async for chunk in tail.chunks():
                self.view.append(source.label, chunk)
        except CockpitError as exc:
            self._on_event(f"{source.label}: {exc}")

    def _read_driver_log(self, job: JobRow, source: LogSource) -> None:
        """JOB's driver log from the shared feed: its last lines, or on from where it was shown."""
        reader = self.readers.get(source)
        if reader is not None and not reader.left:
            return
        if reader is not None and reader.position is not None:  # it left: what it missed is read again
            self.positions[source] = reader.position

        def took(chunk: bytes, _history: bool) -> None:
            self.view.append(source.label, chunk)

        def said(message: str, _failed: bool) -> None:
            self._on_event(message)

        self.readers[source] = driver_logs_of(self.app).join(
            job, took, lines=START_LINES, since=self.positions.get(source), said=said
        )

    def _on_event(self, message: str) -> None:
        self.event = message
        self._describe()

    @on(LogView.FirstError)
    def _first_error(self, message: LogView.FirstError) -> None:
        banner = self.query_one("#log-banner", Static)
        banner.update(
            Text.assemble(
                ("⚠ first exception", "bold"),
                f" at line {message.line.number + 1}: ",
                plain(message.line.plain[:100]),
                " · press ",
                (key_of(self.app, LogView, "logs.next_error"), "bold"),
                " to jump to it",
            )
        )
        banner.add_class("shown")

    # -- keys ----------------------------------------------------------------------------------

    def action_ask(self, mode: str) -> None:
        """`/` and `&` are priority bindings (see `ActorsScreen.action_filter`): keys typed right behind
        them go to the prompt, not to `s` (save) or `x`; typed in the prompt they are characters."""
        prompt = self.query_one("#log-input", Input)
        if prompt.has_focus:
            type_into(prompt, *(("slash", "/") if mode == "search" else ("ampersand", "&")))
            return
        self.input_mode = mode
        prompt.placeholder = (
            "search text (Enter; n / N for next / previous)"
            if mode == "search"
            else ("filter: show only lines matching this regex (empty: show all)")
        )
        prompt.value = self.view.search_term if mode == "search" else (self.view.filter_pattern or "")
        prompt.add_class("shown")
        self.set_focus(prompt)

    def action_close_input(self) -> None:
        prompt = self.query_one("#log-input", Input)
        if prompt.has_class("shown"):
            prompt.remove_class("shown")
            self.view.focus()

    @on(Input.Submitted, "#log-input")
    def _submitted(self, event: Input.Submitted) -> None:
        text = event.value
        if self.input_mode == "search":
            if text and self.view.search(text) is None:
                self.notify(f"{text!r} is not in the log", severity="warning", markup=False)
        else:
            try:
                shown = self.view.set_filter(text or None)
            except re.error as exc:
                self.notify(clean(f"not a regex: {exc}"), severity="error", markup=False)
                return
            if text:
                self.notify(f"showing {shown} matching lines (& then Enter on an empty line shows all)")
        self.action_close_input()

    def action_pick_job(self) -> None:
        snapshot = self.state.snapshot
        jobs = [j for j in (snapshot.jobs if snapshot else ()) if j.driver_node_id]
        if not jobs:
            self.notify("no job has a driver log yet", severity="warning")
            return
        items = job_items(jobs)

        def chosen(key: str | None) -> None:
            job = next((j for j in jobs if j.key == key), None)
            if job is not None:
                self.show_job(job)

        self.app.push_screen(PickScreen("Driver log of which job?", items), chosen)

    @work(exclusive=True, group="log-pickers", exit_on_error=False, description="Listing actors")
    async def action_add_actor(self, alone: bool = False) -> None:
        try:
            client = await self.host.dashboard()
            filters = [("state", "=", "ALIVE")]
            if self.job is not None and self.job.job_id:
                filters.append(("job_id", "=", self.job.job_id))
            actors = (await client.actors(filters=filters, limit=1000)).rows
        except CockpitError as exc:
            self.notify(clean(f"cannot list actors: {exc}"), severity="error", markup=False)
            return
        actors = tuple(a for a in actors if a.class_name != "JobSupervisor")
        if not actors:
            self.notify("no live actor in this job", severity="warning")
            return
        title = "Which actor's log, alone?" if alone else "Add which actor's log?"
        choice = await self.app.push_screen_wait(PickScreen(title, actor_items(list(actors))))
        if choice:
            actor_id, suffix = choice.rsplit(":", 1)
            actor = next(a for a in actors if a.actor_id == actor_id)
            if alone:
                self._set_sources([LogSource.actor(actor, suffix)])
            else:
                self._add_source(LogSource.actor(actor, suffix))

    @work(exclusive=True, group="log-pickers", exit_on_error=False, description="Listing log files")
    async def action_browse_node(self) -> None:
        try:
            client = await self.host.dashboard()
            nodes = [n for n in (await client.node_table()).rows if n.alive]
        except CockpitError as exc:
            self.notify(clean(f"cannot list nodes: {exc}"), severity="error", markup=False)
            return
        node_id = await self.app.push_screen_wait(PickScreen("Which node?", node_items(nodes)))
        if not node_id:
            return
        try:
            index = await client.log_index(node_id)
        except CockpitError as exc:
            self.notify(clean(f"cannot list the node's logs: {exc}"), severity="error", markup=False)
            return
        title = f"Which file of {node_id[:8]}?"
        filename = await self.app.push_screen_wait(PickScreen(title, file_items(index)))
        if filename:
            self._add_source(LogSource.file(node_id, filename))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "slurm_files":
            return self.state.target.kind == "slurm"
        return super().check_action(action, parameters)

    def action_slurm_files(self) -> None:
        job = self.state.slurm
        files = job.bootstrap_logs() if job is not None else []
        if not files:
            self.notify("no output file of the Slurm job is readable from here", severity="warning")
            return
        items = [(str(path), Text(clean(str(path)))) for path in files]

        def chosen(path: str | None) -> None:
            if path:
                self._set_sources([LogSource.local(path)])

        self.app.push_screen(PickScreen("Which file of the Slurm job?", items), chosen)

    def action_only_driver(self) -> None:
        if self.job is not None:
            self.show_job(self.job)

    def action_save(self) -> None:
        label = "-".join(re.sub(r"[^\w.-]+", "_", s.label) for s in self.sources) or "log"
        stem = f"cockpit-{label[:80]}-{time.strftime('%Y%m%d-%H%M%S')}"
        path = Path(f"{stem}.log")
        try:
            folder = Path.cwd()  # gone when the directory the cockpit started in was removed
            for number in range(1, 100):  # a second save within the second is a new file, not written over
                path = folder / (f"{stem}.log" if number == 1 else f"{stem}-{number}.log")
                with contextlib.suppress(FileExistsError):
                    count = self.view.save(path)
                    self.notify(clean(f"saved {count} lines to {path}"), markup=False)
                    return
        except OSError as exc:
            why = exc.strerror or str(exc)
            self.notify(clean(f"not saved: {path}: {why}"), severity="error", markup=False)
