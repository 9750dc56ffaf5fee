"""Provides the jobs strip of the Cluster screen: the newest jobs with their status and run time.

Shown again on every poll, so written through `TextPanel.put`: unchanged text is not written again.
"""

from __future__ import annotations

import time

from rich.text import Text

from cockpit.core.snapshots import JobRow
from cockpit.core.units import duration
from cockpit.ui.widgets.safe_text import clean
from cockpit.ui.widgets.text_panel import TextPanel

STATUS_STYLE = {
    "RUNNING": "bold green",
    "PENDING": "bold yellow",
    "SUCCEEDED": "green",
    "FAILED": "bold red",
    "STOPPED": "yellow",
}


def jobs_text(jobs: tuple[JobRow, ...], limit: int, now: float) -> Text:
    """Up to LIMIT jobs, one line each: running and pending first (what the user is watching), then the
    newest finished ones. Ids, statuses and entrypoints are the cluster's: shown as plain text."""
    text = Text(no_wrap=True, overflow="ellipsis")
    shown = sorted(jobs, key=lambda j: (j.terminal, -(j.start_time or 0.0)))[:limit]
    for i, job in enumerate(shown):
        if i:
            text.append("\n")
        end = job.end_time or now
        ran = duration(end - job.start_time) if job.start_time else "-"
        text.append(f"{clean(job.status):9}", style=STATUS_STYLE.get(job.status, ""))
        text.append(f" {clean(job.key)}  {ran}  ")
        text.append(clean(job.entrypoint), style="dim")
    return text


class JobsStrip(TextPanel):
    """Up to `limit` newest jobs, one line each."""

    DEFAULT_CSS = """
    JobsStrip {
        height: auto; max-height: 6; border: round $primary; padding: 0 1;
        text-wrap: nowrap; text-overflow: ellipsis;
    }
    """

    def __init__(self, limit: int = 4, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.limit = limit
        self.border_title = "Jobs"

    def show(self, jobs: tuple[JobRow, ...]) -> None:
        if not jobs:
            self.put(Text("no jobs yet (submit one with `cockpit submit TARGET PROFILE`)", style="dim"))
            return
        running = sum(1 for j in jobs if j.status == "RUNNING")
        self.border_subtitle = f"{running} running · {len(jobs)} total"
        self.put(jobs_text(jobs, self.limit, time.time()))
