"""Provides the feeds: what fetches data from the cluster, on its own cadence, into the state.

Each feed owns its retries and errors, writes `cockpit.ui.state.CockpitState` and posts one
`StateChanged` when something changed. A feed fetches a resource only while a shown screen needs it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from textual.app import App
from textual.notifications import SeverityLevel
from textual.worker import Worker

from cockpit.ui.widgets.safe_text import clean

if TYPE_CHECKING:
    from cockpit.core.connect.connection import Connection
    from cockpit.ui.state import CockpitState

NOT_RETRYING = " (not retrying; fix it and press r)"
"""How a feed says that it gave up on a permanent error (`cockpit.core.errors.is_permanent`)."""


class ConnectedFeed:
    """A feed that reaches the cluster through the app's connection (opened on first use)."""

    def __init__(
        self, app: App[int], state: CockpitState, connection: Callable[[], Awaitable[Connection]]
    ) -> None:
        self.app = app
        self.state = state
        self.connection = connection

    def alarm(self, text: str, title: str, severity: SeverityLevel = "error", timeout: float = 15) -> None:
        """The bell and a banner on whatever screen is shown; TEXT may quote the cluster: cleaned, and
        never read as markup."""
        self.app.bell()
        self.app.notify(clean(text), title=title, severity=severity, timeout=timeout, markup=False)


def start_worker(
    app: App[Any],
    work: Callable[[], Awaitable[None]],
    *,
    group: str,
    description: str,
    exclusive: bool = True,
) -> Worker[None]:
    """A named worker of the app, started from a callable (a worker cancelled before it ran leaves no
    un-awaited coroutine behind); failures reach the app's one handler instead of ending it."""
    worker: Worker[None] = app.run_worker(
        work,  # type: ignore[arg-type]  # textual's overloads infer Never for an async callable
        group=group,
        exclusive=exclusive,
        exit_on_error=False,
        description=description,
    )
    return worker
