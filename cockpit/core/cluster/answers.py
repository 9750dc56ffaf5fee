"""Provides how the dashboard's answers are read and its requests spelled: state-API filters as query
parameters, ids as one URL path segment each, and every JSON answer turned into a snapshot (NA where a
value is missing or of the wrong type) or a `DashboardError`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import quote

from cockpit.core.cluster import parse
from cockpit.core.cluster.errors import NotFound, RequestRejected
from cockpit.core.cluster.json_items import Built, Streamed
from cockpit.core.snapshots import ClusterStatus, JobRow, Listing, LogIndex, NodeSnapshot

T = TypeVar("T")

Filter = tuple[str, str, str]
"""A state-API filter: (column, "=" or "!=", value)."""


# -- URLs ---------------------------------------------------------------------------------------------


def filter_params(filters: Iterable[Filter]) -> list[tuple[str, str]]:
    """State API filters as query parameters: all three keys for each, always (without
    `filter_predicates` the dashboard silently drops the filter)."""
    params: list[tuple[str, str]] = []
    for key, predicate, value in filters:
        if predicate not in ("=", "!="):
            raise ValueError(f"filter predicate must be '=' or '!=', not {predicate!r}")
        params += [("filter_keys", key), ("filter_predicates", predicate), ("filter_values", value)]
    return params


def path_segment(value: str) -> str:
    """VALUE as one segment of a URL path, every reserved character quoted ("/", "?" and "#" included).
    A lone surrogate is sent as its own bytes: it names nothing on the cluster rather than another id.

    Raises NotFound for "", "." and "..": no id is spelled so, and no spelling of them survives a URL
    library (`/api/jobs/%2E%2E/stop` is resolved to `/api/stop`)."""
    if value in ("", ".", ".."):
        raise NotFound(f"not found: {value!r} is not an id the dashboard knows.")
    return quote(value, safe="", errors="surrogatepass")


def sendable(params: Sequence[tuple[str, str]], path: str) -> None:
    """Refuse query values with no UTF-8 form (a lone surrogate): sent empty (as aiohttp did) they would
    name another file or filter without a word."""
    for key, value in params:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise RequestRejected(f"{key} {value!r} cannot be sent to {path}: not valid text.") from None


# -- answers ------------------------------------------------------------------------------------------


def envelope_data(doc: Any, path: str) -> Mapping[str, Any]:
    """The `data` of a `{result, msg, data}` envelope; `result: false` or another shape is an error."""
    if not isinstance(doc, Mapping):
        raise RequestRejected(f"unexpected answer from {path}.")
    if doc.get("result") is False:
        reason = " ".join(str(doc.get("msg") or "no reason given").split())[:300]
        raise RequestRejected(f"the dashboard refused {path}: {reason}")
    data = doc.get("data")
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise RequestRejected(f"unexpected answer from {path}.")
    return data


def state_listing(doc: Any, path: str, build: Callable[[Mapping[str, Any]], T]) -> Listing[T]:
    """A state-API list (`/api/v0/actors` ...): the rows BUILD makes of each object, and the truncation."""
    result = parse.as_mapping(envelope_data(doc, path).get("result"))
    items = result.get("result")
    if isinstance(items, Built):
        rows = tuple(items)
    else:
        rows = tuple(build(row) for row in parse.as_list(items) if isinstance(row, Mapping))
    warnings = [result.get("partial_failure_warning"), *parse.as_list(result.get("warnings"))]
    shown = tuple(" ".join(str(w).split()) for w in warnings if w)
    return Listing(rows=rows, meta=parse.list_meta(result, len(rows)), warnings=shown)


def node_summaries(doc: Any) -> tuple[NodeSnapshot, ...]:
    """`/nodes?view=summary`: a node with host and GPU stats per object of `data.summary`."""
    summary = envelope_data(doc, "/nodes").get("summary")
    if isinstance(summary, Built):
        return tuple(summary)
    return tuple(parse.node_from_summary(e) for e in parse.as_list(summary) if isinstance(e, Mapping))


def _node_of(entry: Any) -> NodeSnapshot | None:
    return parse.node_from_summary(entry) if isinstance(entry, Mapping) else None


node_summaries_streamed: Streamed[tuple[NodeSnapshot, ...]] = Streamed(
    ("data", "summary"), _node_of, node_summaries
)
"""`node_summaries`, reading the answer one node at a time."""


def state_listing_streamed(path: str, build: Callable[[Mapping[str, Any]], T]) -> Streamed[Listing[T]]:
    """`state_listing`, reading the answer one row at a time."""

    def item(row: Any) -> T | None:
        return build(row) if isinstance(row, Mapping) else None

    def finish(doc: Any) -> Listing[T]:
        return state_listing(doc, path, build)

    return Streamed(("data", "result", "result"), item, finish)


def cluster_status_of(doc: Any) -> ClusterStatus:
    return ClusterStatus(text=parse.as_str(envelope_data(doc, "/api/cluster_status").get("clusterStatus")))


def log_index_of(doc: Any, node_id: str) -> LogIndex:
    """`/api/v0/logs`: the node's files by kind (entries that are not lists of names are left out)."""
    result = parse.as_mapping(envelope_data(doc, "/api/v0/logs").get("result"))
    files = {str(k): tuple(map(str, v)) for k, v in result.items() if isinstance(v, list)}
    return LogIndex(node_id=node_id, files=files)


def version_of(doc: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in doc.items()} if isinstance(doc, Mapping) else {}


def auth_mode_of(doc: Any) -> str:
    return str(doc.get("authentication_mode", "disabled")) if isinstance(doc, Mapping) else "disabled"


PROBE_PREFIX = "cockpit-debugpy-probe-"
"""The submission ids of the cockpit's own probe jobs (`jobs.debugpy_probe`): a few seconds' job the
pre-flight of a post-mortem profile runs and deletes. Ray's job supervisor, still ending, can write a
probe's FAILED status back after the delete: it would show as a failed job the user never ran, and set off
a "job failed" alert."""


def jobs_of(doc: Any) -> tuple[JobRow, ...]:
    """`/api/jobs/`: every job but the cockpit's own probes (`PROBE_PREFIX`), newest first (anything but a
    list of objects reads as no jobs)."""
    rows = [parse.job_row(row) for row in parse.as_list(doc) if isinstance(row, Mapping)]
    rows = [row for row in rows if not row.submission_id.startswith(PROBE_PREFIX)]
    return tuple(sorted(rows, key=lambda j: j.start_time or 0.0, reverse=True))


def job_of(doc: Any, job_id: str) -> JobRow:
    if not isinstance(doc, Mapping):
        raise RequestRejected(f"unexpected answer for job {job_id!r}.")
    return parse.job_row(doc)


def submission_id_of(doc: Any) -> str:
    """The id a job submission answered with ("" when the answer has none)."""
    if not isinstance(doc, Mapping):
        return ""
    return parse.as_str(doc.get("submission_id") or doc.get("job_id"))


def answer_flag(doc: Any, key: str) -> bool:
    """A yes/no answer (`{"stopped": true}`); False when the answer is not an object."""
    return isinstance(doc, Mapping) and bool(doc.get(key))
