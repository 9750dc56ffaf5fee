"""Provides the program `cockpit check` runs on each machine of the cluster, and what it found there.

One program per machine gathers every fact the checks need in one go: its clock (the first line, as soon
as it starts), then one JSON line with the host name, the Python it runs in (the one Ray runs workers
with), py-spy (beside that Python, else on the PATH: where `cockpit stacks` looks), whether py-spy may
attach to one of Ray's own Python processes of this session (a real `py-spy dump`, which pauses it for a
moment), the kernel's ptrace rules (`kernel.yama.ptrace_scope`, CAP_SYS_PTRACE, the uid Ray runs as),
whether debugpy imports, and the GPUs the vendor library sees (`cockpit.core.gpu`'s own detection,
shipped with it as the GPU agent's modules are). It travels as source and writes nothing on the node.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from cockpit.core.gpu.agents import LOADER, shipped_modules

PTRACE_SCOPE_FILE = "/proc/sys/kernel/yama/ptrace_scope"
ATTACH_TIMEOUT = 10.0
"""One `py-spy dump` of one of Ray's processes: it pauses the process for a moment; a wedged one is given
up (the program's deadline is the caller's)."""

_PROGRAM = r"""
import json, os, platform, shutil, socket, subprocess, sys, time
print(json.dumps({"clock": time.time()}), flush=True)

RAY_PYTHON = ("log_monitor.py", "dashboard/agent.py", "runtime_env/agent/main.py", "default_worker.py")

def _read(path, size=4096):
    try:
        with open(path, "rb") as f:
            return f.read(size).decode("utf-8", "replace")
    except OSError:
        return None

def _spy():
    beside = os.path.join(os.path.dirname(sys.executable), "py-spy")
    if os.access(beside, os.X_OK):
        return beside, "beside"
    found = shutil.which("py-spy")
    return (found, "path") if found else ("", "")

def _cap_sys_ptrace():
    for line in (_read("/proc/self/status", 65536) or "").splitlines():
        if line.startswith("CapEff:"):
            try:
                return bool(int(line.split()[1], 16) >> 19 & 1)
            except (IndexError, ValueError):
                return None
    return None

def _file_caps(path):
    try:
        return bool(path) and bool(os.getxattr(path, "security.capability"))
    except (OSError, AttributeError):
        return False

def _ray_processes():
    # The uids Ray's raylets run as (the workers' uid) and one of Ray's own Python processes to attach
    # to, the log monitor first: of this cluster's session only when it is known (on a shared machine
    # another user's Ray is not the user's business, and py-spy may rightly not read it).
    raylet_uids, candidates = set(), []
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        pid = int(name)
        comm = (_read("/proc/%d/comm" % pid, 64) or "").strip()
        cmdline = (_read("/proc/%d/cmdline" % pid) or "").replace("\0", " ")
        if _SESSION and _SESSION not in cmdline:
            continue
        try:
            uid = os.stat("/proc/%d" % pid).st_uid
        except OSError:
            continue
        if comm == "raylet":
            raylet_uids.add(uid)
            continue
        for rank, marker in enumerate(RAY_PYTHON):
            if marker in cmdline:
                candidates.append((rank, pid, marker, uid))
                break
    candidates.sort()
    return sorted(raylet_uids), candidates[0][1:] if candidates else None

def _attach(spy, pid):
    # py-spy stops every thread of the process; one starting or ending meanwhile fails the stop ("Failed to
    # suspend process"): a race, not a refusal, so it is tried once more before it is a finding.
    found = _attach_once(spy, pid)
    if not found["ok"] and "suspend" in found["error"]:
        time.sleep(0.2)
        found = _attach_once(spy, pid)
    return found

def _attach_once(spy, pid):
    try:
        done = subprocess.run(
            [spy, "dump", "--pid", str(pid)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            timeout=_ATTACH_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": "py-spy took longer than %d s" % _ATTACH_TIMEOUT}
    except OSError as exc:
        return {"ok": False, "error": "py-spy did not start (%s)" % exc}
    if done.returncode == 0:
        return {"ok": True, "error": ""}
    # py-spy's error, and the first cause under it: a refused ptrace often shows only there ("Failed to
    # get process executable name" / "Caused by: 0: Permission denied (os error 13)").
    text = done.stderr.decode("utf-8", "replace") + "\n" + done.stdout.decode("utf-8", "replace")
    text = text.split("Stack backtrace:")[0]
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    error = lines[0] if lines else "py-spy failed (status %d)" % done.returncode
    if error.startswith("Error: "):
        error = error[len("Error: "):]
    if "Caused by:" in lines:
        causes = lines[lines.index("Caused by:") + 1:]
        if causes:
            error += " (%s)" % causes[0].split(": ", 1)[-1]
    return {"ok": False, "error": error[:400]}

def _debugpy():
    try:
        import debugpy
        version = getattr(debugpy, "__version__", None)
        if not isinstance(version, str) or not version:
            # A directory named debugpy without the package in it (an empty namespace package).
            return {"version": "", "error": "`import debugpy` finds no debugpy package (no __version__)"}
        return {"version": version, "error": ""}
    except Exception as exc:
        return {"version": "", "error": ("%s: %s" % (type(exc).__name__, exc))[:300]}

def _gpus():
    try:
        _load_gpu_modules()
        from cockpit.core.gpu import NoGpuFound, detect
    except Exception as exc:
        return {"vendor": "", "count": None, "names": [], "error": "the GPU modules did not load (%s)" % exc}
    try:
        backend = detect()
    except NoGpuFound as exc:
        return {"vendor": "", "count": 0, "names": [], "error": str(exc)}
    except Exception as exc:
        return {"vendor": "", "count": None, "names": [], "error": "%s: %s" % (type(exc).__name__, exc)}
    try:
        samples = backend.sample()
        names = [g.name for g in samples][:64]
        return {"vendor": backend.vendor, "count": len(samples), "names": names, "error": ""}
    finally:
        try:
            backend.close()
        except Exception:
            pass

def _main():
    spy, where = _spy()
    raylet_uids, target = _ray_processes()
    facts = {
        "hostname": socket.gethostname(),
        "python": sys.executable,
        "python_version": platform.python_version(),
        "uid": os.getuid(),
        "py_spy": spy,
        "py_spy_where": where,
        "py_spy_file_caps": _file_caps(spy),
        "ptrace_scope": (_read(_SCOPE_FILE, 16) or "").strip(),
        "cap_sys_ptrace": _cap_sys_ptrace(),
        "raylet_uids": raylet_uids,
        "debugpy": _debugpy(),
        "gpus": _gpus(),
    }
    if target is not None:
        pid, marker, uid = target
        facts["attach_target"] = {"pid": pid, "what": marker, "uid": uid}
        if spy:
            facts["attach"] = _attach(spy, pid)
    print(json.dumps(facts), flush=True)

_main()
"""


def node_program(session: str = "", scope_file: str = PTRACE_SCOPE_FILE) -> str:
    """The whole program as Python source (about 20 KB with the GPU modules). SESSION: the cluster's
    session name, so that only this cluster's processes are looked at (all of them when "");
    SCOPE_FILE: where the kernel's ptrace scope is read (the tests point it at a file of theirs)."""
    return (
        f"{shipped_modules()}_SESSION = {session!r}\n_SCOPE_FILE = {scope_file!r}\n"
        f"_ATTACH_TIMEOUT = {ATTACH_TIMEOUT!r}\n{LOADER}{_PROGRAM}"
    )


@dataclass(frozen=True)
class GpuFacts:
    vendor: str = ""
    """`nvidia` or `amd`; "" when the vendor library found no GPU."""
    count: int | None = None
    """GPUs the vendor library sees; 0 for none; None when it could not be asked."""
    names: tuple[str, ...] = ()
    error: str = ""
    """Why none was found (the library missing, the driver not loaded ...)."""


@dataclass(frozen=True)
class NodeFacts:
    """What one machine's program found (every field as the node said it: hostile text)."""

    hostname: str = ""
    python: str = ""
    python_version: str = ""
    uid: int | None = None
    py_spy: str = ""
    py_spy_where: str = ""
    """`beside` the Python, on the `path`, or "" (not found)."""
    py_spy_file_caps: bool = False
    ptrace_scope: str = ""
    """The content of kernel.yama.ptrace_scope; "" where the kernel has no Yama (ptrace is by uid only)."""
    cap_sys_ptrace: bool | None = None
    raylet_uids: tuple[int, ...] = ()
    attach_pid: int | None = None
    attach_what: str = ""
    """Which of Ray's processes py-spy tried (`log_monitor.py` ...)."""
    attach_uid: int | None = None
    attach_ok: bool | None = None
    """Whether `py-spy dump` of it worked; None when not tried (no py-spy, no Ray Python process)."""
    attach_error: str = ""
    debugpy_version: str = ""
    debugpy_error: str = ""
    gpus: GpuFacts = GpuFacts()


def _str(value: Any, limit: int = 500) -> str:
    return value[:limit] if isinstance(value, str) else ""


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def parse_clock(line: str) -> float | None:
    """The node's clock from the program's first line; None for anything else."""
    try:
        doc = json.loads(line)
    except ValueError:
        return None
    value = doc.get("clock") if isinstance(doc, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def parse_facts(line: str) -> NodeFacts | None:
    """The program's facts line; None for anything that is not one (a stray print, a partial line).
    Values of the wrong type read as unknown, never as a pass."""
    try:
        doc = json.loads(line)
    except ValueError:
        return None
    if not isinstance(doc, dict) or "hostname" not in doc:
        return None
    attach = _dict(doc.get("attach"))
    target = _dict(doc.get("attach_target"))
    debugpy = _dict(doc.get("debugpy"))
    gpus = _dict(doc.get("gpus"))
    names = gpus.get("names")
    uids = doc.get("raylet_uids")
    return NodeFacts(
        hostname=_str(doc.get("hostname"), 200),
        python=_str(doc.get("python")),
        python_version=_str(doc.get("python_version"), 40),
        uid=_int(doc.get("uid")),
        py_spy=_str(doc.get("py_spy")),
        py_spy_where=_str(doc.get("py_spy_where"), 10),
        py_spy_file_caps=doc.get("py_spy_file_caps") is True,
        ptrace_scope=_str(doc.get("ptrace_scope"), 10),
        cap_sys_ptrace=_bool(doc.get("cap_sys_ptrace")),
        raylet_uids=tuple(u for u in uids if _int(u) is not None) if isinstance(uids, list) else (),
        attach_pid=_int(target.get("pid")),
        attach_what=_str(target.get("what"), 60),
        attach_uid=_int(target.get("uid")),
        attach_ok=_bool(attach.get("ok")),
        attach_error=_str(attach.get("error")),
        debugpy_version=_str(debugpy.get("version"), 40),
        debugpy_error=_str(debugpy.get("error")),
        gpus=GpuFacts(
            vendor=_str(gpus.get("vendor"), 20),
            count=_int(gpus.get("count")),
            names=tuple(_str(n, 100) for n in names if isinstance(n, str)) if isinstance(names, list) else (),
            error=_str(gpus.get("error")),
        ),
    )
