"""Provides the dashboard client's transport: one `wire.Wire` (TCP or the SSH tunnel's UNIX socket),
each request's answer read as JSON, text or bytes, and the rules every request follows: errors told as
one sentence (`DashboardError`), an identical GET under way shared instead of sent again (and, for a
list polled often, an answer the same as the last not read again), requests under way counted by kind,
and a head that runs Ray without its dashboard told once (`DashboardOff`). The typed endpoints are
`dashboard.DashboardClient`'s."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

import cockpit
from cockpit.core.cluster.answers import sendable
from cockpit.core.cluster.errors import (
    DashboardError,
    DashboardOff,
    DashboardUnreachable,
    RequestRejected,
    http_error,
)
from cockpit.core.cluster.json_items import NotJson, Streamed
from cockpit.core.cluster.wire import AnswerCut, Limits, Wire
from cockpit.core.targets import shown_target

BIG_ANSWER = 1 << 20
"""Bytes from which an answer is decoded and read on a thread: `/nodes?view=summary` is about 8.4 KB a
node (17 MB at 2,000 nodes, a second of parsing), which would freeze the UI's event loop."""
ASK_WHY_EVERY_S = 30.0
"""How often, at most, the client asks why nothing answers (`why_unreachable`: a program run on the head)."""


def _read_json(body: bytes, path: str, then: Callable[[Any], Any] | None) -> Any:
    """BODY as JSON, read by THEN when given (a `Streamed` THEN reads the body itself)."""
    if isinstance(then, Streamed):
        try:
            return then.read(body)
        except NotJson:
            raise RequestRejected(f"the dashboard sent something that is not JSON for {path}.") from None
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than the interpreter's limit
        raise RequestRejected(f"the dashboard sent something that is not JSON for {path}.") from None
    return then(doc) if then is not None else doc


async def _read_answer(body: bytes, path: str, then: Callable[[Any], Any] | None) -> Any:
    """BODY read as `_read_json` does: on a thread from `BIG_ANSWER` bytes, so the event loop goes on."""
    if len(body) >= BIG_ANSWER:
        return await asyncio.to_thread(_read_json, body, path, then)
    return _read_json(body, path, then)


def failure_reason(exc: OSError) -> str:
    """Why a connection failed, in a few words: "connection refused", "connection reset", "Name or
    service not known", an `AnswerCut`'s own words."""
    if isinstance(exc, ConnectionRefusedError) or "Connect call failed" in str(exc):
        return "connection refused"  # asyncio's "Multiple exceptions: ..." when every address refused
    if isinstance(exc, ConnectionResetError):
        return "connection reset"
    if isinstance(exc, AnswerCut):
        return str(exc)
    return exc.strerror or str(exc) or type(exc).__name__


def request_kind(method: str, path: str, params: Sequence[tuple[str, str]] | None) -> str:
    """What makes two requests the same request: method, path and parameters ("GET /api/v0/actors
    ?detail=true&limit=1000&state=ALIVE"), parameters sorted, values cut at 40 characters."""
    query = "&".join(f"{key}={str(value)[:40]}" for key, value in sorted(params or ()))
    return f"{method} {path}" + (f"?{query}" if query else "")


def user_agent() -> str:
    """`ray-cockpit/VERSION`: the `User-Agent` of every request (read when the first session opens, not at
    import: the installed version comes from the package metadata)."""
    return f"ray-cockpit/{cockpit.__version__}"


class DashboardTransport:
    """The HTTP side of one dashboard client (see `DashboardClient` for the arguments)."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        unix_socket: str | None = None,
        timeout: float = 10.0,
        label: str | None = None,
        link_status: Callable[[], str | None] | None = None,
        why_unreachable: Callable[[], Awaitable[str | None]] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.without_dashboard: str | None = None
        """Why there is no dashboard to ask (the head runs Ray without it), once `why_unreachable` said."""
        self._why_unreachable = why_unreachable
        self._asked_why_at: float | None = None
        self._asking_why = asyncio.Lock()
        self._label = label
        self._link_status = link_status
        self._token = token
        self._unix_socket = unix_socket
        self._timeout = Limits(total=timeout)
        self._wire: Wire | None = None
        self.in_flight: Counter[str] = Counter()
        """Requests under way now, by kind (`request_kind`: method, path and parameters)."""
        self._shared: dict[tuple[str, bool, bool, Callable[[Any], Any] | None], asyncio.Future[Any]] = {}
        """GETs under way, by kind and how the answer is read: a second asker waits for the first."""
        self.most_in_flight: Counter[str] = Counter()
        """The most requests of each kind ever under way at once: a poll that piles up on a slow link
        (asked again before its last answer came) shows here as a kind above 1."""
        self._last_read: dict[str, tuple[bytes, Any]] = {}
        """For `_get_unless_same`: the last answer of each kind of request, as sent and as read."""

    @property
    def timeout_s(self) -> float | None:
        """The limit on each request, and on each wait for a log's next chunk where a wait is limited."""
        return self._timeout.total

    @property
    def display_url(self) -> str:
        return self._label or self.base_url

    def _client(self) -> Wire:
        if self._wire is None:
            # Who asks, in the dashboard's access log: the cockpit and its version.
            headers = [("User-Agent", user_agent())]
            if self._token:
                headers.append(("Authorization", f"Bearer {self._token}"))
            # No browser-like headers (Origin, Referer, Sec-Fetch-*): the dashboard refuses POSTs from those.
            # Over the tunnel each connection is an SSH channel, and log streams hold theirs: more of them.
            limit = 100 if self._unix_socket else 8
            self._wire = Wire(self.base_url, unix_socket=self._unix_socket, headers=headers, limit=limit)
        return self._wire

    async def close(self) -> None:
        for shared in list(self._shared.values()):
            shared.cancel()
        if self._wire is not None:
            await self._wire.close()
            self._wire = None

    # -- transport ---------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _counted(self, method: str, path: str, params: Sequence[tuple[str, str]] | None) -> Iterator[None]:
        """Counts one request under way (`in_flight`, `most_in_flight`) while the block runs."""
        kind = request_kind(method, path, params)
        self.in_flight[kind] += 1
        self.most_in_flight[kind] = max(self.most_in_flight[kind], self.in_flight[kind])
        try:
            yield
        finally:
            self.in_flight[kind] -= 1
            if not self.in_flight[kind]:
                del self.in_flight[kind]

    async def _request(
        self,
        method: str,
        path: str,
        params: Sequence[tuple[str, str]] | None = None,
        json_body: Any = None,
        expect_json: bool = True,
        data: bytes | None = None,
        raw: bool = False,
        timeout: Limits | None = None,
        then: Callable[[Any], Any] | None = None,
    ) -> Any:
        """One request's answer: as JSON (read by THEN when given), text, or bytes (`raw`). A GET asked
        while the same GET (`request_kind`, read the same way, by the same THEN) is under way waits for
        that one's answer instead of asking again: two feeds, or a poll and a screen, asking for the same
        list at once cost the head one request, and on a slow link no request of a kind piles up. The
        answer is shared as parsed: callers read it, never change it."""
        self._check_dashboard_on()
        if method != "GET" or json_body is not None or data is not None:
            return await self._send(method, path, params, json_body, expect_json, data, raw, timeout, then)
        key = (request_kind(method, path, params), expect_json, raw, then)
        shared = self._shared.get(key)
        if shared is None:
            sending = self._send(method, path, params, None, expect_json, None, raw, timeout, then)
            shared = asyncio.ensure_future(sending)
            self._shared[key] = shared
            shared.add_done_callback(functools.partial(self._unshare, key))
        return await asyncio.shield(shared)

    def _unshare(
        self, key: tuple[str, bool, bool, Callable[[Any], Any] | None], done: asyncio.Future[Any]
    ) -> None:
        if self._shared.get(key) is done:
            del self._shared[key]
        if not done.cancelled():
            done.exception()  # retrieved: every caller may have left before it ended

    async def _send(
        self,
        method: str,
        path: str,
        params: Sequence[tuple[str, str]] | None,
        json_body: Any,
        expect_json: bool,
        data: bytes | None,
        raw: bool,
        timeout: Limits | None,
        then: Callable[[Any], Any] | None,
    ) -> Any:
        sendable(params or (), path)
        limits = timeout or self._timeout
        if json_body is not None:
            data, content_type = json.dumps(json_body).encode(), "application/json"
        else:
            content_type = "application/octet-stream"

        async def send() -> bytes:
            async with self._client().request(
                method, path, params or (), body=data, content_type=content_type, limits=limits
            ) as answer:
                body = await answer.read()
            if answer.status >= 400:
                raise http_error(answer.status, path, body)
            return body

        try:
            with self._counted(method, path, params):
                body = await asyncio.wait_for(send(), limits.total)
                if raw:
                    return body
                if not expect_json:
                    return body.decode("utf-8", errors="replace")
                return await _read_answer(body, path, then)
        except DashboardError:
            raise
        except asyncio.TimeoutError:
            waited = limits.total or limits.read or limits.connect or 0
            raise DashboardUnreachable(
                f"the Ray dashboard at {self.display_url} did not answer {path} within "
                f"{waited:.0f} s; the head may be overloaded."
            ) from None
        except UnicodeError:  # the name lookup's IDNA encoding: a part between dots over 63 characters
            raise DashboardUnreachable(
                f"cannot reach the Ray dashboard at {shown_target(self.display_url)}: its host name is not "
                "one (each part between dots is 1 to 63 characters).",
                permanent=True,
            ) from None
        except OSError as exc:
            # Connection refused or reset, an answer cut short (`AnswerCut`), or something that is not the
            # dashboard on that port (not an HTTP answer).
            link = self._link_status() if self._link_status is not None else None
            if link:
                raise DashboardUnreachable(
                    f"cannot reach the Ray dashboard at {self.display_url}: {link}."
                ) from None
            await self._ask_why()
            reason = failure_reason(exc)
            raise DashboardUnreachable(
                f"cannot reach the Ray dashboard at {self.display_url} ({reason}); is the cluster up?"
            ) from None

    def _check_dashboard_on(self) -> None:
        if self.without_dashboard is not None:
            raise DashboardOff(self.without_dashboard)

    async def _ask_why(self) -> None:
        """Nothing answered: ask the head why (once at a time, at most every `ASK_WHY_EVERY_S`); raise
        `DashboardOff` when it runs Ray without its dashboard."""
        if self._why_unreachable is None:
            return
        async with self._asking_why:
            now = time.monotonic()
            if self.without_dashboard is None and (
                self._asked_why_at is None or now - self._asked_why_at >= ASK_WHY_EVERY_S
            ):
                self._asked_why_at = now
                self.without_dashboard = await self._why_unreachable()
        self._check_dashboard_on()

    async def _get(
        self,
        path: str,
        params: Sequence[tuple[str, str]] | None = None,
        then: Callable[[Any], Any] | None = None,
    ) -> Any:
        return await self._request("GET", path, params=params, then=then)

    async def _get_unless_same(
        self, path: str, params: Sequence[tuple[str, str]], then: Callable[[Any], Any]
    ) -> Any:
        """A GET read as JSON by THEN, unless its answer is byte for byte the last one to this request:
        then the last reading, without decoding it again. For a list polled every few seconds that rarely
        changes (the GCS node table: about 1 MB at 2,000 nodes, a tenth of a second to read); THEN must
        read the same bytes the same way every time, and its answer is shared, never changed."""
        body: bytes = await self._request("GET", path, params=params, raw=True)
        kind = request_kind("GET", path, params)
        last = self._last_read.get(kind)
        if last is not None and last[0] == body:
            return last[1]
        answer = await _read_answer(body, path, then)
        self._last_read[kind] = (body, answer)
        return answer
