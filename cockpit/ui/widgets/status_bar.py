"""Provides the header line: target, Ray version, connection state and the age of the data."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rich.text import Text
from textual.reactive import var
from textual.widgets import Static

from cockpit.core.slurm.queue import WALLTIME_WARN_SECONDS
from cockpit.core.units import duration, human_bytes
from cockpit.ui.widgets.keyed_table import same_cell
from cockpit.ui.widgets.safe_text import clean

if TYPE_CHECKING:
    from cockpit.ui.state import CockpitState


AGE_STEP_S = 5
"""While connected, the data's age is shown in steps of this many seconds (the nodes' poll cadence):
a finer age would change the line, and so repaint the whole screen, every second while a followed job's
metrics keep asking for the bar. Data that is old (not connected) is shown to the second."""
STUCK_WARN_SECONDS = 60.0
"""Stuck this long, something not running is worth a warning on every screen."""


def stuck_warning(state: CockpitState, now: float | None = None) -> str:
    """ "⚠ 2 not running for 3m12s (3: why)" once the longest-stuck item passed a minute; else ""."""
    stuck = state.stuck
    if stuck.report is None or not stuck.report.items:
        return ""
    oldest = stuck.oldest(time.time() if now is None else now)
    if oldest < STUCK_WARN_SECONDS:
        return ""
    never = " (cannot be placed)" if any(item.infeasible for item in stuck.report.items) else ""
    return f"⚠ {len(stuck.report.items)} not running for {duration(oldest)}{never} (3: why)"


def paused_warning(state: CockpitState) -> str:
    """ "⏸ 2 paused (6)" while workers wait in the post-mortem debugger; else ""."""
    count = max(state.paused.total, len(state.paused.workers))
    return f"⏸ {count} paused in debugger (6)" if count else ""


def hang_warning(state: CockpitState) -> str:
    """ "⚠ no progress for 12 min · 8 GPUs at 0 % (idle) · JOB (S: stacks)" while a job seems hung (the
    most telling first: at 80 columns the tail is cut)."""
    hung = state.doctor.hung()
    if not hung:
        return ""
    more = f" +{len(hung) - 1} more" if len(hung) > 1 else ""
    return f"⚠ {hung[0].line} · {hung[0].job.key}{more} (S: stacks)"


def metrics_warning(state: CockpitState) -> str:
    """ "✖ critic/score/mean went nan at step 812 (7)" while a followed key is NaN or infinite."""
    alarms = state.metrics.alarms
    if not alarms:
        return ""
    more = f" +{len(alarms) - 1} more" if len(alarms) > 1 else ""
    return f"✖ {alarms[0].line}{more} (7)"


def memory_warning(state: CockpitState) -> str:
    """The node nearest to an out-of-memory kill by Ray's monitor, with its biggest process when read."""
    flagged = state.memory.flagged()
    if not flagged:
        return ""
    node = flagged[0]
    text = node.warning()
    biggest = state.memory_biggest.get(node.node_id)
    if biggest:
        top = biggest[0]
        who = f"{top.class_name} {top.actor_name}".strip() or top.name
        role = f", {top.role}" if top.role else ""
        text += f"; biggest: {who} (pid {top.pid}{role}) {human_bytes(top.rss_bytes)}"
    more = len(flagged) - 1
    return text + (f" (+{more} more node{'s' if more > 1 else ''})" if more else "")


def slurm_segment(state: CockpitState, now: float | None = None) -> tuple[str, bool]:
    """ "slurm 123 · 2h10m left" for a `slurm:` target's running job, and whether it is the last ten
    minutes (a warning); ("", False) otherwise (its queue state is the connection's detail)."""
    job = state.slurm
    if job is None or not job.running:
        return "", False
    left = job.seconds_left(time.time() if now is None else now)
    if left is None:
        return f"slurm {job.job_id} · no time limit", False
    return f"⏱ {duration(left)} left (slurm {job.job_id})", left <= WALLTIME_WARN_SECONDS


class StatusBar(Static):
    """One line at the top of every screen. Re-rendered when the app's connection facts change."""

    DEFAULT_CSS = """
    StatusBar { height: 1; background: $panel; color: $text; padding: 0 1; }
    """

    target: var[str] = var("")
    screen_title: var[str] = var("")
    ray_version: var[str] = var("")
    state: var[str] = var("connecting")
    """connecting | connected | reconnecting | unreachable | queued | ended"""
    detail: var[str] = var("")
    data_time: var[float | None] = var(None)
    stuck: var[str] = var("")
    paused: var[str] = var("")
    """Workers waiting in the post-mortem debugger."""
    nan: var[str] = var("")
    """A metric of the followed job that went NaN or infinite."""
    walltime: var[str] = var("")
    """A `slurm:` target's job: the time left before its limit."""
    walltime_low = False
    memory: var[str] = var("")
    """A node near Ray's out-of-memory kill threshold, or rising toward it."""
    hang: var[str] = var("")
    """A running job that made no progress for its `hang_after`."""
    """A warning while something of a job has not started for more than a minute."""
    _drawn: Text | None = None
    """The line `show` last had drawn."""

    def show(self, state: CockpitState, screen_title: str) -> None:
        """Take the facts from the cockpit's state."""
        connection = state.connection
        # The Ray version and the detail (error text) come from the cluster; the target from a profile.
        self.target = clean(state.target_label)
        self.ray_version = clean(state.info.ray_version) if state.info else ""
        self.state = connection.phase
        said = (connection.exposure, connection.without_dashboard, connection.detail)
        self.detail = clean(" · ".join(t for t in said if t))
        self.data_time = state.snapshot.fetched_at if state.snapshot else None
        self.screen_title = screen_title
        self.stuck = stuck_warning(state)
        self.paused = paused_warning(state)
        self.hang = clean(hang_warning(state))
        self.nan = clean(metrics_warning(state))
        self.memory = clean(memory_warning(state))
        self.walltime, self.walltime_low = slurm_segment(state)
        # Asked on every change of the state (a followed job's metrics: twice a second), and the data's
        # age moves with the clock: repainted when the line it draws changed, not on every call.
        line = self.render()
        if self._drawn is None or not same_cell(self._drawn, line):
            self._drawn = line
            self.refresh()

    def render(self) -> Text:
        # Most important first: at 80 columns the tail is cut.
        text = Text(no_wrap=True, overflow="ellipsis")
        if self.screen_title:
            text.append(f"{self.screen_title} · ", style="bold")
        text.append(self.target, style="bold")
        text.append(" · ")
        if self.state == "connected":
            text.append("● connected", style="bold green")
        elif self.state == "connecting":
            text.append("◌ connecting…", style="bold yellow")
        elif self.state == "reconnecting":
            text.append("↻ reconnecting", style="bold yellow")
        elif self.state == "queued":
            text.append("⧗ queued in Slurm", style="bold yellow")
        elif self.state == "ended":
            text.append("■ Slurm job ended", style="bold red")
        else:
            text.append("✖ unreachable", style="bold red")
        if self.memory:
            text.append(f" · {self.memory}", style="bold red")
        if self.walltime:
            text.append(f" · {self.walltime}", style="bold red" if self.walltime_low else "")
        if self.hang:
            text.append(f" · {self.hang}", style="bold red")
        if self.nan:
            text.append(f" · {self.nan}", style="bold red")
        if self.paused:
            text.append(f" · {self.paused}", style="bold magenta")
        if self.stuck:
            text.append(f" · {self.stuck}", style="bold yellow")
        if self.data_time is not None:
            age = time.time() - self.data_time
            if self.state == "connected":
                text.append(f" · data {duration(age - age % AGE_STEP_S)} ago", style="dim")
            else:
                text.append(f" · data {duration(age)} old", style="bold red")
        if self.ray_version:
            text.append(f" · Ray {self.ray_version}")
        if self.detail:
            text.append(f" · {self.detail}", style="italic")
        return text
