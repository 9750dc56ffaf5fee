"""Provides the app-wide messages: what the pollers found, or why they found nothing."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from cockpit.core.gpu_board import GpuFleet
from cockpit.core.snapshots import ClusterInfo, ClusterSnapshot
from cockpit.core.ssh.errors import UnknownHostKey


@dataclass
class ClusterPolled(Message):
    """A fresh cluster snapshot arrived."""

    snapshot: ClusterSnapshot
    gpus: GpuFleet | None = None
    """Every GPU of the snapshot, with its history and actors (built off the UI thread)."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ClusterPolled)


@dataclass
class ClusterInfoLoaded(Message):
    """Versions of the cluster, fetched once per connection."""

    info: ClusterInfo


@dataclass
class PollFailed(Message):
    """The cluster did not answer; `reason` is one sentence for the header."""

    reason: str
    permanent: bool = False


@dataclass
class HostKeyUnknown(Message):
    """The head's host key is in no known_hosts file: the user decides whether to trust it."""

    unknown: UnknownHostKey
