"""Provides which processes a stacks take covers: a job's alive actors, the workers running its tasks and
its driver (`--job`); one actor (`--actor`); every alive worker of a node (`--node`); or every alive
worker of the cluster and the drivers of the running jobs. Each member carries what the cluster says it
is (actor, role, node), for the groups. `--actor` and `--node` are selectors of the one grammar
(`cockpit.core.cluster.selectors`), among what is alive.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cockpit.core.actors.roles import role_of
from cockpit.core.cluster.selectors import find_actor, pick_node
from cockpit.core.doctor.errors import SelectionError as SelectionError
from cockpit.core.doctor.stacks import Member
from cockpit.core.snapshots import ActorRow, JobRow, NodeSnapshot, match_job

if TYPE_CHECKING:
    from cockpit.core.cluster.dashboard import DashboardClient

MAX_PROCESSES = 2000
"""Processes asked for at once (the list calls' limit); more is said in a note."""

# -- which processes -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Selection:
    members: tuple[Member, ...]
    nodes: dict[str, NodeSnapshot]
    """Node id -> node, for every node a member is on."""
    notes: tuple[str, ...] = ()
    what: str = ""
    """`job 02000000`, `actor RolloutWorker_0`, `node 1a2b3c4d`, `the cluster`."""
    head_ip: str = ""
    """The head's IP (its machine is reached on the SSH connection itself, the others through it)."""


def _actor_member(actor: ActorRow, nodes: dict[str, NodeSnapshot]) -> Member:
    node = nodes.get(actor.node_id)
    return Member(
        pid=actor.pid or 0,
        node_id=actor.node_id,
        node_ip=node.ip if node else "",
        hostname=node.hostname if node else "",
        kind="actor",
        actor_id=actor.actor_id,
        actor_name=actor.name,
        class_name=actor.class_name.rsplit(".", 1)[-1],
        role=role_of(actor.class_name, actor.name),
        job_id=actor.job_id,
    )


def _plain_member(
    pid: int, node_id: str, nodes: dict[str, NodeSnapshot], kind: str, job_id: str = ""
) -> Member:
    node = nodes.get(node_id)
    return Member(
        pid=pid,
        node_id=node_id,
        node_ip=node.ip if node else "",
        hostname=node.hostname if node else "",
        kind=kind,
        job_id=job_id,
    )


def _driver(job: JobRow, nodes: dict[str, NodeSnapshot]) -> Member | None:
    if not job.driver_pid or not job.driver_node_id or job.terminal:
        return None
    return _plain_member(job.driver_pid, job.driver_node_id, nodes, "driver", job.job_id)


async def select(
    client: DashboardClient, job: str | None = None, actor: str | None = None, node: str | None = None
) -> Selection:
    """The processes to dump, each with what the cluster says it is.

    Raises:
        SelectorError: no alive actor or node, or several, answer to ACTOR or NODE.
        SelectionError: the job is not there, or has no process alive.
    """
    all_nodes = await client.nodes()
    nodes = {n.node_id: n for n in all_nodes if n.alive}
    notes: list[str] = []
    members: dict[tuple[str, int], Member] = {}

    def add(member: Member) -> None:
        if member.pid > 0 and member.node_id in nodes:
            key = (member.node_id, member.pid)
            if key not in members or members[key].kind == "worker":
                members[key] = member

    def truncated(listing: Any, what: str) -> None:
        if listing.meta.limited or len(listing.rows) >= MAX_PROCESSES:
            notes.append(f"only the first {len(listing.rows)} {what} were asked for")

    if actor is not None:
        chosen_actor = await find_actor(client, actor, alive_only=True)
        add(_actor_member(chosen_actor, nodes))
        what = f"actor {chosen_actor.name or chosen_actor.actor_id[:12]}"
    elif job is not None:
        row = match_job(await client.jobs(), job)
        if row.terminal:
            raise SelectionError(
                f"job {row.key} has ended ({row.status}): no process left to take stacks of."
            )
        if not row.job_id:
            raise SelectionError(f"job {row.key} has no driver yet ({row.status}); try again when it runs.")
        driver = _driver(row, nodes)
        if driver is not None:
            add(driver)
        actors = await client.actors(
            filters=[("job_id", "=", row.job_id), ("state", "=", "ALIVE")], limit=MAX_PROCESSES
        )
        truncated(actors, "actors")
        for a in actors.rows:
            add(_actor_member(a, nodes))
        tasks = await client.tasks(
            filters=[("job_id", "=", row.job_id), ("state", "=", "RUNNING")], limit=MAX_PROCESSES
        )
        truncated(tasks, "running tasks")
        for t in tasks.rows:
            if t.worker_pid:
                add(_plain_member(t.worker_pid, t.node_id, nodes, "worker", row.job_id))
        what = f"job {row.key}"
    else:
        if node is not None:
            chosen = pick_node(node, nodes.values(), alive_only=True)
            nodes_wanted = {chosen.node_id}
            what = f"node {chosen.hostname or chosen.ip} ({chosen.node_id[:8]})"
        else:
            nodes_wanted = set(nodes)
            what = "the cluster"
        workers = await client.workers(
            filters=[("is_alive", "=", "true"), ("worker_type", "=", "WORKER")], limit=MAX_PROCESSES
        )
        truncated(workers, "workers")
        actors = await client.actors(filters=[("state", "=", "ALIVE")], limit=MAX_PROCESSES)
        by_pid = {(a.node_id, a.pid): a for a in actors.rows if a.pid}
        for w in workers.rows:
            if w.node_id in nodes_wanted and w.pid:
                known = by_pid.get((w.node_id, w.pid))
                add(
                    _actor_member(known, nodes) if known else _plain_member(w.pid, w.node_id, nodes, "worker")
                )
        for j in await client.jobs():
            if j.status == "RUNNING" and (d := _driver(j, nodes)) and d.node_id in nodes_wanted:
                add(d)
    chosen_members = tuple(sorted(members.values(), key=lambda m: (m.node_id, m.pid)))
    if not chosen_members:
        raise SelectionError(f"{what} has no alive process to take stacks of.")
    used = {m.node_id: nodes[m.node_id] for m in chosen_members}
    head_ip = next((n.ip for n in nodes.values() if n.is_head), "")
    return Selection(members=chosen_members, nodes=used, notes=tuple(notes), what=what, head_ip=head_ip)
