"""Provides the screens whose features are not built yet: each says so plainly and names its issue."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Center, Middle
from textual.widgets import Static

from cockpit.ui.screens.base import CockpitScreen


class UpcomingScreen(CockpitScreen):
    """A navigation slot whose feature is tracked by an open issue; shows no made-up data."""

    FEATURE = ""
    ISSUE = 0

    def compose_body(self) -> ComposeResult:
        tracked = f" (issue #{self.ISSUE})" if self.ISSUE else ""
        with Middle(), Center():
            yield Static(
                f"[b]{self.TITLE}[/b]\n\n{self.FEATURE}\n\nNot built yet{tracked}.\n"
                "Press [b]1[/b] for the Cluster screen, [b]?[/b] for keys.",
                classes="upcoming",
            )


class DebuggerScreen(UpcomingScreen):
    TITLE = "6 Debugger"
    FEATURE = "Attach to workers paused in the post-mortem debugger (debugpy), in the terminal."
