"""Provides `CountedStreams`: the log streams a real dashboard client is served, counted as they open and
close (the dashboard holds one of its 100 concurrent requests for each)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from cockpit.core.cluster.dashboard import DashboardClient


class CountedStreams:
    """The log streams CLIENT is served (those of FILENAME only, when given): open now, opened in all,
    and the most open at once. The streams are the client's own: this only counts them."""

    def __init__(self, client: DashboardClient, filename: str = "") -> None:
        self.open = self.opened = self.most = 0
        original = client.stream_log

        async def stream_log(where: Any, *args: Any, **kwargs: Any) -> AsyncIterator[bytes]:
            counted = not filename or ("filename", filename) in list(where)
            if counted:
                self.open += 1
                self.opened += 1
                self.most = max(self.most, self.open)
            try:
                async for chunk in original(where, *args, **kwargs):
                    yield chunk
            finally:
                if counted:
                    self.open -= 1

        client.stream_log = stream_log  # type: ignore[method-assign]
