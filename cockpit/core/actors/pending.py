"""Provides "why is it not running": pending actors and placement groups, each set against free resources.

Actors in `PENDING_CREATION` / `DEPENDENCIES_UNREADY` / `RESTARTING` (waiting to be placed again after
their worker or node died) and placement groups `PENDING` / `RESCHEDULING`
get one sentence each: what they ask for, what the alive nodes have free (each node's total from the
node table minus what the autoscaler's report says is used), and why that is not enough: no node is big
enough at all (it can never be placed), a `STRICT_SPREAD` group needs more nodes than there are, a
`STRICT_PACK` group fits no single node, or the resources exist but others hold them. The placement
strategy is not in the State API; it is read from the "Pending Demands" of the `ray status` text, whose
infeasible lines are reported too, as they are written.
"""

from __future__ import annotations

import ast
import asyncio
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cockpit.core.snapshots import ActorRow, NodeSnapshot, NodeUsage, PlacementGroupRow

if TYPE_CHECKING:
    from cockpit.core.cluster.dashboard import DashboardClient

PENDING_ACTOR_STATES = ("PENDING_CREATION", "DEPENDENCIES_UNREADY", "RESTARTING")
"""An actor RESTARTING waits to be placed again like a new one: on a lost host, it may wait forever (an
actor pinned to that host by its `node:<IP>` resource)."""
PENDING_PG_STATES = ("PENDING", "RESCHEDULING")

SCHEDULING_RESOURCES = ("CPU", "GPU", "memory")
"""Resources whose used amount the autoscaler's report gives under the same name (it camelCases the rest)."""

_EPS = 1e-6

_DEMAND = re.compile(
    r"^\s*(?P<shapes>\{.*\} \* \d+)\s*\((?P<strategy>[A-Z_]+)\):\s*(?P<count>\d+)\+ pending placement"
)
_SHAPE = re.compile(r"(\{[^{}]*\}) \* (\d+)")
_TASK_DEMAND = re.compile(r"^\s*(?P<shape>\{[^{}]*\}):\s*(?P<count>\d+)\+ pending tasks/actors")

Bundle = Mapping[str, float]


@dataclass(frozen=True, slots=True)
class Demand:
    """One line of `Pending Demands:` in the `ray status` text."""

    line: str
    """The line as the cluster wrote it (stripped)."""
    bundles: tuple[Bundle, ...]
    """Every bundle it asks for, counts expanded."""
    strategy: str
    """`PACK`, `SPREAD`, `STRICT_PACK`, `STRICT_SPREAD`; "" for a task/actor demand."""


@dataclass(frozen=True, slots=True)
class StuckItem:
    """One thing that is not running, and why, in one sentence."""

    kind: str
    """`placement group`, `actor` or `demand`."""
    ident: str
    """The placement group or actor id ("" for a demand)."""
    name: str
    state: str
    job_id: str
    sentence: str
    infeasible: bool
    """True when no alive node could ever hold it (more nodes or bigger nodes are needed)."""
    count: int = 1
    """Identical actors are reported once, with their count."""


@dataclass(frozen=True, slots=True)
class PendingReport:
    items: tuple[StuckItem, ...]
    alive_nodes: int
    largest_free: Mapping[str, float]
    """The most of each resource free on any one alive node."""
    warnings: tuple[str, ...] = ()

    @property
    def stuck(self) -> bool:
        return bool(self.items)

    def lines(self) -> list[str]:
        if not self.items:
            return [f"nothing pending ({self.alive_nodes} alive nodes)"]
        return [item.sentence for item in self.items]


def amount(value: float) -> str:
    """8.0 -> "8", 0.5 -> "0.5"; memory in GiB."""
    return f"{value:g}"


def format_bundle(bundle: Bundle) -> str:
    """{'GPU': 8.0, 'CPU': 1.0} -> "{CPU: 1, GPU: 8}"."""
    return "{" + ", ".join(f"{res}: {_resource_amount(res, n)}" for res, n in sorted(bundle.items())) + "}"


def _resource_amount(res: str, value: float) -> str:
    if res in ("memory", "object_store_memory"):
        return f"{value / 2**30:.3g} GiB"
    return amount(value)


def parse_demands(status_text: str) -> tuple[Demand, ...]:
    """The `Pending Demands:` lines of the `ray status` text (placement groups and tasks/actors)."""
    out: list[Demand] = []
    inside = False
    for raw in status_text.splitlines():
        if raw.strip().startswith("Pending Demands:"):
            inside = True
            continue
        if not inside:
            continue
        if not raw.startswith(" "):
            break
        line = raw.strip()
        pg = _DEMAND.match(raw)
        if pg:
            bundles: list[Bundle] = []
            for shape, n in _SHAPE.findall(pg["shapes"]):
                bundles.extend([_literal_bundle(shape)] * int(n))
            out.append(Demand(line=line, bundles=tuple(bundles), strategy=pg["strategy"]))
            continue
        task = _TASK_DEMAND.match(raw)
        if task:
            out.append(Demand(line=line, bundles=(_literal_bundle(task["shape"]),), strategy=""))
    return tuple(out)


def _literal_bundle(text: str) -> Bundle:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return {}
    if not isinstance(value, dict):
        return {}
    return {str(k): float(v) for k, v in value.items() if isinstance(v, (int, float))}


def _key(bundles: Iterable[Bundle]) -> tuple[tuple[tuple[str, float], ...], ...]:
    """Bundles as a comparable multiset (zero amounts dropped, as Ray drops them from demands)."""
    return tuple(sorted(tuple(sorted((r, float(n)) for r, n in b.items() if n)) for b in bundles))


def _schedulable(resources: Mapping[str, float]) -> dict[str, float]:
    """A node's resources without the per-placement-group ones Ray adds (`GPU_group_0_<id>`)."""
    return {res: n for res, n in resources.items() if "_group_" not in res and not res.startswith("node:")}


def _fits(bundle: Bundle, room: Mapping[str, float]) -> bool:
    return all(room.get(res, 0.0) + _EPS >= need for res, need in bundle.items() if need)


def _sum(bundles: Iterable[Bundle]) -> dict[str, float]:
    total: dict[str, float] = {}
    for bundle in bundles:
        for res, n in bundle.items():
            total[res] = total.get(res, 0.0) + n
    return total


def _grouped(bundles: Sequence[Bundle]) -> str:
    """2 bundles of {GPU: 8}, 1 bundle of {CPU: 1}"""
    counts: dict[str, int] = {}
    for bundle in bundles:
        text = format_bundle(bundle)
        counts[text] = counts.get(text, 0) + 1
    return ", ".join(f"{n} bundle{'s' * (n != 1)} of {text}" for text, n in counts.items())


@dataclass(frozen=True, slots=True)
class _Capacity:
    totals: tuple[Mapping[str, float], ...]
    free: tuple[Mapping[str, float], ...]

    def most(self, res: str, of: str = "free") -> float:
        rooms = self.free if of == "free" else self.totals
        return max((room.get(res, 0.0) for room in rooms), default=0.0)

    def largest_free(self, resources: Iterable[str]) -> str:
        return ", ".join(f"{res} {_resource_amount(res, self.most(res))}" for res in sorted(set(resources)))

    def never_fits(self, bundle: Bundle) -> str:
        """Why no alive node could ever hold BUNDLE ("" when one could)."""
        if any(_fits(bundle, total) for total in self.totals):
            return ""
        short = [res for res, need in bundle.items() if self.most(res, "total") + _EPS < need]
        if short:
            res = sorted(short)[0]
            return (
                f"no node has {res} {_resource_amount(res, bundle[res])} "
                f"(the most on one node: {_resource_amount(res, self.most(res, 'total'))})"
            )
        return f"no single node has all of {format_bundle(bundle)}"

    def fits_now(self, bundle: Bundle) -> bool:
        return any(_fits(bundle, room) for room in self.free)


def _capacity(nodes: Iterable[NodeSnapshot], usage: Iterable[NodeUsage]) -> _Capacity:
    used = {u.node_id: u.used_total for u in usage}
    totals: list[Mapping[str, float]] = []
    free: list[Mapping[str, float]] = []
    for node in nodes:
        if not node.alive:
            continue
        total = _schedulable(node.resources_total)
        room = dict(total)
        for res, (in_use, _) in used.get(node.node_id.lower(), {}).items():
            if res in room and res in SCHEDULING_RESOURCES:
                room[res] = max(room[res] - in_use, 0.0)
        totals.append(total)
        free.append(room)
    return _Capacity(totals=tuple(totals), free=tuple(free))


def _pg_reason(pg: PlacementGroupRow, strategy: str, cap: _Capacity) -> tuple[str, bool]:
    """Why PG is not placed, and whether it never can be on these nodes."""
    bundles = [b for b in pg.bundles if any(b.values())]
    for bundle in bundles:
        why = cap.never_fits(bundle)
        if why:
            return f"{why}: it can never be placed on these nodes", True
    nodes = len(cap.totals)
    whole, everything = _sum(bundles), _sum(cap.totals)
    for res in sorted(whole):
        if whole[res] > everything.get(res, 0.0) + _EPS:
            return (
                f"needs {res} {_resource_amount(res, whole[res])} and the alive nodes have "
                f"{_resource_amount(res, everything.get(res, 0.0))} in all: "
                "it can never be placed on these nodes"
            ), True
    if strategy == "STRICT_SPREAD":
        able = sum(1 for total in cap.totals if any(_fits(b, total) for b in bundles))
        if len(bundles) > able:
            return (
                f"STRICT_SPREAD needs {len(bundles)} different nodes, {able} of the {nodes} alive "
                f"nodes can hold a bundle: it can never be placed on these nodes"
            ), True
    if strategy == "STRICT_PACK" and not any(_fits(whole, total) for total in cap.totals):
        return (
            f"STRICT_PACK needs {format_bundle(whole)} on one node and no node has that: "
            "it can never be placed on these nodes"
        ), True
    if all(cap.fits_now(b) for b in bundles):
        if not strategy:
            return (
                "the free resources would hold its bundles now; its strategy is not yet in `ray status` "
                "(the autoscaler reports every few seconds)"
            ), False
        return "the free resources would hold it now; the scheduler may still be placing it", False
    return "the resources exist but other actors or placement groups hold them", False


def _actor_reason(actor: ActorRow, pgs: Mapping[str, PlacementGroupRow], cap: _Capacity) -> tuple[str, bool]:
    if actor.placement_group_id:
        pg = pgs.get(actor.placement_group_id)
        if pg is not None:
            return (
                f"waits for its placement group `{pg.name or pg.placement_group_id[:12]}` ({pg.state})",
                False,
            )
    need = {res: n for res, n in actor.required_resources.items() if n}
    if need and not actor.placement_group_id:
        why = cap.never_fits(need)
        if why:
            return f"asks for {format_bundle(need)}; {why}: it can never be scheduled on these nodes", True
        if not cap.fits_now(need):
            return (
                f"asks for {format_bundle(need)}; largest free on any node: {cap.largest_free(need)}; "
                "others hold the rest"
            ), False
    if actor.state == "DEPENDENCIES_UNREADY":
        return "waits for its arguments (objects not yet computed) or its runtime environment", False
    return "resources are free: waiting for its worker process or runtime environment to start", False


def pending_report(
    actors: Iterable[ActorRow],
    placement_groups: Iterable[PlacementGroupRow],
    nodes: Iterable[NodeSnapshot],
    usage: Iterable[NodeUsage] = (),
    status_text: str = "",
    warnings: Sequence[str] = (),
) -> PendingReport:
    """One sentence for each pending placement group, group of identical pending actors and infeasible
    demand (pure: the inputs are what `fetch_pending` gets from the dashboard)."""
    nodes = tuple(nodes)
    cap = _capacity(nodes, usage)
    demands = parse_demands(status_text)
    strategies = {_key(d.bundles): d.strategy for d in demands if d.strategy}
    items: list[StuckItem] = []

    pgs = {pg.placement_group_id: pg for pg in placement_groups}
    for pg in pgs.values():
        if pg.state not in PENDING_PG_STATES:
            continue
        strategy = strategies.get(_key(pg.bundles), "")
        why, never = _pg_reason(pg, strategy, cap)
        resources = {res for b in pg.bundles for res in b}
        shown = f"`{pg.name}`" if pg.name else pg.placement_group_id[:12]
        sentence = (
            f"placement group {shown} {pg.state}: {_grouped(pg.bundles)}"
            + (f" ({strategy})" if strategy else "")
            + f"; largest free on any node: {cap.largest_free(resources) or 'nothing'}; {why}"
        )
        items.append(
            StuckItem(
                "placement group",
                pg.placement_group_id,
                pg.name,
                pg.state,
                pg.creator_job_id,
                sentence,
                never,
            )
        )

    groups: dict[tuple[str, str, str, str], list[ActorRow]] = {}
    reasons: dict[tuple[str, str, str, str], bool] = {}
    for actor in actors:
        if actor.state not in PENDING_ACTOR_STATES:
            continue
        why, never = _actor_reason(actor, pgs, cap)
        key = (actor.class_name, actor.state, actor.job_id, why)
        groups.setdefault(key, []).append(actor)
        reasons[key] = never
    for (class_name, state, job_id, why), members in groups.items():
        first = members[0]
        if len(members) == 1:
            label = f"actor {class_name}" + (f" `{first.name}`" if first.name else f" {first.actor_id[:12]}")
        else:
            label = f"{len(members)} actors {class_name}"
        items.append(
            StuckItem(
                "actor",
                first.actor_id,
                first.name,
                state,
                job_id,
                f"{label} {state}: {why}",
                reasons[(class_name, state, job_id, why)],
                len(members),
            )
        )

    explained = {_key(pg.bundles) for pg in pgs.values() if pg.state in PENDING_PG_STATES}
    explained |= {_key([a.required_resources]) for members in groups.values() for a in members}
    for demand in demands:
        if _key(demand.bundles) in explained:
            continue  # already said, with its name, above
        whys = [cap.never_fits(b) for b in demand.bundles]
        why = next((w for w in whys if w), "")
        if why:
            items.append(
                StuckItem(
                    "demand",
                    "",
                    "",
                    "INFEASIBLE",
                    "",
                    f"infeasible demand in `ray status`: {demand.line} ({why})",
                    True,
                )
            )

    every = {res for total in cap.totals for res in total if res in ("CPU", "GPU")}
    largest = {res: cap.most(res) for res in sorted(every)}
    return PendingReport(
        items=tuple(items), alive_nodes=len(cap.totals), largest_free=largest, warnings=tuple(warnings)
    )


async def fetch_pending(
    client: DashboardClient,
    limit: int = 1000,
    actors: Sequence[ActorRow] | None = None,
    nodes: Sequence[NodeSnapshot] | None = None,
) -> PendingReport:
    """The pending report of the cluster behind CLIENT: a few cheap GCS reads, asked for together.

    ACTORS: every actor of the cluster, when the caller just listed them all (the Actors screen): the
    pending ones are picked from them instead of asking the head, which would read its whole actor
    table once per state asked for. NODES: the node table, when the caller polls it anyway (the TUI):
    not asked for again (about 1 KB a node).
    """
    if actors is None:
        lists = await asyncio.gather(
            *(client.actors(filters=[("state", "=", s)], limit=limit) for s in PENDING_ACTOR_STATES)
        )
        stuck_actors = tuple(row for listing in lists for row in listing.rows)
        partial = [listing for listing in lists if not listing.meta.complete]
    else:
        stuck_actors = tuple(row for row in actors if row.state in PENDING_ACTOR_STATES)
        partial = []

    async def node_rows() -> Sequence[NodeSnapshot]:
        return nodes if nodes is not None else (await client.node_table()).rows

    (pending, rescheduling), (rows, usage, status) = await asyncio.gather(
        asyncio.gather(
            *(client.placement_groups(filters=[("state", "=", s)], limit=limit) for s in PENDING_PG_STATES)
        ),
        asyncio.gather(node_rows(), client.node_usage(), client.cluster_status()),
    )
    warnings = [f"pending actors: {listing.meta.describe()}" for listing in partial] + [
        f"{what}: {listing.meta.describe()}"
        for what, listing in (
            ("pending placement groups", pending),
            ("rescheduling placement groups", rescheduling),
        )
        if not listing.meta.complete
    ]
    return pending_report(
        actors=stuck_actors,
        placement_groups=(*pending.rows, *rescheduling.rows),
        nodes=rows,
        usage=usage,
        status_text=status.text,
        warnings=warnings,
    )
