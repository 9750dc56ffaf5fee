"""Provides the run of `cockpit check`: every check at once, each under its deadline, into one report.

The way in first (SSH to the head and its host key, the token, the dashboard and its Ray version), then
every machine of the cluster at once: one program per machine (`node_program`), started as the GPU agents
and the stacks are (a subprocess here for the local cluster; over SSH, on the head through the link and
on any other machine through a connection tunnelled through the head, with the same host-key rules). A
machine that does not answer by the deadline is one line; the others are not held back. Nothing is
left running: the programs are stopped and the connections to the nodes closed on every way out.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from cockpit.core.check.findings import CheckReport, Finding
from cockpit.core.check.node_program import (
    PTRACE_SCOPE_FILE,
    NodeFacts,
    node_program,
    parse_clock,
    parse_facts,
)
from cockpit.core.check.verdicts import CLOCK_TOLERANCE, MachineRun, machine_findings
from cockpit.core.check.way_in import connect_findings, dashboard_findings, fields_finding
from cockpit.core.cluster import versions
from cockpit.core.cluster.versions import Field
from cockpit.core.connect.connection import Connection, ConnectOptions, exposure_warning, open_connection
from cockpit.core.connect.programs import LocalProgram, NodeProgram, SshProgram
from cockpit.core.doctor.gather import FALLBACK_PYTHON, node_label
from cockpit.core.errors import CockpitError
from cockpit.core.snapshots import NodeSnapshot
from cockpit.core.targets import Target

DEADLINE = 30.0
"""Seconds each check may take (connecting, one dashboard answer, one machine's program)."""

ALL_FIELDS: tuple[Field, ...] = (
    versions.LABEL_SELECTOR,
    versions.ROCPROF,
    versions.PIP_INSTALL_OPTIONS,
    versions.CONDA_DIRECTORY,
    versions.PY_MODULES_PATH,
    *versions.LOCAL_URI.values(),
    *versions.TAR_GZ_URI.values(),
    *versions.TAR_XZ_URI.values(),
    versions.WHEEL_WORKING_DIR,
)
"""Every job field and runtime_env form that not every supported Ray accepts."""


def profile_fields(dirs: Sequence[Path] = ()) -> list[tuple[str, list[Field]]]:
    """Each profile the cockpit finds (DIRS: the config's `profile_dirs`) and the version-dependent fields
    its job request uses. Blocking (reads the files); a profile that does not load or render is left to
    `cockpit profiles check`."""
    from cockpit.core.jobs import profiles

    found, _problems = profiles.discover(dirs=dirs)
    out = []
    for profile in found:
        try:
            request = profiles.render(profile, mask=True, check_secrets=False)
        except CockpitError:
            continue
        out.append((profile.name, versions.version_fields(request)))
    return out


Progress = Callable[[str], None]


def _machines(nodes: Iterable[NodeSnapshot]) -> list[list[NodeSnapshot]]:
    """The alive nodes by machine (raylets that share an IP share a machine), the head's first, then by
    host name."""
    by_ip: dict[str, list[NodeSnapshot]] = {}
    for node in sorted((n for n in nodes if n.alive), key=lambda n: (not n.is_head, n.hostname, n.ip)):
        by_ip.setdefault(node.ip or node.node_id, []).append(node)
    return list(by_ip.values())


async def _read_machine(
    host: str,
    via: str,
    nodes: Sequence[NodeSnapshot],
    start: Callable[[], Any],
    deadline: float,
) -> MachineRun:
    ray_gpus = sum(n.logical_gpus for n in nodes)
    python = next((n.python for n in nodes if n.python), "")
    begun = time.time()
    try:
        program: NodeProgram = await asyncio.wait_for(start(), deadline)
    except asyncio.TimeoutError:
        return MachineRun(host, via, ray_gpus, python, start_error=f"no answer within {deadline:g} s")
    except Exception as exc:  # an SSH or OS error reaching the machine: its one line
        return MachineRun(host, via, ray_gpus, python, start_error=str(exc) or type(exc).__name__)
    # The program was written to the node by now, and the node reads its clock only once it has it
    # all: its clock line was taken between `sent` and `received` (the SSH handshake is not counted).
    sent = time.time()
    clock: float | None = None
    received = sent
    facts: NodeFacts | None = None
    reason = ""
    timed_out: float | None = None

    async def read() -> None:
        nonlocal clock, received, facts
        async for line in program.lines():
            if clock is None:
                clock = parse_clock(line)
                if clock is not None:
                    received = time.time()
                    continue
            facts = parse_facts(line)
            if facts is not None:
                return

    try:
        await asyncio.wait_for(read(), max(0.1, deadline - (time.time() - begun)))
    except asyncio.TimeoutError:
        timed_out = deadline
    except Exception as exc:  # the stream broke (a dropped SSH connection)
        reason = f"the connection broke ({exc or type(exc).__name__})"
    finally:
        with contextlib.suppress(Exception):
            await program.stop()
    return MachineRun(
        host,
        via,
        ray_gpus,
        python,
        facts=facts,
        reason=reason or program.reason,
        timed_out=timed_out if facts is None else None,
        clock=clock,
        sent=sent,
        received=received,
    )


def _starter(
    connection: Connection, nodes: Sequence[NodeSnapshot], head_ip: str, program: str
) -> tuple[str, Callable[[], Any]]:
    """How to start PROGRAM on the machine of NODES: (`local` | `head` | `node`, the starter)."""
    python = next((n.python for n in nodes if n.python), "")
    link = connection.link
    if link is None:
        return "local", lambda: LocalProgram.start(program, python or sys.executable)
    ip = nodes[0].ip
    host = None if ip == head_ip else ip
    return ("head" if host is None else "node"), lambda: SshProgram.start(
        lambda command: link.start_process(command, host=host, pool="stacks"),
        python or FALLBACK_PYTHON,
        program,
    )


async def _dashboard(
    connection: Connection, name: str, deadline: float
) -> tuple[list[Finding], str, str, tuple[NodeSnapshot, ...] | None]:
    """The token and dashboard findings, the Ray version, the session name and the nodes (None when
    the dashboard did not answer)."""
    client = connection.client

    async def ask(call: Any) -> Any:
        try:
            return await asyncio.wait_for(call, deadline)
        except asyncio.TimeoutError:
            from cockpit.core.cluster.errors import DashboardUnreachable

            return DashboardUnreachable(f"the dashboard did not answer within {deadline:g} s")
        except CockpitError as exc:
            return exc

    version, mode = await asyncio.gather(ask(client.version()), ask(client.auth_mode()))
    auth = mode if isinstance(mode, str) else None
    exposure = None
    if not isinstance(version, BaseException) and auth != "token":
        exposure = await ask(exposure_warning(connection))
        exposure = exposure if isinstance(exposure, str) else None
    findings = dashboard_findings(name, version, auth, exposure)
    if isinstance(version, BaseException):
        return findings, "", "", None
    info, nodes = await asyncio.gather(ask(client.cluster_info()), ask(client.nodes(fresh=True)))
    session = "" if isinstance(info, BaseException) else info.session_name
    if isinstance(nodes, BaseException):
        findings.append(Finding("nodes", name, "fail", str(nodes), "the head's dashboard logs say why"))
        return findings, version.get("ray_version", ""), session, None
    return findings, version.get("ray_version", ""), session, nodes


async def check(
    target: Target,
    options: ConnectOptions,
    *,
    deadline: float = DEADLINE,
    tolerance: float = CLOCK_TOLERANCE,
    profiles: Sequence[tuple[str, Sequence[Field]]] = (),
    scope_file: str = PTRACE_SCOPE_FILE,
    on_progress: Progress | None = None,
) -> CheckReport:
    """Every check of TARGET, each under DEADLINE seconds. PROFILES: the user's profiles and the fields
    they use (`profile_fields`), checked against the cluster's Ray. ON_PROGRESS is told what is being
    waited for, as it changes."""
    name = target.raw
    tell = on_progress or (lambda _text: None)
    findings: list[Finding] = []
    async with contextlib.AsyncExitStack() as stack:
        tell(f"connecting to {name}")
        try:
            connection: Connection = await asyncio.wait_for(
                stack.enter_async_context(open_connection(target, options)), deadline
            )
        except asyncio.TimeoutError:
            from cockpit.core.ssh.errors import SshError

            error: CockpitError = SshError(f"cannot connect to {name}: no answer within {deadline:g} s")
            return CheckReport(name, tuple(connect_findings(name, error) + _rest_skipped(name)))
        except CockpitError as exc:
            return CheckReport(name, tuple(connect_findings(name, exc) + _rest_skipped(name)))
        if connection.link is not None:
            findings.append(Finding("host key", name, "pass", "the head's host key matches known_hosts"))
            findings.append(Finding("ssh", name, "pass", "connected; the dashboard is tunnelled through it"))
        tell(f"asking the dashboard of {name}")
        found, ray_version, session, nodes = await _dashboard(connection, name, deadline)
        findings += found
        if nodes is None:
            return CheckReport(name, tuple([*findings, _nodes_skipped(name, "needs the dashboard")]))
        findings.append(fields_finding(name, ray_version, ALL_FIELDS, profiles))
        for node in nodes:
            if not node.alive:
                why = f" ({node.state_message})" if node.state_message else ""
                findings.append(
                    Finding("node", node_label(node), "skip", f"{node.state} in Ray{why}: not checked")
                )
        machines = _machines(nodes)
        if target.kind == "http":
            findings.append(
                _nodes_skipped(
                    name,
                    f"an http:// target has no way onto the {len(machines)} machines: give the head's SSH "
                    "host as TARGET to check them",
                )
            )
            return CheckReport(name, tuple(findings))
        head_ip = next((n.ip for n in nodes if n.is_head and n.alive), "")
        program = node_program(session, scope_file)
        if connection.link is not None:
            link = connection.link
            stack.push_async_callback(link.close_node_connections, "stacks")
        planned: list[Machine] = []
        for nodes_of_machine in machines:
            via, start = _starter(connection, nodes_of_machine, head_ip, program)
            planned.append((node_label(nodes_of_machine[0]), via, nodes_of_machine, start))
        runs = await all_machines(planned, deadline, tell)
    for run in runs:
        findings += machine_findings(run, tolerance)
    return CheckReport(name, tuple(findings))


Machine = tuple[str, str, Sequence[NodeSnapshot], Callable[[], Any]]
"""One machine to check: its label, how it is reached (`local`, `head`, `node`), its Ray nodes, and how
its program starts."""


async def all_machines(machines: Sequence[Machine], deadline: float, tell: Progress) -> list[MachineRun]:
    """Every machine's program at once, each under DEADLINE; TELL hears which are still awaited."""
    labels = [label for label, *_rest in machines]
    tasks = [
        asyncio.ensure_future(_read_machine(label, via, nodes, start, deadline))
        for label, via, nodes, start in machines
    ]
    try:
        pending = set(tasks)
        while pending:
            waiting = [label for label, task in zip(labels, tasks, strict=True) if task in pending]
            more = f" and {len(waiting) - 3} more" if len(waiting) > 3 else ""
            tell(
                f"{len(tasks) - len(pending)} of {len(tasks)} machines answered; waiting for "
                f"{', '.join(waiting[:3])}{more}"
            )
            _done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        return [task.result() for task in tasks]
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _nodes_skipped(name: str, why: str) -> Finding:
    return Finding("nodes", name, "skip", why)


def _rest_skipped(name: str) -> list[Finding]:
    return [
        Finding("token", name, "skip", "not reached"),
        Finding("dashboard", name, "skip", "not reached"),
        _nodes_skipped(name, "not reached"),
    ]
