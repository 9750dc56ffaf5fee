"""Provides the async client for the Ray dashboard REST API (HTTP: `wire`), returning typed snapshots.

One `DashboardClient` per cluster keeps one HTTP session. It speaks only HTTP, so it works against any
Ray version the endpoints exist in, without `ray.init()` and without importing `ray`. Every method
returns fresh data (caching and cadence are the UI's business) and raises a `DashboardError` subclass
whose text is one sentence a user can act on.

The answers are read by the plain functions below the client (`state_listing`, `jobs_of`, ...): any JSON
at all gives a snapshot (NA where a value is missing or of the wrong type) or a `DashboardError`. Ids go
into URL paths quoted as one segment each (`path_segment`), so a job id like `../x` or `a?b` names that
job and nothing else; everything else travels as query parameters, which `wire` encodes (`sendable`
refuses what it would silently send empty).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from cockpit.core.cluster import parse
from cockpit.core.cluster.answers import (
    Filter,
    answer_flag,
    auth_mode_of,
    cluster_status_of,
    envelope_data,
    filter_params,
    job_of,
    jobs_of,
    log_index_of,
    node_summaries_streamed,
    path_segment,
    sendable,
    state_listing_streamed,
    submission_id_of,
    version_of,
)
from cockpit.core.cluster.errors import (
    OLD_LOG_ERROR,
    DashboardError,
    DashboardUnreachable,
    LogStalled,
    NotFound,
    RequestRejected,
    http_error,
    old_log_error,
)
from cockpit.core.cluster.transport import DashboardTransport, failure_reason
from cockpit.core.cluster.wire import Limits
from cockpit.core.errors import CockpitError
from cockpit.core.snapshots import (
    ActorRow,
    ActorSummary,
    ClusterInfo,
    ClusterStatus,
    JobRow,
    Listing,
    LogIndex,
    NodeSnapshot,
    NodeUsage,
    PlacementGroupRow,
    ProcessStat,
    TaskRow,
    WorkerRow,
)

T = TypeVar("T")

MAX_LIMIT = 10_000
"""The dashboard refuses larger limits (RAY_MAX_LIMIT_FROM_API_SERVER)."""
UPLOAD_ANSWER_TIMEOUT = 300.0
"""Seconds an upload may wait for each read of the dashboard's answer: it stores the package (up to
100 MiB) in the GCS before it answers."""
UPLOAD_CONNECT_TIMEOUT = 10.0
UPLOAD_MIN_RATE = 64 * 1024
"""Bytes per second an upload is allowed at worst: its total limit is `UPLOAD_ANSWER_TIMEOUT` plus the size
at this rate (100 MiB through a slow SSH tunnel takes minutes, not the client's 10 s; a stalled one ends)."""

LOG_TEXT_FORMAT = ("format", "text")
"""Sent with every log read. Older Ray (2.44 here) frames each chunk it writes with a status byte (`1`
data, `0` error: its default `leading_1` format) unless asked for plain text; Ray 2.60 ignores it."""
LOG_READ_DEADLINE_S = 600
"""How long the dashboard may take over one `/api/v0/logs/file` read (its own default is 30 s)."""


def load_token(token_file: str | os.PathLike[str] | None = None, fallback: str | None = None) -> str | None:
    """The cluster's auth token: `--token-file`, else `RAY_AUTH_TOKEN`, else `fallback` (the local
    cluster's own token), else `~/.ray/auth_token`."""
    if token_file:
        try:
            return Path(token_file).read_text().strip() or None
        except OSError as exc:
            raise CockpitError(f"cannot read the token file {token_file}: {exc.strerror}.") from None
    env = os.environ.get("RAY_AUTH_TOKEN", "").strip()
    if env:
        return env
    if fallback:
        return fallback
    default = Path.home() / ".ray" / "auth_token"
    try:
        return default.read_text().strip() or None
    except OSError:
        return None


class DashboardClient(DashboardTransport):
    """Async client of one Ray dashboard.

    Args:
        base_url: e.g. ``http://127.0.0.1:8265``; with ``unix_socket`` only its path part matters.
        token: sent as ``Authorization: Bearer`` on every request when the cluster uses token auth.
        unix_socket: reach the dashboard through this UNIX socket (the cockpit's private SSH tunnel).
        timeout: seconds for one request; the head is never waited on forever.
        label: how errors name the dashboard (e.g. the SSH target), instead of `base_url`.
        link_status: says why the link under the client is down (e.g. "SSH reconnecting, attempt 3"),
            or None while it is up; used in the error when the dashboard cannot be reached.
        why_unreachable: asked (at most every `ASK_WHY_EVERY_S`) when nothing answers at the address:
            a sentence when the head runs Ray without its dashboard, else None. Once it said so, every
            request raises `DashboardOff` with that sentence at once, without asking the head.
    """

    async def __aenter__(self) -> DashboardClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _state_list(
        self,
        resource: str,
        build: Callable[[Mapping[str, Any]], T],
        filters: Iterable[Filter] = (),
        limit: int = 1000,
        detail: bool = True,
        extra: Sequence[tuple[str, str]] = (),
        unless_same: bool = False,
    ) -> Listing[T]:
        """Rows of one state-API list (`/api/v0/RESOURCE`), each built by BUILD. UNLESS_SAME: an answer
        byte for byte the last one gives the last listing, not read again (`_get_unless_same`)."""
        if not 0 < limit <= MAX_LIMIT:
            raise ValueError(f"limit must be within 1..{MAX_LIMIT}")
        params: list[tuple[str, str]] = [("limit", str(limit)), ("timeout", "8")]
        if detail:
            params.append(("detail", "true"))
        params += filter_params(filters)
        params.extend(extra)
        path = f"/api/v0/{resource}"
        read = state_listing_streamed(path, build)
        if unless_same:
            same: Listing[T] = await self._get_unless_same(path, params, read)
            return same
        listing: Listing[T] = await self._get(path, params, then=read)
        return listing

    # -- cluster -----------------------------------------------------------------------------------

    async def version(self) -> dict[str, str]:
        """`/api/version`: the cheapest authenticated call; proves the dashboard and the token work."""
        return version_of(await self._get("/api/version"))

    async def auth_mode(self) -> str:
        """`token`, `disabled`, or `absent` (a Ray before 2.52: no token auth at all; public endpoint,
        works without a token)."""
        try:
            doc = await self._get("/api/authentication_mode")
        except NotFound:
            return "absent"
        return auth_mode_of(doc)

    async def cluster_info(self) -> ClusterInfo:
        """The Ray version and session (`/api/version` and `/api/v0/cluster_metadata`, asked together:
        one round trip to a distant head, not two)."""

        async def metadata() -> Any:
            try:
                return envelope_data(await self._get("/api/v0/cluster_metadata"), "/api/v0/cluster_metadata")
            except (NotFound, RequestRejected):
                return None

        version, meta = await asyncio.gather(self.version(), metadata())
        return parse.cluster_info(version, meta)

    async def node_table(self) -> Listing[NodeSnapshot]:
        """Nodes from the GCS table (`/api/v0/nodes`): cheap, authoritative for membership and death. Polled
        every few seconds and the same from one poll to the next while no node comes or goes: an answer
        the same as the last is not read again, and gives the very same listing."""
        return await self._state_list("nodes", parse.node_from_state, limit=MAX_LIMIT, unless_same=True)

    async def node_stats(self, fresh: bool = False) -> tuple[NodeSnapshot, ...]:
        """Nodes with host and GPU stats (`/nodes?view=summary`, cached 2 s by the dashboard).

        Args:
            fresh: bypass the dashboard's cache (`nocache=1`), e.g. right after a node joined.
        """
        params = [("view", "summary")] + ([("nocache", "1")] if fresh else [])
        nodes: tuple[NodeSnapshot, ...] = await self._get("/nodes", params, then=node_summaries_streamed)
        return nodes

    async def nodes(self, fresh: bool = False) -> tuple[NodeSnapshot, ...]:
        """Every node the cluster knows (dead ones included) with its latest host and GPU stats."""
        table, stats = await asyncio.gather(self.node_table(), self.node_stats(fresh=fresh))
        return parse.merge_nodes(table.rows, stats)

    async def node_processes(self, node_id: str) -> tuple[ProcessStat, ...]:
        """One node's processes with their memory (`/nodes/{id}`: one node's whole detail, about 20 KB
        with its workers; asked for the few nodes a memory view names, never per poll for all)."""
        path = f"/nodes/{path_segment(node_id)}"
        doc = envelope_data(await self._get(path), path)
        return parse.node_processes(parse.as_mapping(doc.get("detail")), node_id)

    async def cluster_status(self) -> ClusterStatus:
        """The `ray status` text, without the Ray CLI (72x faster here, see BENCHMARKS.md)."""
        return cluster_status_of(await self._get("/api/cluster_status", [("format", "1")]))

    # -- state lists -------------------------------------------------------------------------------

    async def actors(self, filters: Iterable[Filter] = (), limit: int = 1000) -> Listing[ActorRow]:
        return await self._state_list("actors", parse.actor_row, filters, limit)

    async def actor_summary(self, filters: Iterable[Filter] = ()) -> ActorSummary:
        """Per-class state counts of every actor the filters match (`/api/v0/actors/summarize`)."""
        params = [("timeout", "8"), *filter_params(filters)]
        path = "/api/v0/actors/summarize"
        return parse.actor_summary(envelope_data(await self._get(path, params), path).get("result") or {})

    async def placement_groups(
        self, filters: Iterable[Filter] = (), limit: int = 1000
    ) -> Listing[PlacementGroupRow]:
        return await self._state_list("placement_groups", parse.placement_group_row, filters, limit)

    async def node_usage(self) -> tuple[NodeUsage, ...]:
        """Each node's used and total resources, as the autoscaler last saw them (`/api/cluster_status`)."""
        doc = envelope_data(await self._get("/api/cluster_status"), "/api/cluster_status")
        return parse.node_usage(parse.as_mapping(doc.get("clusterStatus")))

    async def tasks(self, filters: Iterable[Filter] = (), limit: int = 1000) -> Listing[TaskRow]:
        return await self._state_list("tasks", parse.task_row, filters, limit)

    async def workers(self, filters: Iterable[Filter] = (), limit: int = 1000) -> Listing[WorkerRow]:
        return await self._state_list("workers", parse.worker_row, filters, limit)

    async def paused_workers(self) -> Listing[WorkerRow]:
        """Workers stopped in the post-mortem debugger (`num_paused_threads != 0`)."""
        return await self.workers(filters=[("num_paused_threads", "!=", "0")])

    async def profiling_enabled(self) -> bool | None:
        """Whether the head serves `/worker/traceback` (Ray's `RAY_DASHBOARD_ENABLE_PROFILING=1`); None
        where the head does not say (a Ray without `/api/profiling_enabled`)."""
        try:
            doc = await self._get("/api/profiling_enabled")
        except NotFound:
            return None
        data = envelope_data(doc, "/api/profiling_enabled")
        flag = data.get("profilingEnabled", data.get("profiling_enabled"))
        return flag if isinstance(flag, bool) else None

    async def worker_traceback(self, pid: int, node_id: str, native: bool = False, ip: str = "") -> str:
        """py-spy's text dump of process PID on node NODE_ID, taken by that node's agent.

        The node's IP goes too when known: a Ray before 2.50 finds the node only by `ip` (it answers
        "ip is required" otherwise); later ones prefer `node_id`.

        Raises:
            ProfilingDisabled: the head does not allow it.
        """
        params = [("pid", str(int(pid))), ("node_id", node_id), ("native", "1" if native else "0")]
        if ip:
            params.append(("ip", ip))
        return str(await self._request("GET", "/worker/traceback", params=params, expect_json=False))

    # -- jobs --------------------------------------------------------------------------------------

    async def jobs(self) -> tuple[JobRow, ...]:
        return jobs_of(await self._get("/api/jobs/"))

    async def job(self, job_id: str) -> JobRow:
        return job_of(await self._get(f"/api/jobs/{path_segment(job_id)}"), job_id)

    async def submit_job(self, request: Mapping[str, Any]) -> str:
        """POST a JobSubmitRequest; returns the submission id."""
        return submission_id_of(await self._request("POST", "/api/jobs/", json_body=dict(request)))

    async def delete_job(self, job_id: str) -> bool:
        """Delete a finished job (the dashboard refuses a running one)."""
        return answer_flag(await self._request("DELETE", f"/api/jobs/{path_segment(job_id)}"), "deleted")

    async def package_exists(self, name: str) -> bool:
        """Whether `gcs://name` is stored. Cheap: Ray answers 200 or 404 with an empty body (it checks the
        GCS key; job_head.py `get_package`), it never sends the package."""
        try:
            await self._request("GET", f"/api/packages/gcs/{path_segment(name)}", expect_json=False)
        except NotFound:
            return False
        return True

    async def upload_package(self, name: str, data: bytes) -> None:
        """PUT a working_dir zip (at most 100 MiB) as `gcs://name`. Not under the client's timeout: the
        limit grows with the size (`UPLOAD_MIN_RATE`)."""
        connect = max(self._timeout.total or 0.0, UPLOAD_CONNECT_TIMEOUT)
        timeout = Limits(
            total=UPLOAD_ANSWER_TIMEOUT + len(data) / UPLOAD_MIN_RATE,
            connect=connect,
            read=UPLOAD_ANSWER_TIMEOUT,
        )
        await self._request(
            "PUT", f"/api/packages/gcs/{path_segment(name)}", data=data, expect_json=False, timeout=timeout
        )

    async def stop_job(self, job_id: str) -> bool:
        return answer_flag(await self._request("POST", f"/api/jobs/{path_segment(job_id)}/stop"), "stopped")

    # -- logs --------------------------------------------------------------------------------------

    async def log_index(self, node_id: str, glob: str | None = None) -> LogIndex:
        params = [("node_id", node_id)] + ([("glob", glob)] if glob else [])
        return log_index_of(await self._get("/api/v0/logs", params), node_id)

    async def log_bytes(
        self, where: Sequence[tuple[str, str]], lines: int = -1, deadline_s: int = LOG_READ_DEADLINE_S
    ) -> bytes:
        """A log file (whole, or its last `lines` lines) as bytes: exact offsets, no decoding.

        `where` names it: [("node_id", ...), ("filename", ...)] or [("actor_id", ...), ("suffix", "out")].
        Held in memory whole: for a file that may be large, iterate `read_log` instead.
        """
        return b"".join([chunk async for chunk in self.read_log(where, lines=lines, deadline_s=deadline_s)])

    async def read_log(
        self, where: Sequence[tuple[str, str]], *, lines: int = -1, deadline_s: int = LOG_READ_DEADLINE_S
    ) -> AsyncIterator[bytes]:
        """A log file (whole, or its last `lines` lines) in raw chunks, ending at the end of the file.

        No total time limit on this side: a read fails only when no byte arrives for the client's timeout.
        The dashboard ends its own read after `deadline_s` (its `timeout`: 30 s unless told), which
        would cut a large file short, so name a deadline that fits the file; a read cut short raises
        DashboardUnreachable, never ends early.
        """
        params = [*where, ("lines", str(lines)), ("timeout", str(deadline_s))]
        async for chunk in self._log_body("/api/v0/logs/file", params, read_timeout=self._timeout.total):
            yield chunk

    async def stream_log(
        self,
        where: Sequence[tuple[str, str]],
        *,
        lines: int = 1000,
        interval: float = 0.5,
        replay_bytes: int = 0,
    ) -> AsyncIterator[bytes]:
        """Follow a log file: its last `lines` lines (-1: all), then new bytes as they are written.

        Raw chunks of at most 64 KiB with no line alignment. The stream never ends on its own; it raises
        DashboardUnreachable when the connection drops. Each open stream counts against the dashboard's
        limit of concurrent state requests: hold few, close them when hidden.

        Args:
            replay_bytes: while fewer bytes than this have arrived, the file's existing part is being
                sent, which comes without pauses: a wait of more than the client's timeout for the next
                chunk raises LogStalled (the file may be shorter than that). After them a quiet file
                legitimately sends nothing for a long time, so no wait is limited.
        """
        params = [*where, ("lines", str(lines)), ("interval", str(interval))]
        async for chunk in self._log_body(
            "/api/v0/logs/stream", params, read_timeout=None, replay_bytes=replay_bytes
        ):
            yield chunk
        raise DashboardUnreachable(f"the log stream from {self.display_url} ended.")

    async def _log_body(
        self,
        path: str,
        params: Sequence[tuple[str, str]],
        *,
        read_timeout: float | None,
        replay_bytes: int = 0,
    ) -> AsyncIterator[bytes]:
        """The body of a log answer in chunks as they arrive; a limit on each wait, none on the total."""
        self._check_dashboard_on()
        params = [*params, LOG_TEXT_FORMAT]
        sendable(params, path)
        limit = self._timeout.total
        # The dashboard answers a stream only with its first chunk, so the wait for that is one too.
        limits = Limits(connect=limit, read=limit if replay_bytes else read_timeout)
        arrived = 0
        counted = self._counted("GET", path, params)
        counted.__enter__()
        try:
            async with self._client().request("GET", path, params, limits=limits) as answer:
                answer.read_limit = limit
                if answer.status >= 400:
                    raise http_error(answer.status, path, await answer.read())
                # An older Ray reports a failure in the body: read on only while what came could still be
                # the start of its error line (a short first chunk of a real log is passed on at once).
                head = b""
                while len(head) < len(OLD_LOG_ERROR) and OLD_LOG_ERROR.startswith(head):
                    more = await answer.chunk()
                    if not more:
                        break
                    head += more
                if head.startswith(OLD_LOG_ERROR):
                    raise old_log_error(head + (await answer.chunk())[:4096], path)
                if head:
                    arrived += len(head)
                    yield head
                while True:
                    answer.read_limit = limit if arrived < replay_bytes else read_timeout
                    chunk = await answer.chunk()
                    if not chunk:
                        return
                    arrived += len(chunk)
                    yield chunk
        except DashboardError:
            raise
        except asyncio.TimeoutError:
            if arrived < replay_bytes:
                raise LogStalled(
                    f"the log stream from {self.display_url} stalled after {arrived} of the "
                    f"{replay_bytes} bytes it had sent before."
                ) from None
            raise DashboardUnreachable(
                f"the log read from {self.display_url} dropped (no byte for {limit:g} s)."
            ) from None
        except OSError as exc:
            # Refused, reset, or cut mid-answer (`AnswerCut`: the dashboard ended its read early).
            link = self._link_status() if self._link_status is not None else None
            if not link and not arrived:
                await self._ask_why()
            what = "log stream" if path.endswith("/stream") else "log read"
            raise DashboardUnreachable(
                f"the {what} from {self.display_url} dropped ({link or failure_reason(exc)})."
            ) from None
        finally:
            counted.__exit__(None, None, None)

    async def log_file(
        self,
        *,
        node_id: str | None = None,
        filename: str | None = None,
        actor_id: str | None = None,
        submission_id: str | None = None,
        suffix: str = "out",
        lines: int = 1000,
    ) -> str:
        """The last `lines` lines of a log file, an actor's stdout/stderr, or a job's driver log.

        A driver log needs the driver's node id (the dashboard answers a plain 500 without it).
        """
        if submission_id and not node_id:
            raise ValueError("a driver log needs node_id (JobRow.driver_node_id)")
        params: list[tuple[str, str]] = [("lines", str(lines)), ("filter_ansi_code", "true"), LOG_TEXT_FORMAT]
        for key, value in (
            ("node_id", node_id),
            ("filename", filename),
            ("actor_id", actor_id),
            ("submission_id", submission_id),
        ):
            if value:
                params.append((key, value))
        if actor_id:
            params.append(("suffix", suffix))
        text = str(await self._request("GET", "/api/v0/logs/file", params=params, expect_json=False))
        if text.startswith(OLD_LOG_ERROR.decode()):
            raise old_log_error(text.encode(), "/api/v0/logs/file")
        return text
