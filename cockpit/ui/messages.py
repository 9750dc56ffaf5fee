"""Provides the app-wide messages: what screens ask of the app, and what feeds ask of the user.

Data itself does not travel in messages: feeds write the state (`cockpit.ui.state`) and post
`StateChanged`. These are requests, each handled in one place by the app.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from cockpit.core.snapshots import ActorRow, JobRow
from cockpit.core.ssh.errors import UnknownHostKey
from cockpit.ui.state import Need


@dataclass
class ScreenShown(Message):
    """A main screen came into view; `needs` is what it declared (the feeds fetch accordingly)."""

    needs: frozenset[Need]


@dataclass
class RefreshRequested(Message):
    """Poll now (and after a refused token or host key, reconnect)."""


@dataclass
class ShowJobLog(Message):
    """Open the Logs screen on `job`'s driver log."""

    job: JobRow


@dataclass
class ShowActorLog(Message):
    """Open the Logs screen on `actor`'s stdout and stderr."""

    actor: ActorRow


@dataclass
class ShowGpusOf(Message):
    """Open the GPU screen's list on one node's GPUs."""

    node_id: str


@dataclass
class ShowNode(Message):
    """Open the Cluster screen with the cursor on one node."""

    node_id: str


@dataclass
class ActorQueryChanged(Message):
    """The Actors screen's filter (`CockpitState.actor_query`) changed: the feed may refetch."""


@dataclass
class HighResToggled(Message):
    """Start or stop the GPU agents; `preferred` node ids are covered first when agents run short."""

    preferred: frozenset[str] = frozenset()


@dataclass
class HostKeyUnknown(Message):
    """The head's host key is in no known_hosts file: the user decides whether to trust it."""

    unknown: UnknownHostKey
