"""Provides the gathering of stacks: which processes to dump, and py-spy run on every node at once.

Which processes: the job's alive actors, the workers running its tasks and its driver (`--job`); one
actor (`--actor`); every alive worker of a node (`--node`); or every alive worker of the cluster and the
drivers of the running jobs. Each carries what the cluster says it is (actor, role, node), for the groups.

How, in the order tried:
- `dashboard`: the head's own `/worker/traceback` (py-spy run by each node's agent), where the head
  allows it (`RAY_DASHBOARD_ENABLE_PROFILING=1`); a few requests at a time, within the head's limit.
- `ssh`: one SSH session per node (the head's connection, and through it the other nodes, like the GPU
  agent) running `stacks_program()` with the node's own Python: py-spy from next to that Python (it comes
  with `ray[default]`), for all of that node's pids at once, a few in parallel, one JSON line per pid as
  each is done. Nothing is written on the node.
- `local`: the same program as a subprocess, for the cluster `cockpit local up` started.

Nodes answer in parallel and independently: `gather` yields each process as it arrives, so a slow node
does not hold back the others' groups, and a node that has not answered by the deadline is named.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cockpit.core.cluster.errors import DashboardError, ProfilingDisabled
from cockpit.core.connect.programs import LocalProgram, SshProgram
from cockpit.core.doctor.errors import SelectionError, StackParseError
from cockpit.core.doctor.selection import Selection
from cockpit.core.doctor.stack_program import PYSPY_TIMEOUT, stacks_program
from cockpit.core.doctor.stacks import (
    Collector,
    Failure,
    Member,
    ProcessStack,
    StacksReport,
    parse_json,
    parse_text,
)
from cockpit.core.snapshots import NodeSnapshot

if TYPE_CHECKING:
    from cockpit.core.cluster.dashboard import DashboardClient
    from cockpit.core.connect.connection import Connection

DASHBOARD_PARALLEL = 8
"""`/worker/traceback` requests in flight at once: well inside the head's 100 concurrent requests."""
NODE_DEADLINE = 90.0
"""How long a node may take for all its processes before it is named as not answering."""
FALLBACK_PYTHON = "python3"
FAST_START = ("-I", "-S")
"""The program needs the standard library alone: no site packages, no user environment (a faster
start, and nothing of the node's PYTHONPATH runs before it)."""

# -- taking them ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Dumped:
    member: Member
    stack: ProcessStack


@dataclass(frozen=True)
class Failed:
    failure: Failure


@dataclass(frozen=True)
class NodeDone:
    node: str
    note: str = ""


Event = Dumped | Failed | NodeDone


def node_label(node: NodeSnapshot) -> str:
    return (
        f"{node.hostname or node.ip} [{node.ip}]" if node.hostname and node.ip else node.hostname or node.ip
    )


PTRACE_HELP = (
    "py-spy may not read other processes there{scope}: ask the admin for `sysctl kernel.yama.ptrace_scope=0` "
    "(or CAP_SYS_PTRACE for py-spy), or run the workers so that py-spy may attach (sudo py-spy, or Ray's "
    "RAY_DASHBOARD_ENABLE_PROFILING=1 on the head with passwordless sudo for py-spy)"
)


def explain(error: str, scope: str = "") -> str:
    """One line for a py-spy error: what it means and, for a refused ptrace, what to do."""
    low = error.lower()
    if (
        "permission denied" in low
        or "operation not permitted" in low
        or "os error 1)" in low
        or "os error 13" in low
    ):
        shown = f" (kernel.yama.ptrace_scope = {scope})" if scope and scope != "0" else ""
        return PTRACE_HELP.format(scope=shown)
    if "failed to get process executable name" in low or "no such process" in low or "os error 3)" in low:
        return "the process has exited"
    if "failed to find python version" in low or "failed to find a python interpreter" in low:
        return "not a Python process py-spy understands"
    return error


async def _dashboard_node(
    client: DashboardClient,
    members: Sequence[Member],
    native: bool,
    gate: asyncio.Semaphore,
    put: Callable[[Event], Any],
) -> None:
    """One node's processes through the head's `/worker/traceback`, a few requests at a time overall.

    Raises:
        ProfilingDisabled: the head refuses (the first answer says so).
    """

    async def one(member: Member) -> None:
        label = member.hostname or member.node_ip
        async with gate:  # each request's time counts from its turn, not from the queue
            try:
                text = await asyncio.wait_for(
                    client.worker_traceback(member.pid, member.node_id, native=native, ip=member.node_ip),
                    PYSPY_TIMEOUT + 10,
                )
                stack = parse_text(text)
            except ProfilingDisabled:
                raise
            except asyncio.TimeoutError:
                await put(
                    Failed(Failure(label, member.pid, "the head's agent did not answer in time", member))
                )
                return
            except (DashboardError, StackParseError) as exc:
                await put(Failed(Failure(label, member.pid, explain(str(exc)), member)))
                return
        await put(Dumped(_titled(member, stack.title), stack))

    tasks = [asyncio.create_task(one(m)) for m in members]
    try:
        await asyncio.gather(*tasks)
    finally:  # one refusal (or a cancel) ends the others too: no request outlives the take
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _titled(member: Member, title: str) -> Member:
    if member.title or not title:
        return member
    return Member(**{**{f: getattr(member, f) for f in Member.__dataclass_fields__}, "title": title[:200]})


async def _from_program(
    label: str, members: Sequence[Member], start: Callable[[str], Any], native: bool
) -> AsyncIterator[Event]:
    """One node's processes through `stacks_program` (over SSH or as a local subprocess)."""
    by_pid = {m.pid: m for m in members}
    try:
        agent = await start(stacks_program(list(by_pid), native))
    except Exception as exc:  # an SSH or OS error starting it: the node's one line
        yield Failed(Failure(label, 0, f"cannot start py-spy there ({exc})"))
        return
    seen: set[int] = set()
    scope = ""
    try:
        async for line in agent.lines():
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if not isinstance(doc, dict):
                continue
            if doc.get("hello"):
                scope = str(doc.get("ptrace_scope") or "")
                if not doc.get("py_spy"):
                    yield Failed(
                        Failure(
                            label,
                            0,
                            "py-spy is not installed next to the node's Python "
                            "(it comes with ray[default]; pip install py-spy)",
                        )
                    )
                    return
                continue
            pid = doc.get("pid")
            member = by_pid.get(pid) if isinstance(pid, int) else None
            if member is None or member.pid in seen:
                continue
            seen.add(member.pid)
            title = str(doc.get("title") or "")
            if "threads" in doc:
                try:
                    stack = parse_json(json.dumps(doc["threads"]), title)
                    if doc.get("cut"):
                        stack = dataclasses.replace(stack, cut=True)
                except StackParseError as exc:
                    yield Failed(Failure(label, member.pid, str(exc), member))
                    continue
                yield Dumped(_titled(member, title), stack)
            else:
                yield Failed(
                    Failure(
                        label, member.pid, explain(str(doc.get("error") or "py-spy failed"), scope), member
                    )
                )
    except Exception as exc:  # the stream broke (a dropped SSH connection)
        yield Failed(Failure(label, 0, f"the connection broke ({exc or type(exc).__name__})"))
        return
    finally:
        with contextlib.suppress(Exception):
            await agent.stop()
    if not seen and len(by_pid) > 0:
        yield Failed(Failure(label, 0, agent.reason or "py-spy gave no answer"))
        return
    for pid in by_pid.keys() - seen:
        yield Failed(Failure(label, pid, agent.reason or "py-spy gave no answer", by_pid[pid]))


async def _profiling_on(client: DashboardClient) -> bool:
    try:
        return bool(await client.profiling_enabled())
    except DashboardError:
        return False


async def gather(
    connection: Connection,
    selection: Selection,
    native: bool = False,
    via: str = "auto",
    local: bool = False,
    deadline: float = NODE_DEADLINE,
) -> AsyncIterator[tuple[Collector, Event | None]]:
    """Take the stacks of SELECTION's members; yields the collector after each event (None: the start).

    VIA: `auto` (the dashboard where the head allows it, else the nodes), `dashboard` or `ssh`
    (`ssh` on a local cluster: a subprocess on this machine). LOCAL: the target is the local cluster.

    Raises:
        ProfilingDisabled: VIA is `dashboard` and the head refuses.
        SelectionError: no way to reach the nodes (an http:// target with profiling off).
    """
    client = connection.client
    # One session per machine: raylets that share an IP share its processes (a local cluster's nodes, or
    # several raylets on one big host), so one py-spy program serves them all.
    by_node: dict[str, list[Member]] = {}
    machine: dict[str, NodeSnapshot] = {}
    for member in selection.members:
        node = selection.nodes[member.node_id]
        key = node.ip or node.node_id
        by_node.setdefault(key, []).append(member)
        machine.setdefault(key, node)
    labels = {key: node_label(machine[key]) for key in by_node}
    collector = Collector(expected={labels[n]: by_node[n] for n in by_node}, notes=list(selection.notes))

    use_dashboard = via == "dashboard" or (via == "auto" and await _profiling_on(client))
    if not use_dashboard and connection.link is None and not local:
        raise SelectionError(
            "the head does not serve stacks (RAY_DASHBOARD_ENABLE_PROFILING=1 is not set on it) and an "
            "http:// target has no SSH to run py-spy on the nodes: use the SSH host as TARGET"
        )
    collector.source = "dashboard" if use_dashboard else ("local" if connection.link is None else "ssh")
    collector.notes.insert(
        0,
        {
            "dashboard": "taken by the head's agents (/worker/traceback)",
            "ssh": "taken with py-spy over SSH, one session per node",
            "local": "taken with py-spy on this machine (the local cluster)",
        }[collector.source],
    )
    yield collector, None

    queue: asyncio.Queue[Event] = asyncio.Queue()
    gate = asyncio.Semaphore(DASHBOARD_PARALLEL)

    async def node_task(node_id: str) -> None:
        label = labels[node_id]
        node = machine[node_id]

        async def run() -> None:
            if use_dashboard:
                await _dashboard_node(client, by_node[node_id], native, gate, queue.put)
            else:
                starter = _starter(connection, node, selection.head_ip)
                async for event in _from_program(label, by_node[node_id], starter, native):
                    await queue.put(event)

        try:
            # The head's requests have their own limit each (they queue for a turn); a node's program
            # has the node's deadline.
            await (run() if use_dashboard else asyncio.wait_for(run(), deadline))
        except asyncio.TimeoutError:
            pass
        else:
            await queue.put(NodeDone(label))

    tasks = {asyncio.create_task(node_task(n)): n for n in by_node}
    try:
        pending: set[asyncio.Task[Any]] = set(tasks)
        while pending or not queue.empty():
            if queue.empty():
                getter: asyncio.Task[Any] = asyncio.create_task(queue.get())
                try:
                    done, _ = await asyncio.wait({getter, *pending}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    if not getter.done():
                        getter.cancel()
                        with contextlib.suppress(asyncio.CancelledError):
                            await getter
                for t in done - {getter}:
                    pending.discard(t)
                    t.result()  # a ProfilingDisabled or a bug surfaces here
                if getter.cancelled() or not getter.done():
                    continue
                event = getter.result()
            else:
                event = queue.get_nowait()
            _collect(collector, event)
            yield collector, event
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if connection.link is not None and not use_dashboard:
            await connection.link.close_node_connections("stacks")


def _collect(collector: Collector, event: Event) -> None:
    if isinstance(event, Dumped):
        collector.dumps.append((event.member, event.stack))
    elif isinstance(event, Failed):
        collector.failures.append(event.failure)
        if not event.failure.pid:
            collector.done_nodes.add(event.failure.node)
    elif isinstance(event, NodeDone):
        collector.done_nodes.add(event.node)


def _starter(connection: Connection, node: NodeSnapshot, head_ip: str) -> Callable[[str], Any]:
    link = connection.link
    python = node.python or FALLBACK_PYTHON
    if link is None:  # the local cluster: its nodes are this machine
        local_python = node.python or sys.executable
        return lambda program: LocalProgram.start(program, local_python, flags=FAST_START)
    host = None if node.ip == head_ip else node.ip
    return lambda program: SshProgram.start(
        lambda cmd: link.start_process(cmd, host=host, pool="stacks"), python, program, flags=FAST_START
    )


async def take(
    connection: Connection,
    selection: Selection,
    native: bool = False,
    via: str = "auto",
    local: bool = False,
    deadline: float = NODE_DEADLINE,
    on_update: Callable[[Collector], None] | None = None,
) -> StacksReport:
    """Every stack of SELECTION, grouped; ON_UPDATE is told after each process or node (for progress)."""
    collector: Collector | None = None
    async for collector, _event in gather(connection, selection, native, via, local, deadline):
        if on_update is not None:
            on_update(collector)
    assert collector is not None
    return collector.report()
