"""Provides high-resolution mode's agents: `cockpit gpu-agent` run on the cluster's nodes, read as a stream.

The cockpit is not installed on the nodes, so the agent travels as source: `agent_program()` bundles the
modules of `cockpit.core.gpu` (and the two they import; not this module) into one program that the
node's own Python (the one Ray runs workers with, from the raylet's command line) reads from stdin. Over
SSH it runs on the head through the cockpit's connection, and on other nodes through a connection
tunnelled through the head, with the same host-key checks. For a local cluster it is a subprocess of the
cockpit's Python.

An agent that cannot start (no GPU, no NVML, no SSH to a worker node) ends with one line on stderr; the
caller shows that line and keeps the dashboard's readings.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any

from cockpit.core.cluster.parse import as_int, as_metric, as_str
from cockpit.core.connect.programs import LocalProgram, NodeProgram, SshProgram
from cockpit.core.gpu.errors import AgentFailed
from cockpit.core.snapshots import NA, GpuProcess, GpuSample

MODULES = (
    ("cockpit", None),
    ("cockpit.core", None),
    ("cockpit.core.errors", "core/errors.py"),
    ("cockpit.core.snapshots", "core/snapshots.py"),
    ("cockpit.core.gpu.errors", "core/gpu/errors.py"),
    ("cockpit.core.gpu.backend", "core/gpu/backend.py"),
    ("cockpit.core.gpu", "core/gpu/__init__.py"),
    ("cockpit.core.gpu.nvml", "core/gpu/nvml.py"),
    ("cockpit.core.gpu.amd", "core/gpu/amd.py"),
    ("cockpit.core.gpu.agent", "core/gpu/agent.py"),
)
"""What the agent needs, in import order (`gpu.backend` before the package, which imports it); packages
without a file are created empty. A unit test checks it against the files of `cockpit/core/gpu/`."""

LOADER = r"""
import sys, types
def _load_gpu_modules():
    for _name, _source in _MODULES:
        _module = types.ModuleType(_name)
        _is_package = _source is None or _name == "cockpit.core.gpu"
        if _is_package:
            _module.__path__ = []
        _module.__package__ = _name if _is_package else _name.rpartition(".")[0]
        sys.modules[_name] = _module
        if _source is not None:
            exec(compile(_source, "<cockpit " + _name + ">", "exec"), _module.__dict__)
"""
"""Defines `_load_gpu_modules()`, which makes `MODULES` importable from the `_MODULES` line
(`shipped_modules`) on a node where the cockpit is not installed. The agent and `cockpit check`'s node
program both travel with it."""

_BOOTSTRAP = """
_load_gpu_modules()
from cockpit.core.gpu import NoGpuFound, detect
from cockpit.core.gpu.agent import run
try:
    _backend = detect()
except NoGpuFound as _exc:
    print(_exc, file=sys.stderr)
    sys.exit(1)
try:
    run(_backend, sys.stdout, interval=_INTERVAL)
except (BrokenPipeError, KeyboardInterrupt):
    pass
"""


def shipped_modules() -> str:
    """The `_MODULES = [(name, source), ...]` line `LOADER` reads: the sources of `MODULES`."""
    package = resources.files("cockpit")
    modules = []
    for name, path in MODULES:
        source = None if path is None else package.joinpath(*path.split("/")).read_text(encoding="utf-8")
        modules.append((name, source))
    return f"_MODULES = {modules!r}\n"


def agent_program(interval: float = 1.0) -> str:
    """The whole agent as one Python program (about 15 KB)."""
    return f"{shipped_modules()}_INTERVAL = {float(interval)!r}\n{LOADER}{_BOOTSTRAP}"


@dataclass(frozen=True)
class AgentReading:
    time: float
    vendor: str
    gpus: tuple[GpuSample, ...]


def parse_reading(line: str) -> AgentReading | None:
    """One JSON line of `cockpit gpu-agent`; None for anything else (a stray print, a partial line)."""
    try:
        doc = json.loads(line)
    except ValueError:
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("gpus"), list):
        return None
    gpus = []
    for entry in doc["gpus"]:
        if not isinstance(entry, dict):
            continue
        power = as_metric(entry.get("power_w"))
        gpus.append(
            GpuSample(
                index=as_int(entry.get("index")),
                name=as_str(entry.get("name")),
                uuid=as_str(entry.get("uuid")),
                utilization=as_metric(entry.get("utilization")),
                memory_used_mib=as_metric(entry.get("memory_used_mib")),
                memory_total_mib=as_metric(entry.get("memory_total_mib")),
                power_w=power,
                temperature_c=as_metric(entry.get("temperature_c")),
                processes=tuple(
                    GpuProcess(
                        as_int(p.get("pid")), memory_mib=as_metric(p.get("memory_mib")), utilization=NA
                    )
                    for p in entry.get("processes") or ()
                    if isinstance(p, dict) and p.get("pid") is not None
                ),
            )
        )
    when = doc.get("time")
    return AgentReading(
        time=float(when) if isinstance(when, (int, float)) else 0.0,
        vendor=as_str(doc.get("vendor")),
        gpus=tuple(gpus),
    )


async def stream_readings(
    start: Callable[[], Any], on_reading: Callable[[AgentReading], None], label: str
) -> None:
    """Start one agent and feed its readings to `on_reading` until it ends or the caller cancels.

    Raises:
        AgentFailed: always, when the agent ends (with its own last stderr line), could not start, or its
            stream broke (a dropped SSH connection): one line that starts with `label`.
    """
    try:
        agent: NodeProgram = await start()
    except Exception as exc:  # an SSH or OS error starting it: one line, the view goes on
        raise AgentFailed(f"{label}: cannot start the agent ({exc})") from None
    lines = agent.lines().__aiter__()
    try:
        while True:
            try:
                line = await lines.__anext__()
            except StopAsyncIteration:
                break
            except Exception as exc:  # the connection under the stream dropped (a bug in on_reading raises)
                reason = str(exc) or type(exc).__name__
                raise AgentFailed(f"{label}: the agent's stream broke ({reason})") from None
            reading = parse_reading(line)
            if reading is not None:
                on_reading(reading)
    finally:
        with contextlib.suppress(Exception):
            await agent.stop()
    raise AgentFailed(f"{label}: {agent.reason or 'the agent stopped'}")


async def start_local_agent(python: str = sys.executable, interval: float = 1.0) -> LocalProgram:
    """The agent as a subprocess of this machine (a local cluster's nodes are this machine)."""
    return await LocalProgram.start(agent_program(interval), python)


async def start_ssh_agent(run: Callable[[str], Any], python: str, interval: float = 1.0) -> SshProgram:
    """The agent in an SSH session (RUN starts a command: on the head, or on a node through the head)."""
    return await SshProgram.start(run, python, agent_program(interval))
