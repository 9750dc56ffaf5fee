"""Provides the run doctor's stacks: py-spy dumps parsed, grouped by identical stack, and labelled.

A dump comes in one of two shapes: py-spy's JSON (`py-spy dump --json`, what the cockpit runs on the nodes)
or its text (what the dashboard's `/worker/traceback` answers). Both become a `ProcessStack`.

Grouping compares what each process is doing, not its noise: frames are compared by function and file,
without line numbers (a compute loop is at a different line every time) and without native addresses
(ASLR puts them elsewhere in every process). Threads that run only Ray's and Python's own code (the GC
thread, the log printer, an idle event loop) are left out of the comparison, so a process whose every
thread is of that kind is idle: all idle processes make one collapsed group. The groups come smallest
first: the odd one out of 64 is at the top.

Everything here is text from the cluster (process titles, function and file names): it is kept as data,
and whoever shows it cleans it (`cockpit.core.text.clean`).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cockpit.core.doctor.errors import StackParseError

MAX_DUMP_CHARS = 4_000_000
"""A dump larger than this is refused rather than parsed (a process with thousands of deep threads)."""
MAX_THREADS = 512
MAX_FRAMES = 512
"""Per process and per thread: the rest is dropped (and the stack is marked cut)."""

IDLE_LABEL = "idle in Ray's task loop"


@dataclass(frozen=True, slots=True)
class Frame:
    function: str
    file: str
    """As py-spy shortens it: `ray/_private/worker.py`, `threading.py`, `libc.so.6`, `<string>`."""
    line: int = 0
    """0 for a native frame or where py-spy does not know."""
    native: bool = False
    library: bool = False
    """Ray's, Python's own or an installed package's code (not the user's)."""

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file


@dataclass(frozen=True, slots=True)
class ThreadStack:
    thread_id: int
    name: str
    active: bool
    frames: tuple[Frame, ...]
    """Innermost first, as py-spy prints them."""

    @property
    def is_main(self) -> bool:
        return self.name == "MainThread"


@dataclass(frozen=True, slots=True)
class ProcessStack:
    pid: int
    title: str
    """The process title (`ray::RolloutWorker.generate`) where known."""
    threads: tuple[ThreadStack, ...]
    cut: bool = False


# -- where a frame's code comes from -------------------------------------------------------------------

_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) | {"<frozen runpy>"}
KNOWN_LIBRARIES = frozenset(
    {
        "ray", "torch", "vllm", "sglang", "megatron", "transformers", "deepspeed", "accelerate", "numpy",
        "jax", "flax", "tensorflow", "triton", "apex", "flash_attn", "xformers", "datasets", "tokenizers",
        "safetensors", "pyarrow", "pandas", "aiohttp", "grpc", "google", "urllib3", "requests", "wandb",
        "hydra", "omegaconf", "uvloop", "debugpy", "verl", "nemo_rl", "rlinf", "openrlhf", "cupy", "nccl",
    }
)  # fmt: skip
"""Top-level packages treated as library code in a short file name (the text form has no full path)."""
_SITE = re.compile(r"/(site|dist)-packages/")
_HEX = re.compile(r"^0x[0-9a-fA-F]+$")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")


def _top(short_file: str) -> str:
    head = short_file.split("/", 1)[0]
    return head[:-3] if head.endswith(".py") else head


def is_ray_or_python(frame: Frame) -> bool:
    """Code of Ray or of Python itself (or native): what every Ray worker runs whatever it is doing."""
    if frame.native:
        return True
    top = _top(frame.file)
    return top == "ray" or top in _STDLIB or frame.file.startswith("<frozen")


def _library(short_file: str, full_file: str = "") -> bool:
    if full_file and _SITE.search(full_file):
        return True
    top = _top(short_file)
    return top in KNOWN_LIBRARIES or top in _STDLIB or short_file.startswith("<frozen")


# -- parsing -------------------------------------------------------------------------------------------


def parse_json(text: str, title: str = "") -> ProcessStack:
    """`py-spy dump --json` of one process (its first process, with `--subprocesses`)."""
    if len(text) > MAX_DUMP_CHARS:
        raise StackParseError(f"the dump is too large ({len(text)} characters)")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: `[[[[…` nested deeper than the stack
        raise StackParseError(f"not py-spy's JSON ({exc})") from None
    if not isinstance(doc, list):
        raise StackParseError("not py-spy's JSON (a list of threads was expected)")
    pid = 0
    threads: list[ThreadStack] = []
    cut = False
    for entry in doc:
        if not isinstance(entry, dict):
            continue
        entry_pid = _int(entry.get("pid"))
        pid = pid or entry_pid
        if entry_pid and entry_pid != pid:
            continue
        if len(threads) >= MAX_THREADS:
            cut = True
            break
        frames: list[Frame] = []
        raw_frames = entry.get("frames")
        for raw in raw_frames if isinstance(raw_frames, list) else ():
            if not isinstance(raw, dict):
                continue
            if len(frames) >= MAX_FRAMES:
                cut = True
                break
            full = _str(raw.get("filename"))
            short = _str(raw.get("short_filename")) or full
            native = bool(raw.get("module")) or (
                (full.endswith(".so") or ".so." in full) and not full.endswith(".py")
            )
            frames.append(
                Frame(
                    function=_str(raw.get("name")) or "?",
                    file=short,
                    line=max(0, _int(raw.get("line"))),
                    native=native,
                    library=native or _library(short, full),
                )
            )
        threads.append(
            ThreadStack(
                thread_id=_int(entry.get("os_thread_id")) or _int(entry.get("thread_id")),
                name=_str(entry.get("thread_name")),
                active=bool(entry.get("active")),
                frames=tuple(frames),
            )
        )
    return ProcessStack(pid=pid, title=title, threads=tuple(threads), cut=cut)


_PROCESS = re.compile(r"^Process ([0-9]{1,18}): ?(.*)$")
_THREAD = re.compile(r'^Thread (\S+) \(([^)]*)\)(?:: "(.*)")?\s*$')
_LINE_NUMBER = re.compile(r"^[0-9]{1,18}$")
"""ASCII digits only: `str.isdigit` also takes `²`, and `int()` refuses it (and more than 4300 digits)."""


def parse_text(text: str) -> ProcessStack:
    """py-spy's text dump of one process (what `/worker/traceback` answers)."""
    if len(text) > MAX_DUMP_CHARS:
        raise StackParseError(f"the dump is too large ({len(text)} characters)")
    pid, title = 0, ""
    threads: list[ThreadStack] = []
    current: dict[str, Any] | None = None
    frames: list[Frame] = []
    cut = False

    def close() -> None:
        nonlocal current, frames
        if current is not None:
            threads.append(ThreadStack(frames=tuple(frames), **current))
        current, frames = None, []

    for line in text.splitlines():
        if not line.strip():
            continue
        if not line[0].isspace():
            process = _PROCESS.match(line)
            if process:
                if pid:  # a child process (--subprocesses): only the first is this worker
                    break
                pid, title = int(process.group(1)), process.group(2).strip()
                continue
            thread = _THREAD.match(line)
            if thread:
                close()
                if len(threads) >= MAX_THREADS:
                    cut = True
                    break
                ident, state, name = thread.groups()
                current = {
                    "thread_id": _thread_id(ident),
                    "name": name or "",
                    "active": state.startswith("active"),
                }
            continue
        if current is None:
            continue
        stripped = line.strip()
        if stripped.endswith(":") and " (" not in stripped:  # "Arguments:" / "Locals:" of `--locals`
            continue
        if len(frames) >= MAX_FRAMES:
            cut = True
            continue
        frame = _text_frame(stripped)
        if frame is not None:
            frames.append(frame)
    close()
    if not pid and not threads:
        raise StackParseError("not a py-spy dump (no `Process` or `Thread` line)")
    return ProcessStack(pid=pid, title=title, threads=tuple(threads), cut=cut)


def _text_frame(line: str) -> Frame | None:
    if not line.endswith(")") or " (" not in line:
        return None
    function, _, where = line[:-1].rpartition(" (")
    file, sep, number = where.rpartition(":")
    if sep and _LINE_NUMBER.match(number):
        return Frame(function=function, file=file, line=int(number), library=_library(file))
    native = not where.endswith(".py") and not where.startswith("<")
    return Frame(function=function, file=where, native=native, library=native or _library(where))


def _thread_id(ident: str) -> int:
    try:
        return int(ident, 16) if ident.lower().startswith("0x") else int(ident)
    except ValueError:
        return 0


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


# -- what a process is doing ---------------------------------------------------------------------------

FrameKey = tuple[str, str]
ThreadKey = tuple[FrameKey, ...]
StackKey = tuple[ThreadKey, ...]


def _frame_key(frame: Frame) -> FrameKey | None:
    if frame.native and _HEX.match(frame.function):
        return None  # an unnamed native address: different in every process
    return (_ADDRESS.sub("0x…", frame.function), frame.file)


def working_threads(stack: ProcessStack) -> list[ThreadStack]:
    """The threads that run something besides Ray's and Python's own code, main thread first."""
    threads = [t for t in stack.threads if not all(is_ray_or_python(f) for f in t.frames)]
    return sorted(threads, key=lambda t: not t.is_main)


def stack_key(stack: ProcessStack) -> StackKey:
    """What two processes must share to be in one group; `()` for an idle process."""
    keys = []
    for thread in working_threads(stack):
        key = tuple(k for k in (_frame_key(f) for f in thread.frames) if k is not None)
        if key:
            keys.append(key)
    return tuple(sorted(keys))


_WRAPPERS = frozenset({"wrapper", "wrapped", "inner", "decorator", "_wrapper", "wrapped_f", "_inner"})


def _is_wrapper(frame: Frame) -> bool:
    return "<locals>" in frame.function or frame.function.rsplit(".", 1)[-1] in _WRAPPERS


def _short_function(function: str) -> str:
    """`client_mode_hook.<locals>.decorator.<locals>.wrapper` -> `wrapper`; `Worker.get` stays."""
    return function.rsplit("<locals>.", 1)[-1]


def describe_library(frame: Frame) -> str:
    """`ray.get`, `torch.distributed all_reduce`, `threading Event.wait`, `clock_nanosleep`."""
    function = _short_function(frame.function)
    if frame.native:
        return function
    parts = [p for p in re.split(r"[/.]", frame.file.removesuffix(".py")) if p and not p.startswith("_")]
    if not parts:
        return function
    if parts[0] == "ray":
        return f"ray.{function.rsplit('.', 1)[-1]}"
    return f"{'.'.join(parts[:2]) if len(parts) > 2 else parts[0]} {function}"


def thread_label(thread: ThreadStack) -> str:
    """Where one thread is: `in ray.get in all_gather_weights`, `in wait_for_weights_sync`."""
    frames = thread.frames
    user_at = next((i for i, f in enumerate(frames) if not f.library), None)
    if user_at is None:
        named = [f for f in frames if not _is_wrapper(f) and not (f.native and _HEX.match(f.function))]
        return f"in {describe_library(named[0])}" if named else "in native code"
    user = _short_function(frames[user_at].function)
    # The library call the user's code made: the outermost non-wrapper library frame inside it.
    entry = next((f for f in reversed(frames[:user_at]) if not _is_wrapper(f) and not f.native), None)
    if entry is None:  # a C function called straight from user code (time.sleep): named with --native
        entry = next((f for f in frames[:user_at] if f.native and not _HEX.match(f.function)), None)
    return f"in {describe_library(entry)} in {user}" if entry is not None else f"in {user}"


def stack_label(stack: ProcessStack) -> str:
    working = working_threads(stack)
    if not working:
        return IDLE_LABEL
    label = thread_label(working[0])
    if not working[0].is_main and working[0].name:
        label += f" (thread {working[0].name})"
    if len(working) > 1:
        label += f" +{len(working) - 1} thread{'s' if len(working) > 2 else ''}"
    return label


# -- grouping ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Member:
    """One process whose stack was taken, and what the cluster says it is."""

    pid: int
    node_id: str
    node_ip: str = ""
    hostname: str = ""
    kind: str = "worker"
    """`worker`, `actor` or `driver`."""
    actor_id: str = ""
    actor_name: str = ""
    class_name: str = ""
    role: str = ""
    job_id: str = ""
    title: str = ""

    @property
    def who(self) -> str:
        """`RolloutWorker_0`, `driver of 02000000`, `ray::IDLE`, or `pid 1234`."""
        if self.actor_name or self.class_name:
            return self.actor_name or self.class_name
        if self.kind == "driver":
            return f"driver of {self.job_id}" if self.job_id else "driver"
        return self.title or f"pid {self.pid}"


@dataclass(frozen=True, slots=True)
class StackGroup:
    label: str
    idle: bool
    members: tuple[Member, ...]
    stack: ProcessStack
    """The stack of the group's first member (the others' differ at most in lines and addresses)."""

    @property
    def count(self) -> int:
        return len(self.members)

    @property
    def roles(self) -> tuple[str, ...]:
        return tuple(sorted({m.role for m in self.members if m.role}))

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(sorted({m.hostname or m.node_ip or m.node_id[:8] for m in self.members}))


@dataclass(frozen=True, slots=True)
class Failure:
    """A process (pid > 0) or a whole node (pid 0) whose stack could not be taken; `reason` is one line."""

    node: str
    pid: int
    reason: str
    member: Member | None = None


@dataclass(frozen=True, slots=True)
class StacksReport:
    groups: tuple[StackGroup, ...]
    failures: tuple[Failure, ...] = ()
    missing_nodes: tuple[str, ...] = ()
    """Nodes that had not answered when the report was made."""
    notes: tuple[str, ...] = ()
    """One line each: how the stacks were taken, ptrace refused, processes left out."""
    source: str = ""
    """`dashboard`, `ssh` or `local`."""

    @property
    def processes(self) -> int:
        return sum(g.count for g in self.groups)


def group_stacks(dumps: Iterable[tuple[Member, ProcessStack]]) -> tuple[StackGroup, ...]:
    """Processes grouped by identical stack: workers' groups smallest first, then the drivers', and the
    idle ones as one group at the end."""
    buckets: dict[StackKey, list[tuple[Member, ProcessStack]]] = {}
    for member, stack in dumps:
        buckets.setdefault(stack_key(stack), []).append((member, stack))
    groups = []
    for key, items in buckets.items():
        items.sort(key=lambda item: (item[0].role, item[0].who, item[0].hostname, item[0].pid))
        members = tuple(member for member, _ in items)
        stack = items[0][1]
        groups.append(StackGroup(label=stack_label(stack), idle=not key, members=members, stack=stack))
    # Workers before drivers (a driver always waits on its workers: the odd worker is the news), then
    # the smallest groups first; the idle ones last.
    groups.sort(
        key=lambda g: (g.idle, all(m.kind == "driver" for m in g.members), g.count, g.label, g.members[0].pid)
    )
    return tuple(groups)


def merge_failures(failures: Sequence[Failure], limit: int = 3) -> list[str]:
    """Failures as lines, the same reason once with its count: `py-spy failed on 3 processes (...)`."""
    by_reason: dict[str, list[Failure]] = {}
    for failure in failures:
        by_reason.setdefault(failure.reason, []).append(failure)
    lines = []
    for reason, items in sorted(by_reason.items(), key=lambda kv: -len(kv[1])):
        nodes = sorted({f.node for f in items})
        whole = [f for f in items if not f.pid]
        what = f"{len(whole)} node(s)" if whole else f"{len(items)} process(es)"
        where = ", ".join(nodes[:limit]) + (f" and {len(nodes) - limit} more" if len(nodes) > limit else "")
        lines.append(f"{what} on {where}: {reason}")
    return lines


# -- output --------------------------------------------------------------------------------------------


def _member_doc(member: Member) -> dict[str, Any]:
    return {
        "pid": member.pid,
        "node_id": member.node_id,
        "node_ip": member.node_ip,
        "hostname": member.hostname,
        "kind": member.kind,
        "actor_id": member.actor_id,
        "actor_name": member.actor_name,
        "class_name": member.class_name,
        "role": member.role,
        "job_id": member.job_id,
        "title": member.title,
    }


def _thread_doc(thread: ThreadStack) -> dict[str, Any]:
    return {
        "name": thread.name,
        "active": thread.active,
        "frames": [
            {"function": f.function, "file": f.file, "line": f.line, "native": f.native}
            for f in thread.frames
        ],
    }


def _shown_threads(stack: ProcessStack) -> list[ThreadStack]:
    """The working threads; for an idle process its main thread (py-spy's JSON lists it last, after the
    GC thread and threads without a frame)."""
    return working_threads(stack) or sorted(stack.threads, key=lambda t: not t.is_main)[:1]


def report_json(report: StacksReport) -> dict[str, Any]:
    """The report as `cockpit stacks --json` prints it (and `cockpit watch` saves it)."""
    return {
        "source": report.source,
        "processes": report.processes,
        "groups": [
            {
                "label": g.label,
                "idle": g.idle,
                "count": g.count,
                "roles": list(g.roles),
                "nodes": list(g.nodes),
                "members": [_member_doc(m) for m in g.members],
                "threads": [_thread_doc(t) for t in _shown_threads(g.stack)],
            }
            for g in report.groups
        ],
        "failures": [{"node": f.node, "pid": f.pid, "reason": f.reason} for f in report.failures],
        "missing_nodes": list(report.missing_nodes),
        "notes": list(report.notes),
    }


def group_heading(group: StackGroup) -> str:
    """`1 process in wait_for_weights_sync · rollout · RolloutWorker_0 · node-1`."""
    who = ", ".join(m.who for m in group.members[:3]) + (" …" if group.count > 3 else "")
    parts = [f"{group.count} {'process' if group.count == 1 else 'processes'} {group.label}"]
    if group.roles:
        parts.append("/".join(group.roles))
    if not group.idle:
        parts.append(who)
    parts.append(", ".join(group.nodes[:3]) + (" …" if len(group.nodes) > 3 else ""))
    return " · ".join(parts)


def render_text(report: StacksReport, full: bool = True, clean: Any = None) -> str:
    """The report for a terminal or a file: a heading per group, then (FULL) its stack and its members.

    `clean` makes each string from the cluster safe (the caller's; identity when None)."""
    safe = clean or (lambda text: text)
    out: list[str] = []
    for group in report.groups:
        out.append(safe(group_heading(group)))
        if not full or group.idle:
            continue
        for thread in working_threads(group.stack):
            out.append(f"    thread {safe(thread.name or thread.thread_id)}:")
            for frame in thread.frames:
                out.append(f"      {safe(frame.function)} ({safe(frame.where)})")
        for member in group.members:
            where = member.hostname or member.node_ip or member.node_id[:8]
            role = f" [{member.role}]" if member.role else ""
            out.append(safe(f"    - pid {member.pid} on {where}: {member.who}{role}"))
    for line in merge_failures(report.failures):
        out.append(safe(f"not taken: {line}"))
    if report.missing_nodes:
        out.append(safe(f"no answer yet from: {', '.join(report.missing_nodes)}"))
    out.extend(safe(note) for note in report.notes)
    return "\n".join(out)


@dataclass
class Collector:
    """Dumps as they arrive, regrouped on demand (the TUI and the CLI show groups before the last node)."""

    expected: Mapping[str, Sequence[Member]]
    """Node label -> the members asked of it."""
    dumps: list[tuple[Member, ProcessStack]] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    done_nodes: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    source: str = ""

    def report(self) -> StacksReport:
        missing = tuple(sorted(n for n in self.expected if n not in self.done_nodes))
        return StacksReport(
            groups=group_stacks(self.dumps),
            failures=tuple(self.failures),
            missing_nodes=missing,
            notes=tuple(dict.fromkeys(self.notes)),
            source=self.source,
        )
