"""Provides the dashboard's errors: what an HTTP answer means, and whether trying again can help.

Every failure of a dashboard call is a `DashboardError` (a `CockpitError`: one line a user can act on).
`http_error` turns a status and body into the right subclass. Each class says whether it is permanent
(`CockpitError.permanent`); `cockpit.core.errors.is_permanent` is the single answer, used by the command
line (`cockpit wait`, `cockpit logs --follow`) and the TUI's feeds alike, to "is it worth asking again?":
nothing answering, the request limit and a 5xx are retried; a refused token, a missing thing and any
other refusal are not.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from cockpit.core.errors import CockpitError

OLD_LOG_ERROR = b"[get_logs] Fetch log error:"
"""How older Ray starts a failed log read in text format (with status 200; Ray 2.60 answers 4xx/5xx)."""
GENERIC_500 = "Server got itself in trouble"
"""aiohttp's whole answer when a handler raised: some Ray versions (2.47: a state request with a column
it does not filter on, a log read racing a closed stream) send nothing better."""


class DashboardError(CockpitError):
    """The dashboard could not answer; the message says why in one sentence."""

    status: int | None = None


class DashboardUnreachable(DashboardError):
    """Nothing answered at the dashboard address (cluster down, wrong port, tunnel dropped): transient,
    the head may be starting or the link coming back."""

    permanent = False


class DashboardOff(DashboardError):
    """The head runs Ray without its dashboard (`ray start --head --include-dashboard=false`, as Ray
    advises for large clusters): what only the dashboard serves (jobs, logs, actors) cannot be had there.
    Permanent: only restarting Ray with its dashboard brings it. Nodes and join progress still come, over
    SSH from the head's own Ray (`cockpit.core.connect.without_dashboard`)."""


class AuthenticationRequired(DashboardError):
    """401: no token was sent to a cluster that wants one (permanent: the user must give one)."""

    status = 401


class AuthenticationRejected(DashboardError):
    """403: the token sent is not the cluster's (permanent: asking again sends the same token)."""

    status = 403


class NotFound(DashboardError):
    """404 (or Ray 2.47's 500 for a missing log file): the thing asked for is not there."""

    status = 404


class RateLimited(DashboardError):
    """429: the dashboard's limit of concurrent state requests (log streams count) is reached."""

    status = 429
    permanent = False


class LogStalled(DashboardUnreachable):
    """A log stream stopped sending while it resent bytes it had sent before (`stream_log(replay_bytes=)`)."""


class ProfilingDisabled(DashboardError):
    """The head refuses stack and profile requests (`RAY_DASHBOARD_ENABLE_PROFILING` is not 1 there)."""


TRANSIENT_STATUSES = frozenset({500, 502, 503, 504})
"""Answers that a later try may not get: a dashboard module restarting, a proxy in front of a head that
is not up yet, Ray 2.47's bare 500 for a log read racing a closed stream."""


class RequestRejected(DashboardError):
    """The dashboard answered 4xx/5xx with a reason, or something the cockpit cannot read. Permanent,
    unless its status is one of TRANSIENT_STATUSES."""

    body: str = ""
    """The whole answer (the message shown is its last line)."""

    def __init__(self, message: str, status: int | None = None, body: str = "") -> None:
        super().__init__(message, permanent=status not in TRANSIENT_STATUSES)
        self.status = status
        self.body = body


class SelectorError(CockpitError):
    """An actor or node selector that names none, or several (`cockpit.core.cluster.selectors`): one
    line, the candidates in it; permanent (the same text names the same things)."""


def old_log_error(body: bytes, path: str) -> DashboardError:
    """The failure an older Ray wrote into a log answer's body: `NotFound` when the file is not there."""
    text = body.decode("utf-8", "replace")[len(OLD_LOG_ERROR) :].strip().splitlines()
    reason = text[0] if text else "unknown error"
    if (
        "not found" in reason.lower()
        or "does not exist" in reason.lower()
        or "no such file" in reason.lower()
    ):
        return NotFound(f"{path}: {reason}")
    return DashboardError(f"the dashboard could not read that log ({path}): {reason}")


def http_error(status: int, path: str, body: bytes) -> DashboardError:
    """The error for an HTTP error answer: one line, its reason the last meaningful line of the body."""
    text = body.decode("utf-8", errors="replace").strip()
    reason = text
    try:
        doc = json.loads(text)
        if isinstance(doc, Mapping) and doc.get("msg"):
            reason = str(doc["msg"])
    except ValueError:
        pass
    # Tracebacks end in their message; keep the last meaningful line, never a lone "." or "".
    lines = [ln.strip() for ln in reason.splitlines() if len(ln.strip()) > 1]
    reason = lines[-1][:300] if lines else f"HTTP {status}"
    if status == 401:
        return AuthenticationRequired(
            "the cluster uses token authentication: pass --token-file FILE or set RAY_AUTH_TOKEN."
        )
    if status == 403 and "profiling is disabled" in text.lower():
        return ProfilingDisabled(
            "the head does not serve stacks (RAY_DASHBOARD_ENABLE_PROFILING=1 is not set on the head)."
        )
    if status == 403:
        return AuthenticationRejected(
            "the dashboard rejected the token: check --token-file / RAY_AUTH_TOKEN "
            "against `ray get-auth-token` on the head."
        )
    if status == 404 or (status == 500 and "file is not found" in reason.lower()):
        # Ray 2.47 answers a missing log file with a 500 ("A file is not found at: ...").
        return NotFound(f"not found: {path} ({reason}).")
    if status == 500 and reason == GENERIC_500:
        return RequestRejected(
            f"the dashboard failed on {path} and gave no reason (HTTP 500); the head's dashboard logs "
            "(dashboard*.log in its session's logs) say why.",
            status=status,
            body=text,
        )
    if status == 429:
        return RateLimited(
            f"the dashboard is at its limit of concurrent requests ({reason}); retrying later."
        )
    return RequestRejected(
        f"the dashboard refused {path} (HTTP {status}): {reason}", status=status, body=text
    )
