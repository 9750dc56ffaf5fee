"""Provides what Ray's answers say about out-of-memory deaths: which kind, and the figures in Ray's text.

Read off a real kill on Ray 2.60 (tests/fixtures/oom/): when the raylet's memory monitor kills a worker,
the worker's row has `exit_type` NODE_OUT_OF_MEMORY and an `exit_detail` beginning "N worker(s) were
killed due to the node running low on memory"; an actor's `death_cause` holds that text under
`oom_context`; a task's `error_type` is OUT_OF_MEMORY. The text names the node's usage against the
threshold in bytes ("Memory usage 3388084224B exceeded threshold of 3361716480B (13.3% of 25276063744B
limit)") and the process it chose ("Selected to kill: (Actor(ID): job ID=..., task name=..., pid=N,
actual memory used=1.84GB, worker ID=...)").

A process the kernel's OOM killer ends dies by SIGKILL, which Ray cannot tell from any other SIGKILL
or crash: the worker's `exit_type` is SYSTEM_ERROR with "connection error code 2. End of file" and a
list of "common causes". Only the node's kernel log can say it was memory ("Out of memory: Killed
process N"); without it the cockpit says it may have been, never that it was.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

OomKind = Literal["ray", "kernel", "kernel?"]
"""Ray's memory monitor; the kernel's OOM killer (its log says so); a SIGKILL or crash that may be it."""

LABELS: dict[OomKind, str] = {
    "ray": "OOM (Ray memory monitor)",
    "kernel": "OOM (kernel)",
    "kernel?": "killed (SIGKILL or crash; kernel OOM?)",
}

RAY_DEFAULT_THRESHOLD = 0.95
"""`RAY_memory_usage_threshold`'s default: the monitor kills above 95% of the node's memory."""

_RAY_OOM = re.compile(r"killed due to the node running low on memory|Worker exit type: NODE_OUT_OF_MEMORY")
_UNEXPECTED_EXIT = re.compile(
    r"unexpectedly exits with a connection error code 2|killed by the OOM killer", re.IGNORECASE
)
_USAGE = re.compile(
    r"Memory usage (?P<used>\d+)B exceeded threshold of (?P<threshold>\d+)B "
    r"\((?P<percent>[\d.]+)% of (?P<limit>\d+)B limit\)"
)
_SELECTED = re.compile(r"Selected to kill: \((?:Actor\((?P<actor>[0-9a-f]+)\)|[A-Za-z ]+):(?P<body>[^\n]*)\)")
_FIELD = re.compile(r"(?P<key>job ID|task name|pid|actual memory used|worker ID)=(?P<value>[^,)]*)")
_NODE_IP = re.compile(r"Memory on the node \(IP: (?P<ip>[^,]+), ID: (?P<node>[0-9a-f]+)\)")
_MONITOR_START = re.compile(
    r"MemoryMonitor initialized with usage threshold at (?P<bytes>\d+) bytes \((?P<percent>[\d.]+)% of "
    r"system memory\), total system memory bytes: (?P<total>\d+)"
)
_KERNEL_KILL = re.compile(
    r"(?:Out of memory|Memory cgroup out of memory): Killed process (?P<pid>\d+) \((?P<name>[^)]*)\)"
    r"(?:.*?anon-rss:(?P<rss_kb>\d+)kB)?"
)


def classify(text: str, exit_type: str = "", error_type: str = "") -> OomKind | None:
    """The kind of out-of-memory death Ray's words and codes show, or None for any other death."""
    if exit_type == "NODE_OUT_OF_MEMORY" or error_type == "OUT_OF_MEMORY" or _RAY_OOM.search(text):
        return "ray"
    if _UNEXPECTED_EXIT.search(text):
        return "kernel?"
    return None


@dataclass(frozen=True, slots=True)
class RayOomFigures:
    """The figures in the memory monitor's text (None where Ray's text did not give one)."""

    node_ip: str | None = None
    node_id: str | None = None
    used_bytes: int | None = None
    threshold_bytes: int | None = None
    threshold_fraction: float | None = None
    limit_bytes: int | None = None
    actor_id: str | None = None
    job_id: str | None = None
    task_name: str | None = None
    pid: int | None = None
    rss_bytes: int | None = None
    """The killed process's memory as Ray measured it when it chose it ("actual memory used")."""
    worker_id: str | None = None


def ray_oom_figures(text: str) -> RayOomFigures:
    """Read Ray's kill text; anything missing or malformed is None (the text is the cluster's)."""
    fields: dict[str, object] = {}
    usage = _USAGE.search(text)
    if usage:
        fields["used_bytes"] = int(usage["used"])
        fields["threshold_bytes"] = int(usage["threshold"])
        fields["limit_bytes"] = int(usage["limit"])
        fields["threshold_fraction"] = round(float(usage["percent"]) / 100.0, 6)
    node = _NODE_IP.search(text)
    if node:
        fields["node_ip"], fields["node_id"] = node["ip"].strip(), node["node"]
    selected = _SELECTED.search(text)
    if selected:
        fields["actor_id"] = selected["actor"]
        for match in _FIELD.finditer(selected["body"]):
            key, value = match["key"], match["value"].strip()
            if key == "job ID":
                fields["job_id"] = value
            elif key == "task name":
                fields["task_name"] = value
            elif key == "pid" and value.isdigit():
                fields["pid"] = int(value)
            elif key == "worker ID":
                fields["worker_id"] = value
            elif key == "actual memory used":
                fields["rss_bytes"] = _gb(value)
    return RayOomFigures(**fields)  # type: ignore[arg-type]


def _gb(value: str) -> int | None:
    """Ray's "1.84GB" (its GB is 2**30 bytes: `memory_monitor_utils`) in bytes."""
    match = re.fullmatch(r"([\d.]+)\s*GB", value)
    if not match:
        return None
    try:
        return int(float(match[1]) * 2**30)
    except ValueError:
        return None


_ADVICE = re.compile(r"\s+(?:Some common causes include|Refer to the documentation|There are some potential)")


def first_line(text: str) -> str:
    """Ray's first line of a death, without the advice Ray appends: what a one-line cause shows."""
    for line in text.splitlines():
        if line.strip():
            return _ADVICE.split(line.strip(), maxsplit=1)[0]
    return ""


def death_line(kind: OomKind, text: str) -> str:
    """One line for an out-of-memory death: the label, then Ray's own first line."""
    said = first_line(text)
    return f"{LABELS[kind]} · {said}" if said else LABELS[kind]


@dataclass(frozen=True, slots=True)
class MonitorThreshold:
    """The kill threshold a node's raylet logged when its memory monitor started (raylet.out)."""

    threshold_bytes: int
    fraction: float
    total_bytes: int


def monitor_threshold(raylet_out: str) -> MonitorThreshold | None:
    """The memory monitor's start line in a raylet.out, or None (monitor off, or not in this text)."""
    match = _MONITOR_START.search(raylet_out)
    if not match:
        return None
    return MonitorThreshold(
        threshold_bytes=int(match["bytes"]),
        fraction=round(float(match["percent"]) / 100.0, 6),
        total_bytes=int(match["total"]),
    )


@dataclass(frozen=True, slots=True)
class KernelKill:
    pid: int
    name: str
    rss_bytes: int | None
    line: str


def kernel_kills(kernel_log: str) -> dict[int, KernelKill]:
    """Processes the kernel's OOM killer ended, by pid, from `dmesg` text."""
    kills: dict[int, KernelKill] = {}
    for line in kernel_log.splitlines():
        match = _KERNEL_KILL.search(line)
        if match:
            rss = int(match["rss_kb"]) * 1024 if match["rss_kb"] else None
            kills[int(match["pid"])] = KernelKill(int(match["pid"]), match["name"], rss, line.strip())
    return kills
