"""Provides the frame every main screen shares: the status bar on top, the key footer below, and the
screen's view of the cockpit's state.

A screen declares what it needs (`NEEDS`); when it comes into view the app tells the feeds, which
fetch accordingly. After each change the app calls `state_changed` on the screen on view, which
redraws when a topic it shows changed. Screens read `self.state` and never import the app.
"""

from __future__ import annotations

from typing import ClassVar, TypeVar

from textual import events
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Input

from cockpit.ui.messages import ScreenShown
from cockpit.ui.state import CockpitHost, CockpitState, Need, Topic, host_of
from cockpit.ui.widgets.footer import KeyFooter
from cockpit.ui.widgets.status_bar import StatusBar

W = TypeVar("W", bound=Widget)


class CockpitScreen(Screen[None]):
    """A main screen (reached by a number key). Subclasses compose their body in `compose_body`."""

    TITLE = ""
    NEEDS: ClassVar[frozenset[Need]] = frozenset({"nodes"})
    """What the screen shows: the feeds fetch `jobs`, `gpus` and `actors` fully only while it is on view."""
    SHOWS: ClassVar[frozenset[Topic]] = frozenset({"snapshot", "connection", "slurm"})
    """The state topics whose change redraws the screen."""

    def __init__(self, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:  # noqa: A002
        super().__init__(name=name, id=id, classes=classes)
        self._composed: dict[type[Widget], tuple[Widget, ...]] = {}

    @property
    def needs(self) -> frozenset[Need]:
        """What the screen shows now (a screen built from a layout: the union of its panes' needs)."""
        return self.NEEDS

    @property
    def host(self) -> CockpitHost:
        return host_of(self.app)

    @property
    def state(self) -> CockpitState:
        return self.host.state

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status-bar")
        yield from self.compose_body()
        # Compact, no palette hint: at 80 columns every key, `?` and `q` included, must stay visible.
        yield KeyFooter(compact=True, show_command_palette=False)

    def compose_body(self) -> ComposeResult:
        yield from ()

    def on_screen_resume(self) -> None:
        self.post_message(ScreenShown(self.needs))
        self.sync_status_bar()
        self.refresh_view()

    def sync_status_bar(self) -> None:
        for bar in self.composed(StatusBar):
            bar.show(self.state, self.TITLE)

    def composed(self, kind: type[W]) -> tuple[W, ...]:
        """The screen's widgets of KIND, looked up once it is mounted: a main screen composes its widgets
        once and keeps them (a DOM query on every poll was a tenth of the idle screen's work)."""
        found = self._composed.get(kind)
        if found is None:
            found = tuple(self.query(kind))
            if self.is_mounted:
                self._composed[kind] = found
        return found  # type: ignore[return-value]  # stored by its kind just above

    def state_changed(self, topics: frozenset[Topic]) -> None:
        """The app's word that the state changed; redraws what this screen shows of it."""
        if topics & {"connection", "info", "snapshot", "pending", "paused", "hang", "metrics", "slurm"}:
            self.sync_status_bar()
        if topics & self.SHOWS:
            self.refresh_view()

    def refresh_view(self) -> None:
        """Show the state; called on resume and when a topic in `SHOWS` changed while on view."""


def type_into(field: Input, key: str, character: str) -> None:
    """CHARACTER (key KEY) typed into FIELD, which has focus, behind the keys queued for it: a priority
    binding's own key typed in the field it opened (`/` in a filter). Inserted at once it would land
    before keys typed just ahead of it that the field has not handled yet (`a/b` typed fast was `/ab`)."""
    field.post_message(events.Key(key, character))
