"""Provides the frame every main screen shares: the status bar on top, the key footer below."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer

from cockpit.ui.widgets.status_bar import StatusBar

if TYPE_CHECKING:
    from cockpit.ui.app import CockpitApp


class CockpitScreen(Screen[None]):
    """A main screen (reached by a number key). Subclasses compose their body in `compose_body`."""

    TITLE = ""

    @property
    def cockpit(self) -> CockpitApp:
        from cockpit.ui.app import CockpitApp

        assert isinstance(self.app, CockpitApp)
        return self.app

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status-bar")
        yield from self.compose_body()
        # Compact, no palette hint: at 80 columns every key, `?` and `q` included, must stay visible.
        yield Footer(compact=True, show_command_palette=False)

    def compose_body(self) -> ComposeResult:
        yield from ()

    def on_screen_resume(self) -> None:
        self.cockpit.sync_status_bar(self)
        self.refresh_view()

    def refresh_view(self) -> None:
        """Show the app's latest data; called on resume and after each poll while visible."""
