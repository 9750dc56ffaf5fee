"""Provides log sources (a job's driver log, an actor's output, any file of any node) and `LogTail`,
which follows one through the dashboard and resumes after a drop with no gap and no repeated byte.

The dashboard's stream (`/api/v0/logs/stream`) starts at the last N lines and then sends raw chunks
forever, with no offsets. When it drops (a dashboard module restart, an SSH reconnect) the tail fetches
the file once, finds the last 4 KiB it delivered (the anchor) and re-opens the stream from the start of
the file, skipping everything up to the anchor's end. Files are append-only, so the skip stays right.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from cockpit.core.ray_api import DashboardClient, DashboardError, DashboardUnreachable
from cockpit.core.snapshots import ActorRow, JobRow

ANCHOR_BYTES = 4096
RETRY_SECONDS = (0.5, 1.0, 2.0, 4.0)


@dataclass(frozen=True)
class LogSource:
    """One log: by node and file name, or by actor (the dashboard finds the actor's worker file)."""

    label: str
    """How lines from it are tagged ("driver", "RolloutWorker_0", "raylet.out")."""
    node_id: str = ""
    filename: str = ""
    actor_id: str = ""
    suffix: str = "out"
    """For actors: "out" (stdout) or "err" (stderr)."""

    def params(self) -> list[tuple[str, str]]:
        if self.actor_id:
            return [("actor_id", self.actor_id), ("suffix", self.suffix)]
        return [("node_id", self.node_id), ("filename", self.filename)]

    @classmethod
    def driver(cls, job: JobRow) -> LogSource:
        """The job's driver log (stdout and stderr of the entrypoint), on the driver's node."""
        return cls(label="driver", node_id=job.driver_node_id, filename=f"job-driver-{job.submission_id}.log")

    @classmethod
    def actor(cls, actor: ActorRow, suffix: str = "out") -> LogSource:
        name = actor.name or f"{actor.class_name}:{actor.actor_id[:8]}"
        return cls(
            label=name if suffix == "out" else f"{name} (stderr)", actor_id=actor.actor_id, suffix=suffix
        )

    @classmethod
    def file(cls, node_id: str, filename: str) -> LogSource:
        return cls(label=filename.rsplit("/", 1)[-1], node_id=node_id, filename=filename)


class LogTail:
    """Follows one log source; iterate `chunks()` for the new bytes, in order, each exactly once.

    Args:
        lines: how many existing lines to start with (-1: the whole file).
        on_event: told, in one sentence, when the stream dropped and when it resumed.
    """

    def __init__(
        self,
        client: DashboardClient,
        source: LogSource,
        lines: int = 1000,
        on_event: Callable[[str], None] | None = None,
        interval: float = 0.5,
    ) -> None:
        self.client = client
        self.source = source
        self.lines = lines
        self.on_event = on_event or (lambda _message: None)
        self.interval = interval
        self.delivered = 0
        """Bytes delivered so far."""
        self.resumes = 0
        self._anchor = b""

    async def _resume_offset(self) -> int:
        """Where, in the whole file, the bytes delivered so far end (0 when nothing was delivered)."""
        if not self._anchor:
            return 0
        whole = await self.client.log_bytes(self.source.params())
        position = whole.rfind(self._anchor)
        if position < 0:
            self.on_event(
                f"{self.source.label}: the file changed under the stream (rotated?); restarting from its top"
            )
            return 0
        return position + len(self._anchor)

    async def remainder(self) -> bytes:
        """What the file holds after the last byte delivered (read once, e.g. after the job ended)."""
        if not self._anchor:
            return await self.client.log_bytes(self.source.params(), lines=self.lines)
        whole = await self.client.log_bytes(self.source.params())
        position = whole.rfind(self._anchor)
        return whole[position + len(self._anchor) :] if position >= 0 else b""

    async def chunks(self) -> AsyncIterator[bytes]:
        """New bytes, forever. Iterating again later (a pane shown again) continues where it stopped."""
        failures = 0
        while True:
            try:
                # Nothing delivered yet: start at the last `lines` lines. Otherwise replay the file and
                # skip what was delivered (after a drop, or when a hidden pane is shown again).
                skip = await self._resume_offset() if self._anchor else 0
                lines = -1 if self._anchor else self.lines
                seen = 0
                async for chunk in self.client.stream_log(
                    self.source.params(), lines=lines, interval=self.interval
                ):
                    start = max(0, skip - seen)
                    seen += len(chunk)
                    if start >= len(chunk):
                        continue
                    data = chunk[start:]
                    self._anchor = (self._anchor + data)[-ANCHOR_BYTES:]
                    self.delivered += len(data)
                    if failures:
                        self.on_event(f"{self.source.label}: stream resumed, no line lost or repeated")
                        failures = 0
                    yield data
            except DashboardError as exc:
                # A drop, the dashboard's request limit or a module restart is retried; a missing file
                # or a refused token is not.
                if not (isinstance(exc, DashboardUnreachable) or exc.status in (429, 500, 502, 503, 504)):
                    raise
                delay = RETRY_SECONDS[min(failures, len(RETRY_SECONDS) - 1)]
                failures += 1
                self.resumes += 1
                self.on_event(f"{self.source.label}: stream dropped ({exc}); resuming in {delay:g} s")
                await asyncio.sleep(delay)
