"""Provides the cockpit's Textual app: navigation and wiring, nothing else.

The app holds the state (`cockpit.ui.state`) and the feeds that fill it (`cockpit.ui.feeds`), routes
each `StateChanged` to the screen on view, tells the feeds what the shown screen needs, and answers
the few requests screens make (refresh, open a job's log, high-resolution mode). Screens come from
`cockpit.ui.navigation`; none of them imports this module.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any, ClassVar

from textual import constants, on
from textual.app import App, ScreenStackError
from textual.binding import Binding, BindingType
from textual.css.errors import StylesheetError
from textual.css.stylesheet import Stylesheet
from textual.driver import Driver
from textual.worker import Worker, WorkerState

from cockpit.core import heap
from cockpit.core.actors.roles import load_role_rules
from cockpit.core.cluster.dashboard import DashboardClient
from cockpit.core.config.settings import Config, load
from cockpit.core.connect.connection import Connection, ConnectOptions
from cockpit.core.debug.session import settle
from cockpit.core.errors import CockpitError
from cockpit.core.targets import Target
from cockpit.ui.commands import CockpitCommands
from cockpit.ui.feeds.actors import ActorsFeed
from cockpit.ui.feeds.alerts import AlertFeed
from cockpit.ui.feeds.cluster import ClusterFeed
from cockpit.ui.feeds.driver_logs import DriverLogs
from cockpit.ui.feeds.gpus import GpuFeed
from cockpit.ui.feeds.hang import HangFeed
from cockpit.ui.feeds.high_res import HighResFeed
from cockpit.ui.feeds.metrics import MetricsFeed
from cockpit.ui.feeds.paused import PausedFeed
from cockpit.ui.feeds.stacks import StacksFeed
from cockpit.ui.keymap import check_keys, usable_keys
from cockpit.ui.layouts import Layout, load_layout_or_default
from cockpit.ui.messages import (
    ActorQueryChanged,
    HighResToggled,
    HostKeyUnknown,
    RefreshRequested,
    ScreenShown,
    ShowActorLog,
    ShowGpusOf,
    ShowJobLog,
    ShowNode,
)
from cockpit.ui.navigation import FIRST, MAIN_SCREENS
from cockpit.ui.screens.base import CockpitScreen
from cockpit.ui.screens.help import HelpScreen
from cockpit.ui.screens.prompts import HostKeyScreen, PassphraseScreen
from cockpit.ui.state import CockpitState, StateChanged
from cockpit.ui.widgets.key_hints import key_label
from cockpit.ui.widgets.safe_text import clean

GC_YOUNG_THRESHOLD = 20_000
"""Allocations between young-generation GC passes (CPython's default is 700). A 1,024-node poll makes
~50,000 objects: at 700 the collector rescans them ~70 times on their way to the old generation, and
its passes land in UI refreshes (BENCHMARKS.md, gpu_view: p95 23 ms at 700, 13 ms at 20,000)."""


_gc_tuned = False


JOB_CONTROL = (signal.SIGTSTP, signal.SIGCONT)

EXIT_GRACE_SECONDS = 20.0
"""How long a closed terminal or a kill gives the app to end the way `q` does (feeds stopped, a held
debugger session left paused: 5 s, attaches settled: 5 s, the SSH link closed) before the process is
ended regardless, with its tunnel socket removed first."""


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
    gc.enable()  # `cockpit connect` starts with it off (`cli.tui.gc_paused`)


PRELOAD_AFTER_S = 2.0
"""Seconds after start when the screens not shown yet begin to be imported, one per PRELOAD_STEP_S."""
PRELOAD_STEP_S = 0.05


class CockpitApp(App[int]):
    """The cockpit on one cluster. With `offline`, no feed runs: the screens show the `state` given
    (tests and snapshots feed it fixture data with no cluster)."""

    CSS_PATH = "app.tcss"
    COMMANDS = App.COMMANDS | {CockpitCommands}
    """ctrl+p: Textual's own commands (theme, keys, quit) and every action of every screen by name."""
    MODES: ClassVar[dict[str, Callable[[], CockpitScreen]]] = {  # type: ignore[assignment]
        entry.mode: entry.new
        for entry in MAIN_SCREENS  # each screen's module imported when first shown
    }
    BINDINGS: ClassVar[list[BindingType]] = [
        *(
            Binding(
                entry.key,
                f"switch_mode('{entry.mode}')",
                entry.label,
                id=f"nav.{entry.mode}",
                show=entry.footer,
            )
            for entry in MAIN_SCREENS
        ),
        Binding("S", "stacks", "Stacks", id="app.stacks", show=False),
        # Not in the footer (at 80 columns it holds the eight screens, ? and q); `?` lists it.
        Binding("r", "refresh_now", "Refresh", id="app.refresh", show=False),
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
        layout: str | None = None,
        title_suffix: str = "",
        state: CockpitState | None = None,
        offline: bool = False,
        config: Config | None = None,
        before_forced_exit: Callable[[], object] | None = None,
    ) -> None:
        """BEFORE_FORCED_EXIT: what to stop before the process is ended because its exit on a closed
        terminal or a kill did not finish in time (`cockpit demo`: the cluster it started)."""
        super().__init__()
        config = config or load()  # the command line passes the one it loaded
        self.config = config
        layout_chosen = layout is not None or config.origins["layout"] != "default"
        self.first_mode = "cockpit" if layout_chosen else FIRST
        """The screen to open on: the cockpit screen when a layout was chosen."""
        chosen, layout_problem = load_layout_or_default(layout or config.layout)
        chosen, css_problem = self._layout_css(chosen)
        self.user_keys = usable_keys(config)
        """The user's key map (`keys:` in config), by binding id; `?` and the hint lines read it."""
        self._config_problems = [*config.problems, *check_keys(config)]
        self._config_problems += [p for p in (layout_problem, css_problem) if p]
        self.state = state or CockpitState(
            target=target,
            title_suffix=title_suffix,
            expect_nodes=expect_nodes,
            expect_gpus=expect_gpus,
        )
        self.state.layout = chosen
        self.state.config = config
        self.offline = offline
        # The TUI asks its own questions in dialogs; host keys through `HostKeyUnknown`.
        options = replace(
            options or ConnectOptions(), confirm_host_key=None, ask_passphrase=self._ask_passphrase
        )
        self.gpu_feed = GpuFeed(self, self.state)
        self.cluster_feed = ClusterFeed(self, self.state, options, self.gpu_feed)
        self.high_res = HighResFeed(self, self.state, self.gpu_feed, self.cluster_feed.connection)
        rules, self._roles_problem = load_role_rules(configured=config.roles)
        self.state.gpu_board.rules = rules
        self.actors_feed = ActorsFeed(self, self.state, self.cluster_feed.dashboard, rules)
        self.paused_feed = PausedFeed(self, self.state, self.cluster_feed.connection)
        self.stacks_feed = StacksFeed(self, self.state, self.cluster_feed.connection)
        self.driver_logs = DriverLogs(self, self.cluster_feed.dashboard)
        """Each job's driver log, one stream whoever reads it (the hang watch, the curves, the panes)."""
        self.hang_feed = HangFeed(self, self.state, self.cluster_feed.connection, self.driver_logs)
        self.metrics_feed = MetricsFeed(self, self.state, self.cluster_feed.connection, self.driver_logs)
        self.alert_feed = AlertFeed(self, self.state)
        """The alert rules on what the feeds polled: desktop notifications and `alerts.command`."""
        self._signals: dict[int, Any] = {}
        """Handlers replaced while the app runs (SIGHUP, SIGTERM), put back when it ends."""
        self._job_control = {sig: signal.getsignal(sig) for sig in JOB_CONTROL}
        """Textual's driver takes SIGTSTP and SIGCONT (Ctrl+Z) and never gives them back; see
        `_release_job_control`."""
        self._before_forced_exit = before_forced_exit
        self._exit_deadline: threading.Timer | None = None
        """Armed by a closed terminal or a kill; ends the process if the app has not ended by then."""
        self._exit_lock = threading.Lock()
        self._run_over = False
        """`run` has returned: whatever comes next is the caller's, and no deadline ends the process."""

    def get_driver_class(self) -> type[Driver]:
        """Textual's Linux driver made safe for a terminal closed under the app (`terminal_driver`);
        any other driver (Windows, `TEXTUAL_DRIVER`) as Textual picks it."""
        chosen = super().get_driver_class()
        if constants.DRIVER is None and chosen.__name__ == "LinuxDriver":
            from cockpit.ui.terminal_driver import TerminalDriver

            return TerminalDriver
        return chosen

    def _layout_css(self, layout: Layout) -> tuple[Layout, str | None]:
        """LAYOUT with its `.tcss` added to the app's styles; a `.tcss` Textual cannot read is one line
        and the layout is used without it."""
        if layout.css_path is None:
            return layout, None
        check = Stylesheet()
        try:
            check.add_source(layout.css, read_from=(str(layout.css_path), ""))
            check.parse()
        except StylesheetError as exc:
            first = " ".join(str(exc).split())[:200]
            return replace(
                layout, css="", css_path=None
            ), f"{layout.css_path}: not valid TCSS ({first}); ignored"
        self.css_path = [*self.css_path, layout.css_path]
        return layout, None

    # -- what screens may ask (CockpitHost) ----------------------------------------------------

    async def dashboard(self) -> DashboardClient:
        """The dashboard client (connecting on first use); for workers of screens."""
        return await self.cluster_feed.dashboard()

    async def connection(self) -> Connection:
        return await self.cluster_feed.connection()

    # -- lifecycle -----------------------------------------------------------------------------

    async def on_mount(self) -> None:
        self.title = f"ray-cockpit · {self.state.target.raw}"
        self.theme = self.config.theme
        self.set_keymap(self.user_keys)
        self._catch_signals()
        await self.switch_mode(self.first_mode)
        for problem in self._config_problems:  # file, line and key: as text
            self.notify(clean(problem), severity="warning", timeout=15, markup=False)
        if self._roles_problem:  # the file's path and line, and what is wrong: as text
            self.notify(clean(self._roles_problem), severity="warning", timeout=15, markup=False)
        # The other screens' modules once the first screen is up (a first switch to one then draws at
        # once), then the GC tuned: neither delays the first screen.
        self.set_timer(PRELOAD_AFTER_S, self._preload_screens)
        # Free heap left by a burst (a fast log, a big answer) goes back to the system (`core.heap`).
        self.set_interval(heap.GIVE_BACK_EVERY_S, heap.give_back, name="heap")
        if not self.offline:
            self.cluster_feed.start()
            self.paused_feed.start()
            self.hang_feed.start()

    def _preload_screens(self) -> None:
        """Import the next screen module not imported yet (tens of ms), then let the loop run; once all
        are, tune the GC."""
        pending = next((entry for entry in MAIN_SCREENS if not entry.loaded), None)
        if pending is None:
            tune_gc()
            return
        pending.screen  # noqa: B018 - imported for later
        self.set_timer(PRELOAD_STEP_S, self._preload_screens)

    async def on_unmount(self) -> None:
        self._release_signals()
        self.high_res.stop()
        self.paused_feed.stop()
        self.stacks_feed.cancel()
        self.hang_feed.stop()
        self.metrics_feed.stop()
        self.driver_logs.stop()
        await self.alert_feed.stop()
        await self._leave_held_session()
        for _label, _port, close in self.state.paused.forwards:
            close()
        # Attaches cut short by the exit (a peek, an attach under way) run on, shielded, until their
        # worker is armed to pause again; the connection they use is closed only after them.
        await settle(5)
        await self.cluster_feed.close()

    async def _leave_held_session(self) -> None:
        """A worker attached to when the app ends is left paused (for the next client), not released."""
        session, self.state.paused.session = self.state.paused.session, None
        if session is None or not session.open:
            return
        try:
            await asyncio.wait_for(session.leave_paused(), 5)
        except (CockpitError, asyncio.TimeoutError):
            await session.close()

    def _catch_signals(self) -> None:
        """A closed terminal (SIGHUP) or a kill (SIGTERM) ends the app the way `q` does, so it unmounts:
        the feeds stop, the agents end, the connection and its tunnel socket are closed, and whoever ran
        the app (`cockpit demo`) gets to stop what it started."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGHUP, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not the main thread
                previous = signal.getsignal(sig)
                loop.add_signal_handler(sig, self._end_on_signal, sig)
                self._signals[sig] = previous

    def _end_on_signal(self, sig: int) -> None:
        """End as `q` does, within `EXIT_GRACE_SECONDS`: nobody is left to press a key when a close
        never returns, and a user's login node must not keep the process."""
        self._arm_exit_deadline(128 + sig)
        self.exit(None, 128 + sig)

    def _arm_exit_deadline(self, code: int) -> None:
        with self._exit_lock:
            if self._exit_deadline is not None or self._run_over:
                return
            deadline = threading.Timer(EXIT_GRACE_SECONDS, self._force_exit, (code,))
            deadline.name = "cockpit-exit-deadline"
            deadline.daemon = True
            self._exit_deadline = deadline
            deadline.start()

    def _force_exit(self, code: int) -> None:
        """The exit did not end in time: remove the tunnel socket, stop what the caller asked to be
        stopped, and end the process (its connections, agents' channels and port forwards end with it).
        Runs in the deadline's thread while the main one is stuck."""
        with self._exit_lock:
            if self._run_over:
                return
            try:
                self.cluster_feed.abandon()
                if self._before_forced_exit is not None:
                    self._before_forced_exit()
            finally:
                os._exit(code)

    def _disarm_exit_deadline(self) -> None:
        """`run` returned in time (or while the deadline's thread ends the process: then this waits)."""
        with self._exit_lock:
            self._run_over = True
            if self._exit_deadline is not None:
                self._exit_deadline.cancel()

    def _release_signals(self) -> None:
        loop = asyncio.get_running_loop()
        for sig, previous in self._signals.items():
            loop.remove_signal_handler(sig)
            signal.signal(sig, previous)
        self._signals = {}
        self._release_job_control()

    def _release_job_control(self) -> None:
        """Put back the SIGTSTP and SIGCONT handlers Textual's driver replaced. A terminal hangup sends
        SIGHUP and SIGCONT together; left in place, the driver's SIGCONT handler tries to re-enter
        application mode with no event loop and raises in whatever runs then, which after the app is
        `cockpit demo` stopping its cluster: the teardown was cut short and ~1.5 GB of Ray kept running."""
        for sig, previous in self._job_control.items():
            with contextlib.suppress(ValueError, TypeError):  # not the main thread; a handler set from C
                signal.signal(sig, previous)

    def run(self, *args: Any, **kwargs: Any) -> Any:
        follow_the_terminal_size()
        try:
            return super().run(*args, **kwargs)
        finally:
            self._disarm_exit_deadline()
            self._release_job_control()  # also when the app ended without unmounting

    async def _ask_passphrase(self, prompt: str) -> str | None:
        """Runs inside the poll worker, which may wait on a dialog."""
        return await self.push_screen_wait(PassphraseScreen(prompt))

    # -- routing -------------------------------------------------------------------------------

    @on(StateChanged)
    def _state_changed(self, message: StateChanged) -> None:
        try:
            screen = self.screen
        except ScreenStackError:  # a feed's last word while the app shuts down: no screen left to tell
            return
        if isinstance(screen, CockpitScreen):
            screen.state_changed(message.topics)
        if "snapshot" in message.topics and not self.offline:
            self.actors_feed.watch()
            self.metrics_feed.watch()
            self.alert_feed.after_poll()

    @on(ScreenShown)
    def _screen_shown(self, message: ScreenShown) -> None:
        before = self.state.shown_needs
        self.state.shown_needs = message.needs
        if self.offline:
            return
        self.gpu_feed.shown()
        self.cluster_feed.needs_changed(before)
        self.actors_feed.shown()
        self.paused_feed.shown()

    @on(RefreshRequested)
    def _refresh_requested(self) -> None:
        self.action_refresh_now()

    @on(ShowJobLog)
    async def _show_job_log(self, message: ShowJobLog) -> None:
        self.state.requested_log_job = message.job
        await self._show_mode("logs")

    @on(ShowActorLog)
    async def _show_actor_log(self, message: ShowActorLog) -> None:
        self.state.requested_log_actor = message.actor
        await self._show_mode("logs")

    @on(ShowGpusOf)
    async def _show_gpus_of(self, message: ShowGpusOf) -> None:
        self.state.requested_gpu_filter = message.node_id[:12]
        await self._show_mode("gpus")

    @on(ShowNode)
    async def _show_node(self, message: ShowNode) -> None:
        self.state.requested_node = message.node_id
        await self._show_mode("cluster")

    async def _show_mode(self, mode: str) -> None:
        """Switch to MODE; its screen reads what it was asked to show from the state."""
        await self.switch_mode(mode)
        screen = self.screen
        if isinstance(screen, CockpitScreen):
            screen.refresh_view()

    @on(ActorQueryChanged)
    def _actor_query_changed(self) -> None:
        if not self.offline:
            self.actors_feed.query_changed()

    @on(HighResToggled)
    def _high_res_toggled(self, message: HighResToggled) -> None:
        self.high_res.toggle(message.preferred)

    @on(HostKeyUnknown)
    def _host_key_unknown(self, message: HostKeyUnknown) -> None:
        def answered(trust: bool | None) -> None:
            self.cluster_feed.host_key_answered(message.unknown, bool(trust))

        self.push_screen(HostKeyScreen(message.unknown), answered)

    @on(Worker.StateChanged)
    def _worker_failed(self, event: Worker.StateChanged) -> None:
        """Bugs in a worker are reported once here and the feeds go on, instead of killing the app."""
        if event.state == WorkerState.ERROR:
            error = event.worker.error
            message = clean(f"{event.worker.description or event.worker.name} failed: {error!r}")
            self.notify(message, severity="error", markup=False)  # the error may quote cluster text
            if event.worker.group == "cluster-poll" and error is not None:
                self.cluster_feed.crashed(error)

    # -- actions -------------------------------------------------------------------------------

    def take_stacks(self, job: str = "", native: bool = False) -> bool:
        """The stacks of JOB ("" for the whole cluster) for the Doctor screen; False: one is under way."""
        if self.offline:
            return False
        return self.stacks_feed.take(job, native)

    async def action_stacks(self) -> None:
        """`S` from anywhere: the Doctor screen, and the stacks of the hung job (else the newest running)."""
        await self.switch_mode("doctor")
        screen = self.screen
        take = getattr(screen, "action_take", None)
        if take is not None:
            take()

    def action_refresh_now(self) -> None:
        if not self.offline:
            self.cluster_feed.refresh_now()
            self.actors_feed.shown()
            self.paused_feed.check_now()

    def action_help(self) -> None:
        def keys(node: object) -> list[tuple[str, str]]:
            bindings = [b for b in getattr(node, "BINDINGS", []) if isinstance(b, Binding) and b.description]
            return [(key_label(self, b), b.tooltip or b.description) for b in bindings]

        palette = ("ctrl+p", "every action of every screen by name (and theme, keys), searchable")
        sections = [("Everywhere", [*keys(self), palette])]
        screen = self.screen
        if keys(screen):
            sections.append((getattr(screen, "TITLE", "This screen"), keys(screen)))
        focused = self.focused
        if focused is not None and focused is not screen and keys(focused):
            sections.append((f"This pane ({type(focused).__name__})", keys(focused)))
        sections.append(("Tables", [("↑ ↓ PgUp PgDn", "move the cursor"), ("Home End", "first / last row")]))
        self.push_screen(HelpScreen(sections))


def follow_the_terminal_size() -> None:
    """Before the app runs: drop COLUMNS and LINES from the environment when stdout is a terminal.

    Textual (through `shutil.get_terminal_size`) takes them over the terminal's real size, on every
    resize: a shell or a library that exported them (GNU readline does, bash's `checkwinsize` keeps them
    up to date once they are) would freeze the screen at the size they say. What the app starts (Ray, a
    debugger) has no use for them either."""
    if not sys.stdout.isatty():
        return
    for name in ("COLUMNS", "LINES"):
        os.environ.pop(name, None)
        with contextlib.suppress(OSError):  # also where only C's environment has it (readline's)
            os.unsetenv(name)
