"""Provides `ActorIndex`: the Actors screen's rows made cheap to filter and sort, 100,000 of them included.

The index is built once per fetched list, off the UI thread (O(rows): one lower-cased text per row and
per filterable column). On the UI thread a filter keystroke is one pass of substring tests over those
texts (no row is formatted), and a sort is one `sorted` over precomputed keys, cached per column, after
which filtering keeps the sorted order. The filter terms are those of `cockpit.core.actors.parse_query`
(`state:`, `role:`, `node:`, `job:`, `class:`, free words), matched here on what was fetched; the
dashboard was already asked to filter by the same terms when the list could not hold every actor.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cockpit.core.actors import ActorQuery, ActorView

SORT_COLUMNS = ("state", "role", "class", "name", "node", "gpus", "restarts", "age", "pid", "job", "id")
"""Every column the table sorts by, in the order `s` steps through them."""

STATE_ORDER = {"PENDING_CREATION": 0, "DEPENDENCIES_UNREADY": 1, "RESTARTING": 2, "ALIVE": 3, "DEAD": 4}
"""What needs a look first: stuck and restarting actors above the running ones, the dead last."""


@dataclass(slots=True)
class ActorIndex:
    """The rows of one fetch with their search texts; `order` filters and sorts them."""

    rows: tuple[ActorView, ...]
    states: tuple[str, ...]
    roles: tuple[str, ...]
    """Lower case; "" for an actor no rule knows."""
    classes: tuple[str, ...]
    """Lower case, the class name as Ray reports it."""
    hosts: tuple[str, ...]
    """Lower case "host|ip-less node id" for `node:` prefix matches."""
    jobs: tuple[str, ...]
    haystacks: tuple[str, ...]
    """Lower case: class, name, id, repr, role, host, state: what free words are looked for in."""
    positions: Mapping[str, int]
    """Actor id -> row number (keeps the cursor on its actor across refreshes)."""
    built_at: float = field(default_factory=time.time)
    _sorted: dict[tuple[str, bool], list[int]] = field(default_factory=dict)

    @classmethod
    def build(cls, rows: Sequence[ActorView]) -> ActorIndex:
        rows = tuple(rows)
        states, roles, classes, hosts, jobs, haystacks = [], [], [], [], [], []
        for view in rows:
            actor = view.actor
            role = (view.role or "").lower()
            cls_name = actor.class_name.lower()
            host = view.host.lower()
            states.append(actor.state)
            roles.append(role)
            classes.append(cls_name)
            hosts.append(f"{host}|{actor.node_id.lower()}")
            jobs.append(actor.job_id.lower())
            haystacks.append(
                f"{cls_name}|{actor.name.lower()}|{actor.actor_id.lower()}|{actor.repr_name.lower()}"
                f"|{role}|{host}|{actor.state.lower()}"
            )
        return cls(
            rows=rows,
            states=tuple(states),
            roles=tuple(roles),
            classes=tuple(classes),
            hosts=tuple(hosts),
            jobs=tuple(jobs),
            haystacks=tuple(haystacks),
            positions={view.actor.actor_id: i for i, view in enumerate(rows)},
        )

    def __len__(self) -> int:
        return len(self.rows)

    # -- sort --------------------------------------------------------------------------------------

    def sorted_order(self, column: str, reverse: bool = False) -> Sequence[int]:
        """Row numbers by COLUMN (ties by actor id, so the order is stable between polls); cached."""
        if column not in SORT_COLUMNS:
            raise ValueError(f"no column {column!r} (one of {', '.join(SORT_COLUMNS)})")
        cached = self._sorted.get((column, reverse))
        if cached is None:
            keys = self._keys(column)
            cached = sorted(range(len(self.rows)), key=keys.__getitem__, reverse=reverse)
            self._sorted[(column, reverse)] = cached
        return cached

    def _keys(self, column: str) -> list[Any]:
        rows = self.rows
        now = self.built_at
        key: Callable[[ActorView], Any]
        if column == "state":
            key = lambda v: (STATE_ORDER.get(v.actor.state, 5), v.actor.class_name, v.actor.actor_id)  # noqa: E731
        elif column == "role":
            key = lambda v: (v.role or "~", v.actor.class_name, v.actor.actor_id)  # noqa: E731
        elif column == "class":
            key = lambda v: (v.actor.class_name, v.actor.name, v.actor.actor_id)  # noqa: E731
        elif column == "name":
            key = lambda v: (v.actor.name or "~", v.actor.actor_id)  # noqa: E731
        elif column == "node":
            key = lambda v: (v.host or "~", v.actor.node_id, v.actor.actor_id)  # noqa: E731
        elif column == "gpus":
            key = lambda v: (-v.actor.gpus, v.actor.actor_id)  # noqa: E731
        elif column == "restarts":
            key = lambda v: (-v.actor.num_restarts, v.actor.actor_id)  # noqa: E731
        elif column == "age":
            key = lambda v: (-(now - v.started) if v.started else 0.0, v.actor.actor_id)  # noqa: E731
        elif column == "pid":
            key = lambda v: (v.actor.pid or 0, v.actor.actor_id)  # noqa: E731
        elif column == "job":
            key = lambda v: (v.actor.job_id, v.actor.actor_id)  # noqa: E731
        else:
            key = lambda v: v.actor.actor_id  # noqa: E731
        return [key(view) for view in rows]

    # -- filter ------------------------------------------------------------------------------------

    def order(
        self,
        query: ActorQuery,
        sort: str = "state",
        reverse: bool = False,
        job_ids: Mapping[str, str] | None = None,
    ) -> Sequence[int]:
        """Row numbers matching QUERY, in SORT order. JOB_IDS: submission id -> Ray job id, so that
        `job:raysubmit_...` (or a profile's submission id) finds the job's actors."""
        base = self.sorted_order(sort, reverse)
        picked: Sequence[int] = base
        if query.state:
            states = self.states
            picked = [i for i in picked if states[i] == query.state]
        if query.role:
            roles, role = self.roles, query.role.lower()
            picked = [i for i in picked if roles[i] == role]
        if query.class_name:
            classes, wanted = self.classes, query.class_name.lower()
            picked = [i for i in picked if classes[i] == wanted or classes[i].rsplit(".", 1)[-1] == wanted]
        if query.job:
            jobs, wanted = self.jobs, (job_ids or {}).get(query.job, query.job).lower()
            picked = [i for i in picked if jobs[i].startswith(wanted)]
        if query.node:
            hosts, wanted = self.hosts, query.node.lower()
            picked = [i for i in picked if _node_matches(hosts[i], wanted)]
        for word in query.words:
            haystacks, needle = self.haystacks, word.lower()
            picked = [i for i in picked if needle in haystacks[i]]
        return picked

    def position_of(self, actor_id: str, order: Sequence[int]) -> int | None:
        """Where the actor is in ORDER (None if it is not there)."""
        row = self.positions.get(actor_id)
        if row is None:
            return None
        if isinstance(order, range):
            return row if row in order else None
        try:
            return order.index(row) if isinstance(order, list) else list(order).index(row)
        except ValueError:
            return None

    # -- counts ------------------------------------------------------------------------------------

    def role_counts(self, order: Sequence[int] | None = None) -> Counter[str]:
        roles = self.roles
        return Counter(roles[i] or "other" for i in (range(len(roles)) if order is None else order))


def _node_matches(hosts: str, wanted: str) -> bool:
    """`node:` matches a host name or node id by prefix, as `cockpit.core.actors.matching_nodes` does."""
    host, _, node_id = hosts.partition("|")
    return host.startswith(wanted) or node_id.startswith(wanted)
