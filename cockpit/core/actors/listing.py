"""Provides the actor listing behind `cockpit actors` and the Actors screen: filters, counts, truncation.

A filter is typed as text (`state:ALIVE role:rollout node:host job:02000000 class:Foo free text`).
`parse_query` reads it; the terms Ray can filter on (state, job, class, node id) are sent to the
dashboard as its predicates, so the head returns only what is asked for; role and free text are matched
here, on what came back. Counts by state come from `/api/v0/actors/summarize`, which counts every actor
even when the list is cut at the limit (at most 10,000: the dashboard refuses more), and an `ActorList`
says "showing N of M" and which filter would narrow it.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from cockpit.core.actors.roles import DEFAULT_RULES, RoleRules
from cockpit.core.cluster.selectors import node_candidates
from cockpit.core.errors import CockpitError
from cockpit.core.snapshots import (
    NA,
    ActorRow,
    ActorSummary,
    Listing,
    ListMeta,
    Metric,
    NodeSnapshot,
    ProcessStat,
    WorkerRow,
)

if TYPE_CHECKING:
    from cockpit.core.cluster.answers import Filter
    from cockpit.core.cluster.dashboard import DashboardClient

ACTOR_STATES = ("DEPENDENCIES_UNREADY", "PENDING_CREATION", "ALIVE", "RESTARTING", "DEAD")
"""Ray's actor states (`ray.util.state.common.ActorState`)."""

MAX_LIMIT = 10_000
"""The dashboard refuses larger limits (RAY_MAX_LIMIT_FROM_API_SERVER)."""

DEFAULT_LIMIT = 1000

_HEX = re.compile(r"[0-9a-fA-F]+")

KEYS = ("state", "role", "node", "job", "class")
"""The `key:value` terms a filter text may hold; anything else is free text."""


@dataclass(frozen=True, slots=True)
class ActorQuery:
    """What to list. Empty strings mean "any"."""

    state: str = ""
    role: str = ""
    node: str = ""
    """A node selector (`cockpit.core.cluster.selectors`: a node id or its start, an IP, a host name or
    its start). A filter: every node it matches is kept."""
    job: str = ""
    """A Ray job id (`02000000`) or a submission id (looked up in the job list)."""
    class_name: str = ""
    words: tuple[str, ...] = ()
    """Free text: every word must appear in the class, name, id, role or host (case-insensitive)."""
    problems: tuple[str, ...] = ()
    """Terms that were not understood, in one phrase each (e.g. an unknown state)."""

    def text(self) -> str:
        """The query as filter text (`parse_query(q.text())` gives back q, problems aside)."""
        terms = [
            f"{key}:{value}"
            for key, value in (
                ("state", self.state),
                ("role", self.role),
                ("node", self.node),
                ("job", self.job),
                ("class", self.class_name),
            )
            if value
        ]
        return " ".join([*terms, *self.words])

    @property
    def client_side(self) -> bool:
        """Whether rows are filtered here after the dashboard answered (so the list may undercount)."""
        return bool(self.role or self.words)


def parse_query(text: str) -> ActorQuery:
    """Filter text to a query. Never raises: a term it cannot use is kept in `problems`.

    `state:alive` is upper-cased and checked against Ray's states; the last of a repeated key wins; a
    `key:` with no value is ignored; `other:thing` (an unknown key) is free text.
    """
    values: dict[str, str] = {}
    words: list[str] = []
    problems: list[str] = []
    for token in text.split():
        key, sep, value = token.partition(":")
        key = key.lower()
        if sep and key in KEYS:
            if value:
                values[key] = value
            continue
        words.append(token)
    state = values.get("state", "").upper()
    if state and state not in ACTOR_STATES:
        problems.append(f"unknown state {state!r} (one of {', '.join(ACTOR_STATES)})")
        state = ""
    return ActorQuery(
        state=state,
        role=values.get("role", "").lower(),
        node=values.get("node", ""),
        job=values.get("job", ""),
        class_name=values.get("class", ""),
        words=tuple(words),
        problems=tuple(problems),
    )


def server_filters(query: ActorQuery, node_ids: Sequence[str] | None = None) -> list[Filter]:
    """The part of QUERY the dashboard filters on (Ray ANDs them; string `=` is case-insensitive).

    NODE_IDS: the nodes the `node:` term resolved to; one is pushed down, several are matched here.
    """
    filters: list[Filter] = []
    if query.state:
        filters.append(("state", "=", query.state))
    if query.job:
        filters.append(("job_id", "=", query.job))
    if query.class_name:
        filters.append(("class_name", "=", query.class_name))
    if node_ids is not None and len(node_ids) == 1:
        filters.append(("node_id", "=", node_ids[0]))
    return filters


@dataclass(frozen=True, slots=True)
class ActorView:
    """One actor as the table shows it: the row, its role (None: unknown) and its node's host."""

    actor: ActorRow
    role: str | None
    host: str
    """The host name (or IP) of the node it runs on; "" when not placed or the node is unknown."""
    started: float | None = None
    """When its worker process started (posix seconds): the actor's age, as Ray 2.60's actor table has
    no start time. None when unknown (not running, or the worker list was not read)."""
    rss_bytes: Metric = NA
    """Its process's resident memory as its node last reported it; N/A when not read (`with_memory`)."""


@dataclass(frozen=True, slots=True)
class ActorList:
    """What `list_actors` found: the rows, how many there are in all, and what would narrow them."""

    rows: tuple[ActorView, ...]
    meta: ListMeta
    """The dashboard's funnel for the server-side part of the query."""
    query: ActorQuery
    by_state: Mapping[str, int] = field(default_factory=dict)
    """Counts by state of every actor the job, class and node terms match, however many were listed
    (from the summary; empty if it failed)."""
    by_class: Mapping[str, int] = field(default_factory=dict)
    """Counts by class of the same actors as `by_state` (roles are counted from these)."""
    matching: int | None = None
    """Actors matching the server-side filters in the whole cluster (None if unknown)."""
    narrow: tuple[str, ...] = ()
    """Filter terms that would cut the list down, each with its count ("state:ALIVE (812)")."""
    warnings: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        return self.meta.complete

    def describe(self) -> str:
        """One line: "showing 1000 of 25000 actors; narrow with state:ALIVE (812)", or "12 actors"."""
        shown = len(self.rows)
        total = self.meta.num_filtered if self.matching is None else self.matching
        if self.complete:
            line = f"{shown} actor{'s' * (shown != 1)}"
        elif self.query.client_side:
            line = f"showing {shown} matching among the first {self.meta.returned} of {total} actors"
        else:
            line = f"showing {shown} of {total} actors"
        if self.meta.truncated_at_source:
            line += f" (the cluster lists only {self.meta.num_after_truncation} of {self.meta.total})"
        if not self.complete and self.narrow:
            line += "; narrow with " + " or ".join(self.narrow)
        return line


def _words_match(view: ActorView, words: Sequence[str]) -> bool:
    haystack = " ".join(
        (
            view.actor.class_name,
            view.actor.name,
            view.actor.actor_id,
            view.actor.repr_name,
            view.role or "",
            view.host,
        )
    ).lower()
    return all(word.lower() in haystack for word in words)


def narrowing_terms(
    query: ActorQuery, summary: ActorSummary | None, rows: Sequence[ActorRow]
) -> tuple[str, ...]:
    """The filters worth suggesting: per dimension not yet filtered, its largest group that is a real cut.

    States and classes are counted over the whole cluster (summary); jobs only over the rows that came
    back (so their count is "at least").
    """
    out: list[str] = []
    if summary is not None:
        if not query.state:
            states = Counter(summary.by_state())
            if len(states) > 1:
                state, n = states.most_common(1)[0]
                out.append(f"state:{state} ({n})")
        if not query.class_name:
            classes = Counter({cls: sum(c.values()) for cls, c in summary.by_class.items()})
            if len(classes) > 1:
                cls, n = classes.most_common(1)[0]
                out.append(f"class:{cls} ({n})")
    if not query.job:
        jobs = Counter(row.job_id for row in rows if row.job_id)
        if len(jobs) > 1:
            job, n = jobs.most_common(1)[0]
            out.append(f"job:{job} ({n}+)")
    return tuple(out)


def actor_list(
    listing: Listing[ActorRow],
    query: ActorQuery,
    nodes: Iterable[NodeSnapshot] = (),
    summary: ActorSummary | None = None,
    rules: RoleRules = DEFAULT_RULES,
    node_ids: Sequence[str] | None = None,
    warnings: Sequence[str] = (),
    workers: Iterable[WorkerRow] = (),
) -> ActorList:
    """The rows of LISTING with roles and hosts, the client-side part of QUERY applied (pure).

    SUMMARY: counts filtered as the list was, the state filter aside (`server_filters` without it).
    NODE_IDS: the nodes the `node:` term resolved to (None: no node term).
    WORKERS: alive worker processes, matched to actors by node and pid for their start time.
    """
    hosts = {n.node_id: n.hostname or n.ip for n in nodes}
    started = {(w.node_id, w.pid): w.start_time for w in workers if w.is_alive and w.pid}
    views = []
    for row in listing.rows:
        view = ActorView(
            actor=row,
            role=rules.role(row.class_name, row.name),
            host=hosts.get(row.node_id, ""),
            started=started.get((row.node_id, row.pid)) if row.pid and row.state == "ALIVE" else None,
        )
        if query.role and (view.role or "") != query.role:
            continue
        if node_ids is not None and row.node_id not in node_ids:
            continue
        if query.words and not _words_match(view, query.words):
            continue
        views.append(view)
    if summary is not None:
        by_state = summary.by_state()
        by_class = {cls: sum(states.values()) for cls, states in summary.by_class.items()}
    elif listing.meta.complete:  # every actor the filters match is here: count them (no summary asked)
        by_state = dict(Counter(row.state for row in listing.rows))
        by_class = dict(Counter(row.class_name for row in listing.rows))
    else:
        by_state, by_class = {}, {}
    matching = None
    if summary is not None and (node_ids is None or len(node_ids) == 1):
        matching = by_state.get(query.state, 0) if query.state else summary.total
    return ActorList(
        rows=tuple(views),
        meta=listing.meta,
        query=query,
        by_state=by_state,
        by_class=by_class,
        matching=matching,
        narrow=narrowing_terms(query, summary, listing.rows),
        warnings=tuple(query.problems) + tuple(listing.warnings) + tuple(warnings),
    )


async def list_actors(
    client: DashboardClient,
    query: ActorQuery,
    limit: int = DEFAULT_LIMIT,
    nodes: Sequence[NodeSnapshot] | None = None,
    rules: RoleRules = DEFAULT_RULES,
    ages: bool = True,
    summary: bool = True,
) -> ActorList:
    """Actors matching QUERY, at most LIMIT (1..10,000) from the dashboard, with the cluster's counts.

    NODES: the node table if the caller has it (the Actors screen does); else it is fetched. The list,
    the summary and (AGES) the alive workers are asked for together; a failed summary only loses the
    counts, a failed worker list only the ages. Without SUMMARY (a caller that knows the list holds
    every actor) the counts are made from the list, and the head reads its actor table once, not twice.
    """
    limit = max(1, min(limit, MAX_LIMIT))
    if nodes is None:
        nodes = (await client.node_table()).rows
    node_ids: list[str] | None = None
    extra: list[str] = []
    if query.node:
        node_ids = [n.node_id for n in node_candidates(query.node, nodes)]
        if not node_ids:
            extra.append(f"no node matches {query.node!r}")
            empty = Listing[ActorRow](rows=(), meta=ListMeta(0, 0, 0, 0))
            return actor_list(empty, query, nodes, None, rules, node_ids, extra)
    if query.job and not _HEX.fullmatch(query.job):
        # A submission id (`raysubmit_...`, `test-demo`): actors carry the Ray job id (`02000000`).
        jobs = {job.submission_id: job.job_id for job in await client.jobs() if job.submission_id}
        if jobs.get(query.job):
            query = replace(query, job=jobs[query.job])
    filters = server_filters(query, node_ids)
    summary_filters = [f for f in filters if f[0] != "state"]
    worker_filters: list[Filter] = [("is_alive", "=", "True"), ("worker_type", "=", "WORKER")]
    listing, counted, alive = await asyncio.gather(
        client.actors(filters=filters, limit=limit),
        client.actor_summary(filters=summary_filters) if summary else _no_summary(),
        client.workers(filters=worker_filters, limit=MAX_LIMIT) if ages else _no_workers(),
        return_exceptions=True,
    )
    if isinstance(listing, BaseException):
        raise listing
    summarized: ActorSummary | None = None
    if isinstance(counted, ActorSummary):
        summarized = counted
    elif counted is None:
        pass
    elif isinstance(counted, Exception):
        extra.append(f"counts by state unavailable: {counted}")
    else:
        raise counted
    workers: tuple[WorkerRow, ...] = ()
    if isinstance(alive, Listing):
        workers = alive.rows
    elif isinstance(alive, Exception):
        extra.append(f"actor ages unavailable: {alive}")
    else:
        raise alive
    return actor_list(listing, query, nodes, summarized, rules, node_ids, extra, workers)


async def _no_summary() -> None:
    return None


async def _no_workers() -> Listing[WorkerRow]:
    return Listing(rows=(), meta=ListMeta(0, 0, 0, 0))


MEMORY_NODES = 64
"""Nodes whose processes are read for the listed actors' memory (one `/nodes/{id}` each, 8 at a time;
the nodes holding the most listed alive actors first): beyond them RSS stays N/A."""


async def actor_memory(
    client: DashboardClient, listing: ActorList, max_nodes: int = MEMORY_NODES
) -> dict[str, Metric]:
    """The RSS of LISTING's alive actors, by actor id, from their nodes' process tables (`/nodes/{id}`:
    each process's memory as the node's reporter read it, matched by node and pid). Ray 2.60's
    `/logical/actors` leaves `processStats` empty and the tables' `coreWorkerStats` too, so neither
    names the actor; a new process is listed only after the reporter's next round (tens of seconds). A
    node that cannot be read leaves its actors N/A."""
    per_node = Counter(v.actor.node_id for v in listing.rows if v.actor.state == "ALIVE" and v.actor.node_id)
    nodes = [node for node, _count in per_node.most_common(max_nodes)]
    gate = asyncio.Semaphore(8)

    async def read(node_id: str) -> tuple[ProcessStat, ...]:
        async with gate:
            try:
                return await client.node_processes(node_id)
            except CockpitError:
                return ()

    by_pid: dict[tuple[str, int], Metric] = {}
    for node, stats in zip(nodes, await asyncio.gather(*(read(node) for node in nodes)), strict=True):
        for stat in stats:
            by_pid[(node, stat.pid)] = stat.rss_bytes
    rss: dict[str, Metric] = {}
    for view in listing.rows:
        actor = view.actor
        if actor.state == "ALIVE" and actor.pid and (actor.node_id, actor.pid) in by_pid:
            rss[actor.actor_id] = by_pid[(actor.node_id, actor.pid)]
    return rss


def with_memory(listing: ActorList, rss: Mapping[str, Metric]) -> ActorList:
    """LISTING with each actor's RSS from RSS (by actor id; N/A where it has none)."""
    rows = tuple(replace(v, rss_bytes=rss.get(v.actor.actor_id, NA)) for v in listing.rows)
    return replace(listing, rows=rows)
