"""Provides the cockpit's Textual app: navigation between screens and the cluster poller.

Cadence lives here, not in the core: the poller asks for nodes and jobs, and re-arms a one-shot timer
when the answer (or the failure) is handled, so two polls never overlap and a slow head slows the
poller instead of piling up requests. Only the visible screen is re-rendered.
"""

from __future__ import annotations

import asyncio
import gc
import time
from contextlib import AsyncExitStack
from dataclasses import replace
from typing import TYPE_CHECKING, ClassVar

from textual import on, work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.worker import Worker, WorkerState

from cockpit.core.connection import Connection, ConnectOptions, exposure_warning, open_connection
from cockpit.core.errors import CockpitError
from cockpit.core.gpu_board import GpuBoard, GpuFleet
from cockpit.core.join import JoinProgress
from cockpit.core.layouts import Layout, load_layout
from cockpit.core.ray_api import MAX_LIMIT, AuthenticationRejected, AuthenticationRequired, DashboardClient
from cockpit.core.snapshots import ClusterInfo, ClusterSnapshot, JobRow, NodeSnapshot
from cockpit.core.ssh.errors import SshError, UnknownHostKey
from cockpit.core.targets import Target
from cockpit.ui.high_res import HighResMode
from cockpit.ui.messages import ClusterInfoLoaded, ClusterPolled, HostKeyUnknown, PollFailed
from cockpit.ui.screens.base import CockpitScreen
from cockpit.ui.screens.cluster import ClusterScreen
from cockpit.ui.screens.gpus import GpuScreen
from cockpit.ui.screens.help import HelpScreen
from cockpit.ui.screens.jobs import JobsScreen
from cockpit.ui.screens.logs import LogsScreen
from cockpit.ui.screens.prompts import HostKeyScreen, PassphraseScreen
from cockpit.ui.screens.upcoming import ActorsScreen, DebuggerScreen
from cockpit.ui.widgets.status_bar import StatusBar

if TYPE_CHECKING:
    from textual.timer import Timer

    from cockpit.core.ssh.link import SshLink

NODE_POLL_SECONDS = 2.0
"""Node cadence while nodes are still expected to join: join progress is what the user watches."""
STEADY_POLL_SECONDS = 5.0
"""Node cadence once the cluster has its shape: the host stats behind it refresh every 5 s anyway."""
JOB_POLL_EVERY = 3
"""Jobs are fetched on every third node poll (they change rarely; the list grows with history)."""
ACTOR_POLL_EVERY = 3
"""Alive actors (who is on which GPU) on every third poll while the GPU screen is shown: the dashboard
refreshes worker stats every 15 s, and listing actors costs the head O(actors)."""
GPU_REDRAW_SECONDS = 1.0
"""High-resolution readings redraw the GPU screen at most this often."""
RETRY_SECONDS = (1.0, 2.0, 3.0, 5.0)
"""Waits between polls while the dashboard does not answer (an SSH link wakes the poller sooner)."""


GC_YOUNG_THRESHOLD = 20_000
"""Allocations between young-generation GC passes (CPython's default is 700). A 1,024-node poll makes
~50,000 objects: at 700 the collector rescans them ~70 times on their way to the old generation, and
its passes land in UI refreshes (BENCHMARKS.md, gpu_view: p95 23 ms at 700, 13 ms at 20,000)."""


_gc_tuned = False


def tune_gc() -> None:
    """Once per process, when the app is up: what is alive then (modules, the app, its first screen)
    lives as long as the process, so it is collected once and moved out of the cyclic GC's reach
    (`gc.freeze`: full passes halve), and young passes are made rarer. Snapshots are acyclic: reference
    counting frees them either way."""
    global _gc_tuned
    if _gc_tuned:
        return
    _gc_tuned = True
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, 10, 10)


class CockpitApp(App[int]):
    """The cockpit on one cluster."""

    CSS_PATH = "app.tcss"
    MODES: ClassVar[dict[str, type[CockpitScreen]]] = {  # type: ignore[assignment]
        "cluster": ClusterScreen,
        "gpus": GpuScreen,
        "actors": ActorsScreen,
        "jobs": JobsScreen,
        "logs": LogsScreen,
        "debugger": DebuggerScreen,
    }
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("1", "switch_mode('cluster')", "Cluster", id="nav.cluster"),
        Binding("2", "switch_mode('gpus')", "GPUs", id="nav.gpus"),
        Binding("3", "switch_mode('actors')", "Actors", id="nav.actors"),
        Binding("4", "switch_mode('jobs')", "Jobs", id="nav.jobs"),
        Binding("5", "switch_mode('logs')", "Logs", id="nav.logs"),
        Binding("6", "switch_mode('debugger')", "Debug", id="nav.debugger"),
        Binding("r", "refresh_now", "Refresh", id="app.refresh"),
        Binding("question_mark", "help", "Help", key_display="?", id="app.help"),
        Binding("q", "quit", "Quit", id="app.quit"),
    ]

    def __init__(
        self,
        target: Target,
        options: ConnectOptions | None = None,
        *,
        expect_nodes: int | None = None,
        expect_gpus: float | None = None,
        layout: str = "default",
        title_suffix: str = "",
    ) -> None:
        super().__init__()
        self.target = target
        self.options = options or ConnectOptions()
        self.expect_nodes = expect_nodes
        self.expect_gpus = expect_gpus
        self.layout: Layout = load_layout(layout)
        self.title_suffix = title_suffix
        self.snapshot: ClusterSnapshot | None = None
        """The latest cluster data; kept (and shown as stale) while the cluster does not answer."""
        self.info: ClusterInfo | None = None
        self.connection_state = "connecting"
        self.connection_detail = ""
        self._connection: Connection | None = None
        self.requested_log_job: JobRow | None = None
        """A job whose driver log the Logs screen should show next (set by Enter on the Jobs screen)."""
        self.exposure: str | None = None
        """A warning when the dashboard accepts anyone (no token auth and reachable beyond loopback)."""
        self._connection_stack = AsyncExitStack()
        """Owns the open connection alone, so a dead one can be closed and opened afresh (`r`)."""
        self._polls = 0
        self._poll_number = 0
        """Counts polls as they start (`_polls` counts those that finished)."""
        self._failures = 0
        self._jobs: tuple[JobRow, ...] = ()
        self._poll_timer: Timer | None = None
        """The one armed poll timer: re-arming replaces it, so polls never multiply."""
        self.gpu_board = GpuBoard()
        """Every GPU's latest reading and 10 minutes of history; fed by the poller and the GPU agents."""
        self.gpu_fleet: GpuFleet | None = None
        self.high_res = HighResMode(self)
        self._actors_loaded = False
        self._gpu_redraw: Timer | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    async def on_mount(self) -> None:
        self.title = f"ray-cockpit · {self.target.raw}"
        await self.switch_mode("cluster")
        tune_gc()
        self.poll_cluster()

    async def on_unmount(self) -> None:
        await self._connection_stack.aclose()

    def sync_status_bar(self, screen: CockpitScreen | None = None) -> None:
        screen = screen or (self.screen if isinstance(self.screen, CockpitScreen) else None)
        if screen is None:
            return
        for bar in screen.query(StatusBar):
            bar.target = self.target.raw + (f" ({self.title_suffix})" if self.title_suffix else "")
            bar.ray_version = self.info.ray_version if self.info else ""
            bar.state = self.connection_state
            bar.detail = " · ".join(t for t in (self.exposure, self.connection_detail) if t)
            bar.data_time = self.snapshot.fetched_at if self.snapshot else None
            bar.screen_title = screen.TITLE
            bar.refresh()

    # -- polling -------------------------------------------------------------------------------

    async def dashboard(self) -> DashboardClient:
        """The dashboard client (connecting on first use); for workers of screens."""
        return await self._dashboard()

    async def connection(self) -> Connection:
        """The open connection (connecting on first use): the dashboard client and the SSH link."""
        await self._dashboard()
        assert self._connection is not None
        return self._connection

    async def _dashboard(self) -> DashboardClient:
        if self._connection is None:
            options = replace(self.options, confirm_host_key=None, ask_passphrase=self._ask_passphrase)
            self._connection = await self._connection_stack.enter_async_context(
                open_connection(self.target, options)
            )
            link = self._connection.link
            if link is not None and link.expose_url:
                self.notify(
                    f"The dashboard is also at {link.expose_url} (anyone on this machine can reach it).",
                    timeout=15,
                )
            self.run_worker(self._check_exposure(self._connection), group="exposure", exit_on_error=False)
        return self._connection.client

    async def _ask_passphrase(self, prompt: str) -> str | None:
        """Runs inside the poll worker, which may wait on a dialog."""
        return await self.push_screen_wait(PassphraseScreen(prompt))

    async def _check_exposure(self, connection: Connection) -> None:
        warning = await exposure_warning(connection)
        if warning:
            self.exposure = warning
            self.sync_status_bar()

    @work(exclusive=True, group="cluster-poll", exit_on_error=False, description="Polling nodes and jobs")
    async def poll_cluster(self) -> None:
        self._poll_number += 1
        poll = self._poll_number
        try:
            client = await self._dashboard()
            if self.info is None:
                self.post_message(ClusterInfoLoaded(await client.cluster_info()))
            fetch_jobs = self._polls % JOB_POLL_EVERY == 0 or isinstance(self.screen, JobsScreen)
            if fetch_jobs:
                nodes, jobs = await asyncio.gather(client.nodes(fresh=self._polls == 0), client.jobs())
                self._jobs = jobs
            else:
                nodes = await client.nodes()
            fleet = await self._update_gpus(client, nodes, poll)
            self._polls += 1
            self.post_message(
                ClusterPolled(ClusterSnapshot(nodes=nodes, jobs=self._jobs, fetched_at=time.time()), fleet)
            )
        except UnknownHostKey as unknown:
            self.post_message(HostKeyUnknown(unknown))
        except (AuthenticationRequired, AuthenticationRejected) as exc:
            self.post_message(PollFailed(str(exc), permanent=True))
        except SshError as exc:
            self.post_message(PollFailed(str(exc), permanent=exc.permanent))
        except CockpitError as exc:
            self.post_message(PollFailed(str(exc)))

    async def _update_gpus(
        self, client: DashboardClient, nodes: tuple[NodeSnapshot, ...], poll: int
    ) -> GpuFleet:
        """Feed the GPU board; its work (O(GPUs)) runs on a thread so a 1,024-node poll leaves the UI free.
        `poll` numbers the polls: one cancelled by `r` whose thread finishes late is ignored."""
        board = self.gpu_board
        running = any(job.status == "RUNNING" for job in self._jobs)
        await asyncio.to_thread(board.ingest_nodes, nodes, running, time.time(), poll)
        gpu_screen = isinstance(self.screen, GpuScreen)
        if gpu_screen and (not self._actors_loaded or self._polls % ACTOR_POLL_EVERY == 0):
            try:
                actors = await client.actors(filters=[("state", "=", "ALIVE")], limit=MAX_LIMIT)
            except CockpitError:
                pass  # the GPU rows show pids instead of actor names until the next try
            else:
                await asyncio.to_thread(board.ingest_actors, actors.rows)
                self._actors_loaded = True
        return await asyncio.to_thread(board.fleet)

    def gpu_changed(self, coalesce: bool = False) -> None:
        """The board changed outside a poll (GPU agents): redraw the GPU screen, at most once a second."""
        if coalesce:
            if self._gpu_redraw is None:
                self._gpu_redraw = self.set_timer(GPU_REDRAW_SECONDS, self._redraw_gpus, name="gpu-redraw")
            return
        self._redraw_gpus()

    def _redraw_gpus(self) -> None:
        """Agent readings between polls: rebuilt only while the GPU screen is shown (it rebuilds when
        shown again); the history records them either way."""
        self._gpu_redraw = None
        if self.snapshot is not None and isinstance(self.screen, GpuScreen):
            self._rebuild_gpus()

    @work(exclusive=True, group="gpu-redraw", exit_on_error=False, description="Updating the GPU view")
    async def _rebuild_gpus(self) -> None:
        self._show_gpu_fleet(await asyncio.to_thread(self.gpu_board.fleet))

    def _show_gpu_fleet(self, fleet: GpuFleet | None) -> None:
        """Show `fleet` unless a newer one is already shown (fleets are built on threads: order varies)."""
        if fleet is None or (self.gpu_fleet is not None and fleet.generation < self.gpu_fleet.generation):
            return
        self.gpu_fleet = fleet
        if isinstance(self.screen, GpuScreen):
            self.screen.refresh_view()

    def gpu_notice_changed(self) -> None:
        if isinstance(self.screen, GpuScreen):
            self.screen.show_notice()

    def toggle_high_res(self, preferred: set[str] | frozenset[str] = frozenset()) -> None:
        self.high_res.toggle(preferred)

    def high_res_notice(self) -> tuple[str, bool]:
        return self.high_res.notice, self.high_res.error

    @on(HostKeyUnknown)
    def _host_key_unknown(self, message: HostKeyUnknown) -> None:
        def answered(trust: bool | None) -> None:
            if trust:
                from cockpit.core.ssh.host_keys import record_host_key  # asyncssh: loaded by the link already

                record_host_key(message.unknown)
                self.connection_detail = "host key trusted; connecting"
                self._poll_now()
            else:
                self.post_message(PollFailed(str(message.unknown), permanent=True))

        self.connection_state = "unreachable"
        self.connection_detail = "unknown host key: waiting for your answer"
        self._refresh_visible()
        self.push_screen(HostKeyScreen(message.unknown), answered)

    @work(exclusive=True, group="link-wait", exit_on_error=False, description="Waiting for the SSH link")
    async def _poll_when_link_is_back(self, link: SshLink, timeout: float) -> None:
        """Poll as soon as the SSH link is back instead of waiting out the retry delay."""
        await link.wait_connected(timeout)
        self._poll_now()

    def _schedule_poll(self, delay: float) -> None:
        if self._poll_timer is not None:
            self._poll_timer.stop()
        self._poll_timer = self.set_timer(delay, self.poll_cluster, name="cluster-poll")

    def _poll_now(self) -> None:
        if self._poll_timer is not None:
            self._poll_timer.stop()
            self._poll_timer = None
        self.poll_cluster()

    @work(exclusive=True, group="reconnect", exit_on_error=False, description="Closing a dead connection")
    async def _drop_connection(self) -> None:
        """Close a connection that cannot recover (auth refused, host key changed); `r` opens a new one
        and reads the token file again."""
        connection, self._connection = self._connection, None
        if connection is not None:
            await self._connection_stack.aclose()
            self._connection_stack = AsyncExitStack()

    @on(ClusterInfoLoaded)
    def _info_loaded(self, message: ClusterInfoLoaded) -> None:
        self.info = message.info
        self.sync_status_bar()

    @on(ClusterPolled)
    def _cluster_polled(self, message: ClusterPolled) -> None:
        self.snapshot = message.snapshot
        if message.gpus is not None and (
            self.gpu_fleet is None or message.gpus.generation >= self.gpu_fleet.generation
        ):
            self.gpu_fleet = message.gpus
        self.connection_state = "connected"
        self.connection_detail = ""
        self._failures = 0
        self._refresh_visible()
        joining = not JoinProgress.of(message.snapshot.nodes, self.expect_nodes, self.expect_gpus).ready
        self._schedule_poll(NODE_POLL_SECONDS if joining else STEADY_POLL_SECONDS)

    @on(PollFailed)
    def _poll_failed(self, message: PollFailed) -> None:
        self.connection_state = "unreachable"
        link = self._connection.link if self._connection is not None else None
        if link is not None and link.status.state == "failed":
            message = PollFailed(link.status.describe(), permanent=True)
        if message.permanent:
            self.connection_detail = f"{message.reason} (not retrying; fix it and press r)"
            if self._poll_timer is not None:
                self._poll_timer.stop()
            self._drop_connection()
        else:
            delay = RETRY_SECONDS[min(self._failures, len(RETRY_SECONDS) - 1)]
            self._failures += 1
            if link is not None and link.status.state == "reconnecting":
                self.connection_state = "reconnecting"
                self.connection_detail = link.status.describe()
                self._poll_when_link_is_back(link, delay)
            else:
                self.connection_detail = f"{message.reason} · retry {self._failures} in {delay:.0f} s"
                self._schedule_poll(delay)
        self._refresh_visible()

    @on(Worker.StateChanged)
    def _worker_failed(self, event: Worker.StateChanged) -> None:
        """Bugs in a worker are reported once here and the poller goes on, instead of killing the app."""
        if event.state == WorkerState.ERROR:
            error = event.worker.error
            self.notify(
                f"{event.worker.description or event.worker.name} failed: {error!r}", severity="error"
            )
            if event.worker.group == "cluster-poll":
                self.connection_state = "unreachable"
                self.connection_detail = f"internal error: {error!r}; retrying"
                self._refresh_visible()
                self._schedule_poll(RETRY_SECONDS[-1])

    def _refresh_visible(self) -> None:
        screen = self.screen
        if isinstance(screen, CockpitScreen):
            self.sync_status_bar(screen)
            screen.refresh_view()

    # -- actions -------------------------------------------------------------------------------

    async def show_job_logs(self, job: JobRow) -> None:
        """Open the Logs screen on `job`'s driver log."""
        self.requested_log_job = job
        await self.switch_mode("logs")
        if isinstance(self.screen, LogsScreen):
            self.screen.refresh_view()

    def action_refresh_now(self) -> None:
        self._failures = 0
        self._poll_now()

    def action_help(self) -> None:
        app_keys = [(b.key_display or b.key, b.description) for b in self._bindings_of(self)]
        sections = [("Everywhere", app_keys)]
        screen = self.screen
        screen_keys = [(b.key_display or b.key, b.description) for b in self._bindings_of(screen)]
        if screen_keys:
            sections.append((getattr(screen, "TITLE", "This screen"), screen_keys))
        focused = self.focused
        pane_bindings = self._bindings_of(focused)
        pane_keys = [(b.key_display or b.key.split(",")[0], b.description) for b in pane_bindings]
        if focused is not None and pane_keys and focused is not screen:
            sections.append((f"This pane ({type(focused).__name__})", pane_keys))
        sections.append(("Tables", [("↑ ↓ PgUp PgDn", "move the cursor"), ("Home End", "first / last row")]))
        self.push_screen(HelpScreen(sections))

    @staticmethod
    def _bindings_of(node: object) -> list[Binding]:
        bindings = getattr(node, "BINDINGS", [])
        return [b for b in bindings if isinstance(b, Binding) and b.description]
