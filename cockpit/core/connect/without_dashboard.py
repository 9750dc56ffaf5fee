"""Provides a head that runs Ray without its dashboard (`ray start --head --include-dashboard=false`, as
Ray's maintainers advise for large clusters): how the cockpit tells it from a dashboard that does not
answer, and the cluster's nodes read from the head's own Ray over SSH instead.

How it is told: when nothing answers at the dashboard port, a small program of the standard library is
run on the head (the way the GPU agent and the stacks taker travel: read from stdin, nothing written on
the node). It looks for the head's `dashboard.py` process that was given that port. With
`--include-dashboard=false`, Ray still starts that process but with `--disable-frontend` (and only its
usage-stats module), so no HTTP server listens: the flag is exactly what Ray made of the user's switch,
whatever the Ray version's defaults, temp dir or session. Ray's GCS key `DASHBOARD_ADDRESS` is no help:
that process writes it even without a server. No such process: the dashboard crashed or the port is
wrong, and the usual "cannot reach" stands.

How the nodes come: the same program then replaces itself (`exec`) with the head's own Ray Python (the
interpreter of that dashboard process, in its environment: the cluster's token, if it uses one, never
leaves the head) and asks the GCS for its node table with Ray's `GcsClient`, as `ray status` does
without a dashboard. The head's Ray talks to its own GCS, so no version matching is needed. Importing
Ray costs about 0.8 s of CPU on the head, so the program lives as long as the connection and prints one
JSON line per interval (the whole table when it changed, a heartbeat when not), instead of one process
per poll. The rows have the names of the dashboard's `/api/v0/nodes`, so they become the same
`NodeSnapshot`s (`parse.node_from_state`); host and GPU statistics come only from the dashboard (NA).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cockpit.core.cluster import parse
from cockpit.core.cluster.errors import DashboardUnreachable
from cockpit.core.connect.programs import NodeProgram, SshProgram
from cockpit.core.snapshots import NodeSnapshot

HEAD_PYTHON = "python3"
"""What runs the probe: any Python 3 of the head (the standard library alone); the nodes then come from
the Python Ray itself runs with."""
FAST_START = ("-I", "-S")
ANSWER_TIMEOUT_S = 20.0
"""How long the head may take to say whether it runs a dashboard, and then for its first nodes (Ray's
import, the GCS's answer)."""
FOLLOW_INTERVAL_S = 2.0
"""Seconds between the head's node lines (a heartbeat only while nothing changed)."""
GCS_TIMEOUT_S = 10
"""Seconds the head's Ray waits for its GCS's answer."""
STALE_AFTER_S = 30.0
"""No line for this long: the program is taken for lost and started again on the next ask."""


def sentence(head: str) -> str:
    """The one line the cockpit says about such a head, wherever something needs the dashboard."""
    return (
        f"Ray on {head} runs without its dashboard (--include-dashboard=false): nodes and join "
        "progress come over SSH; jobs, logs and actors need the dashboard."
    )


_NODES_PROGRAM = r"""
import json, os, sys, threading, time

_cfg = json.loads(sys.argv[1])
_parent = os.getppid()

def _watchdog():
    # The session on the head ended (the cockpit left): nothing stays behind.
    while True:
        time.sleep(1.0)
        if os.getppid() != _parent:
            os._exit(0)

threading.Thread(target=_watchdog, daemon=True).start()

def _say(doc):
    try:
        sys.stdout.write(json.dumps(doc) + "\n")
        sys.stdout.flush()
    except (BrokenPipeError, OSError):
        os._exit(0)

try:
    from ray._raylet import GcsClient
    from ray.core.generated import gcs_pb2
except Exception as exc:
    _say({"error": "the head's Ray cannot be imported by %s (%s)" % (sys.executable, exc)})
    sys.exit(1)

_state = gcs_pb2.GcsNodeInfo.GcsNodeState.Name
_client = GcsClient(address=_cfg["gcs"])

def _reason(info):
    if not info.HasField("death_info"):
        return ""
    field = info.death_info.DESCRIPTOR.fields_by_name["reason"]
    value = field.enum_type.values_by_number.get(info.death_info.reason)
    return value.name if value is not None else ""

def _rows():
    rows = []
    for info in _client.get_all_node_info(timeout=_cfg["timeout"]).values():
        rows.append({
            "node_id": info.node_id.hex(),
            "node_ip": info.node_manager_address,
            "node_name": info.node_name,
            "state": _state(info.state),
            "is_head_node": bool(info.is_head_node),
            "resources_total": dict(info.resources_total),
            "start_time_ms": int(info.start_time_ms),
            "end_time_ms": int(info.end_time_ms),
            "death_reason": _reason(info),
            "death_reason_message": info.death_info.reason_message if info.HasField("death_info") else "",
        })
    rows.sort(key=lambda row: row["node_id"])
    return rows

_last = None
while True:
    try:
        rows = _rows()
    except Exception as exc:
        text = (str(exc).strip().splitlines() or [type(exc).__name__])[-1]
        _say({"error": "the head's GCS did not answer: %s" % text[:300]})
    else:
        _say({"same": True} if rows == _last else {"nodes": rows})
        _last = rows
    time.sleep(_cfg["interval"])
"""

_PROBE_PROGRAM = r"""
import json, os, sys

def _say(doc):
    sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()

def _argv(pid):
    with open("/proc/%s/cmdline" % pid, "rb") as f:
        return [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]

def _dashboards():
    mine = os.getuid()
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            argv = _argv(pid)
            uid = os.stat("/proc/" + pid).st_uid
        except OSError:
            continue
        if not any(a.replace(os.sep, "/").endswith("/dashboard/dashboard.py") for a in argv[:6]):
            continue
        options = dict(a[2:].split("=", 1) for a in argv if a.startswith("--") and "=" in a)
        if options.get("port") == str(_PORT):
            found.append((uid != mine, int(pid), argv, options))
    return sorted(found)

def _environment(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            pairs = [item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item]
    except OSError:
        return dict(os.environ)
    return {k.decode("utf-8", "replace"): v.decode("utf-8", "replace") for k, v in pairs}

found = _dashboards()
if not found:
    _say({"dashboard": "absent"})
    sys.exit(0)
_other_user, pid, argv, options = found[0]
if "--disable-frontend" not in argv:
    _say({"dashboard": "on", "pid": pid})
    sys.exit(0)
python, gcs = argv[0], options.get("gcs-address", "")
_say({"dashboard": "off", "pid": pid, "python": python, "gcs": gcs})
if _FOLLOW is None:
    sys.exit(0)
env = _environment(pid)
env["PYTHONUNBUFFERED"] = "1"
config = json.dumps({"gcs": gcs, "interval": _FOLLOW, "timeout": _GCS_TIMEOUT})
try:
    os.execve(python, [python, "-c", _NODES_PROGRAM, config], env)
except OSError as exc:
    _say({"error": "cannot run the head's Ray Python %s (%s)" % (python, exc.strerror or exc)})
    sys.exit(1)
"""


def head_program(port: int, follow: float | None) -> str:
    """The probe for the dashboard process of PORT; with FOLLOW (seconds), then the node lines."""
    return (
        f"_PORT = {int(port)!r}\n_FOLLOW = {None if follow is None else float(follow)!r}\n"
        f"_GCS_TIMEOUT = {GCS_TIMEOUT_S!r}\n_NODES_PROGRAM = {_NODES_PROGRAM!r}\n{_PROBE_PROGRAM}"
    )


@dataclass(frozen=True)
class Probe:
    """What the head said of the dashboard process given the port: `off` (it runs without its frontend:
    `--include-dashboard=false`), `on` (it runs one: starting, or too busy to answer), `absent`."""

    dashboard: str
    python: str = ""
    gcs_address: str = ""


def probe_of(line: str) -> Probe:
    """The probe's first line read (anything else than its JSON: `absent`, the usual error stands)."""
    try:
        doc = json.loads(line)
    except ValueError:
        return Probe("absent")
    if not isinstance(doc, Mapping) or doc.get("dashboard") not in ("off", "on", "absent"):
        return Probe("absent")
    return Probe(str(doc["dashboard"]), str(doc.get("python") or ""), str(doc.get("gcs") or ""))


def state_message(reason: str, message: str) -> str:
    """Why a node died, as the dashboard words it (`compose_state_message` in Ray's dashboard)."""
    said = {
        "EXPECTED_TERMINATION": "Expected termination",
        "UNEXPECTED_TERMINATION": "Unexpected termination",
        "AUTOSCALER_DRAIN_PREEMPTED": "Terminated due to preemption",
        "AUTOSCALER_DRAIN_IDLE": "Terminated due to idle (no Ray activity)",
    }.get(reason, "")
    if message:
        return f"{said}: {message}" if said else message
    return said


def nodes_of(rows: object) -> tuple[NodeSnapshot, ...]:
    """The head's node rows as the dashboard's `/api/v0/nodes` would give them: head first, then by join
    time (the order `merge_nodes` keeps). Anything not a row is left out."""
    nodes = []
    for row in rows if isinstance(rows, list) else ():
        if not isinstance(row, Mapping):
            continue
        reason, message = row.get("death_reason"), row.get("death_reason_message")
        composed = state_message(
            reason if isinstance(reason, str) else "", message if isinstance(message, str) else ""
        )
        nodes.append(parse.node_from_state({**row, "state_message": composed}))
    return tuple(sorted(nodes, key=lambda n: (not n.is_head, n.start_time or 0.0, n.node_id)))


Starter = Callable[[str], Awaitable[NodeProgram]]
"""Starts a program (Python source) on the head and returns it running."""


class HeadOverSsh:
    """The head of an SSH target: asked why its dashboard does not answer and, when it runs Ray without
    one, followed for its nodes (one program on the head for as long as this object is open)."""

    def __init__(self, label: str, port: int, start: Starter) -> None:
        self.label = label
        self.port = port
        self._start = start
        self._program: NodeProgram | None = None
        self._reader: asyncio.Task[None] | None = None
        self._nodes: tuple[NodeSnapshot, ...] | None = None
        self._problem = ""
        self._heard_at = 0.0
        self._changed = asyncio.Event()
        self._lock = asyncio.Lock()

    async def why_unreachable(self) -> str | None:
        """The sentence to say when the head runs Ray without its dashboard, else None (the dashboard
        crashed, is starting, or the port is wrong: the usual error stands)."""
        try:  # a half-dead link may hang the start: bounded like the answer
            program = await asyncio.wait_for(self._start(head_program(self.port, None)), ANSWER_TIMEOUT_S)
        except Exception:  # a question on the side (SSH or asyncssh errors): the usual error stands
            return None
        try:
            first = await asyncio.wait_for(_first_line(program), ANSWER_TIMEOUT_S)
        except (asyncio.TimeoutError, OSError):
            return None
        finally:
            await program.stop()
        return sentence(self.label) if probe_of(first).dashboard == "off" else None

    async def nodes(self) -> tuple[NodeSnapshot, ...]:
        """The head's nodes as its GCS last gave them (the first ask starts the program and waits).

        Raises:
            DashboardUnreachable: the head's Ray did not answer (transient: the next ask starts again).
        """
        async with self._lock:
            if self._reader is not None and self._reader.done():
                await self._stop_program()
            if self._reader is not None and time.monotonic() - self._heard_at > STALE_AFTER_S:
                await self._stop_program()
                raise DashboardUnreachable(
                    f"the head's Ray on {self.label} said nothing for {STALE_AFTER_S:.0f} s; asking again."
                )
            if self._reader is None:
                await self._begin()
            if self._nodes is None:
                await self._wait_first()
            assert self._nodes is not None
            return self._nodes

    async def _begin(self) -> None:
        self._nodes, self._problem = None, ""
        self._changed.clear()
        self._heard_at = time.monotonic()
        try:
            self._program = await asyncio.wait_for(
                self._start(head_program(self.port, FOLLOW_INTERVAL_S)), ANSWER_TIMEOUT_S
            )
        except Exception as exc:  # an SSH or OS error starting it (asyncssh's own too): one sentence
            reason = str(exc) or f"no session within {ANSWER_TIMEOUT_S:.0f} s"
            raise DashboardUnreachable(f"cannot ask the head's Ray on {self.label}: {reason}") from None
        self._reader = asyncio.get_running_loop().create_task(self._read(self._program))

    async def _wait_first(self) -> None:
        """Until the first nodes came, the program ended, or `ANSWER_TIMEOUT_S` passed (the probe's line
        and the GCS's errors come before)."""
        deadline = time.monotonic() + ANSWER_TIMEOUT_S
        while self._nodes is None and self._reader is not None and not self._reader.done():
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), max(0.0, deadline - time.monotonic()))
            except asyncio.TimeoutError:
                self._problem = self._problem or f"no answer within {ANSWER_TIMEOUT_S:.0f} s"
                break
        if self._nodes is None:
            problem = self._problem
            await self._stop_program()
            raise DashboardUnreachable(f"the head's Ray on {self.label} gave no nodes ({problem}).")

    async def _read(self, program: NodeProgram) -> None:
        try:
            async for line in program.lines():
                self._heard_at = time.monotonic()
                try:
                    doc = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(doc, Mapping):
                    continue
                if "nodes" in doc:
                    self._nodes, self._problem = nodes_of(doc["nodes"]), ""
                elif doc.get("dashboard") in ("on", "absent"):
                    self._problem = "its dashboard is not off after all"
                elif isinstance(doc.get("error"), str):
                    self._problem = doc["error"]
                self._changed.set()
            self._problem = self._problem or program.reason or "the program on the head ended"
        finally:
            self._changed.set()

    async def _stop_program(self) -> None:
        program, reader = self._program, self._reader
        self._program = self._reader = None
        if reader is not None:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader
        if program is not None:
            await program.stop()

    async def close(self) -> None:
        """Stop the program on the head (if one runs)."""
        async with self._lock:
            await self._stop_program()


async def _first_line(program: NodeProgram) -> str:
    async for line in program.lines():
        return line
    return ""


def ssh_starter(start_process: Callable[[str], Awaitable[Any]]) -> Starter:
    """How a program starts on the head of an SSH link (`SshLink.start_process` with no host)."""

    async def start(program: str) -> NodeProgram:
        return await SshProgram.start(start_process, HEAD_PYTHON, program, flags=FAST_START)

    return start
