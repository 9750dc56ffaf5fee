"""Provides the alert feed: the alert rules `cockpit alerts` uses, run on what the TUI already polled, so
an alert reaches a user who is not looking at the screen.

After each poll the feed builds one `Observation` from the state (the jobs and nodes of the snapshot, the
hang watch's verdicts, the followed job's NaN alarms, what is stuck, the Slurm job) and its `AlertBook`
says what is new. Each new alert is written to the terminal as a desktop notification (`alerts.notify`:
OSC 9 or 777, through SSH and tmux's passthrough; nothing but the bell where tmux would swallow it) and
given to the user's command (`alerts.command`), the same JSON `cockpit alerts` gives it. The events no
other feed announces on screen (a job failed or succeeded, an OOM, a dead node) also get a banner; the
status bar keeps saying what lasts (a hang, a NaN, work stuck, the walltime) as before. No request of
its own: it reads the state.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from cockpit.core.alerts.book import AlertBook
from cockpit.core.alerts.rules import Observation, Thresholds, findings, looked_at
from cockpit.core.alerts.send import CommandSink, notification, tmux_passthrough
from cockpit.core.doctor.hang import Verdict
from cockpit.ui.widgets.safe_text import clean

if TYPE_CHECKING:
    from textual.app import App
    from textual.notifications import SeverityLevel

    from cockpit.core.alerts.book import Alert
    from cockpit.ui.state import CockpitState

BANNERS = {
    "job_failed": "Job failed",
    "job_succeeded": "Job done",
    "oom": "Out of memory",
    "node_dead": "Node dead",
}
"""The rules whose alerts get a banner here (the others have their own, from their feeds)."""


class AlertFeed:
    def __init__(self, app: App[Any], state: CockpitState) -> None:
        self.app = app
        self.state = state
        settings = state.config.alerts
        self.settings = settings
        self.thresholds = Thresholds.of(settings)
        self.book = AlertBook(state.target.raw, settings.remind_every)
        self.sink: CommandSink | None = None
        self._tmux: bool | None = None
        self._tmux_asked = False
        self.told: list[Alert] = []
        """The last alerts told (newest last, at most 50): for tests and the help of a future screen."""

    def after_poll(self) -> None:
        """One look at what the state holds now."""
        state = self.state
        snapshot = state.snapshot
        if snapshot is None:
            return
        hangs = {
            key: Verdict(entry.hung, 0.0, entry.line, entry.straggler, "", None)
            for key, entry in state.doctor.watches.items()
        }
        metrics = state.metrics
        followed = metrics.job
        # Only a running job's: an ended job browsed on the Metrics screen is history, not news.
        running = followed is not None and not followed.terminal and metrics.alarms
        nonfinite = {followed.key: metrics.alarms} if running and followed is not None else {}
        seen = Observation(
            jobs=snapshot.jobs,
            nodes=snapshot.nodes,
            hangs=hangs,
            nonfinite=nonfinite,
            stuck=state.stuck.report,
            slurm=state.slurm,
            now=time.time(),
        )
        for alert in self.book.update(findings(seen, self.thresholds), seen.now, looked_at(seen)):
            self.tell(alert)

    def tell(self, alert: Alert) -> None:
        self.told = [*self.told[-49:], alert]
        self._notify_terminal(alert)
        if alert.rule in BANNERS and alert.state == "firing":
            self.app.bell()
            severity: SeverityLevel = "information" if alert.severity == "info" else "error"
            self.app.notify(
                clean(alert.message), title=BANNERS[alert.rule], severity=severity, timeout=20, markup=False
            )
        if self.settings.command:
            if self.sink is None:
                self.sink = CommandSink(
                    self.settings.command, report=self._command_failed, timeout=self.settings.command_timeout
                )
            self.sink.send(alert)

    async def stop(self) -> None:
        """Ends an alert command still running (the app is closing)."""
        if self.sink is not None:
            await self.sink.close()

    def _notify_terminal(self, alert: Alert) -> None:
        style = self.settings.notify
        driver = getattr(self.app, "_driver", None)  # where Textual's own `bell` writes
        if style in ("off", "bell") or self.app.is_headless or driver is None:
            return  # the bell: rung by the banners and the feeds' own alarms
        if not self._tmux_asked:
            self._tmux_asked = True
            self._tmux = tmux_passthrough()
        if self._tmux is False:
            return
        driver.write(notification(alert, style, self._tmux, bell=False))  # type: ignore[arg-type]

    def _command_failed(self, line: str) -> None:
        self.app.notify(clean(line), title="Alert command", severity="warning", timeout=15, markup=False)
