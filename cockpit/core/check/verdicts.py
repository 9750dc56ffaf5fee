"""Provides the rules of `cockpit check` for each machine: from what its program found (or why it gave no
answer) to findings, each with its fix: SSH from the head, the workers' Python, py-spy, ptrace, debugpy,
the GPUs, the clock. Pure functions: the tests give them captured or constructed facts. (The way in:
`way_in`.)"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cockpit.core.check.findings import Finding
from cockpit.core.check.node_program import NodeFacts
from cockpit.core.cluster.versions import parse_version

CLOCK_TOLERANCE = 1.0
"""Seconds a node's clock may differ from this machine's: beyond, log lines of different nodes merged by
time come out of order, and ages computed from the node's time stamps are wrong."""

NODE_CHECKS = ("ssh from head", "python", "py-spy", "ptrace", "debugpy", "gpus", "clock")
"""A machine's checks, in the order they are shown."""

_REFUSED = ("permission denied", "operation not permitted", "os error 1)", "os error 13")


# -- each machine -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class MachineRun:
    """How one machine's program went, as the caller saw it."""

    host: str
    """`hostname [ip]`, as the other commands name a node."""
    via: str
    """`local` (a subprocess here), `head` (the head's own SSH session) or `node` (through the head)."""
    ray_gpus: float = 0.0
    """The `GPU` resource of the Ray nodes on this machine, summed."""
    python: str = ""
    """The Python the program was started with (the one Ray runs workers with)."""
    facts: NodeFacts | None = None
    start_error: str = ""
    """Why the program could not be started (an SSH error reaching the node)."""
    reason: str = ""
    """Why the program ended without its facts (its last stderr line)."""
    timed_out: float | None = None
    """The deadline it did not meet, in seconds; None when it answered."""
    clock: float | None = None
    """The node's clock at its first line."""
    sent: float = 0.0
    """This machine's clock when the program was started."""
    received: float = 0.0
    """This machine's clock when the node's clock line arrived."""


def _skips(run: MachineRun, checks: Sequence[str], why: str) -> list[Finding]:
    return [Finding(check, run.host, "skip", why) for check in checks]


def _ssh_fix(error: str) -> str:
    low = error.lower()
    if "host key" in low and "unknown" in low:
        return (
            "compare the node's fingerprint with your admins', then run again with --accept-new to record it"
        )
    if "host key" in low or "revoked" in low:
        return (
            "if the admins replaced the node's key, remove its old line (ssh-keygen -R IP) and record "
            "the new one"
        )
    if "refused every key" in low or "passphrase" in low:
        return (
            "the cockpit logs in to each node as the head's user with the head's key: add that key to the "
            "node's authorized_keys, or give the node a Host entry in your SSH config"
        )
    return (
        "the GPU agents and stacks reach each node over SSH from the head: make sure its sshd runs and "
        "accepts the head"
    )


def machine_findings(run: MachineRun, tolerance: float = CLOCK_TOLERANCE) -> list[Finding]:
    """A machine's findings, in `NODE_CHECKS` order (`ssh from head` only for a node behind the head)."""
    out: list[Finding] = []
    checks = [c for c in NODE_CHECKS if run.via == "node" or c != "ssh from head"]
    if run.start_error:
        if run.via == "node":
            out.append(Finding("ssh from head", run.host, "fail", run.start_error, _ssh_fix(run.start_error)))
            return out + _skips(run, checks[1:], "not reached over SSH")
        out.append(
            Finding("python", run.host, "fail", f"cannot start Python there ({run.start_error})", _PYTHON_FIX)
        )
        return out + _skips(run, checks[1:], "the node's program did not start")
    if run.via == "node":
        out.append(
            Finding("ssh from head", run.host, "pass", "reached through the head, as the GPU agents are")
        )
    rest = checks[1:] if run.via == "node" else checks
    if run.facts is None:
        if run.timed_out is not None:
            detail = f"the node's program gave no answer within {run.timed_out:g} s"
            fix = "the node may be overloaded or its link slow: run the check again, or give it --deadline"
        else:
            detail = f"the node's program ended without an answer ({run.reason or 'no reason given'})"
            fix = _PYTHON_FIX
        return [*out, Finding("python", run.host, "fail", detail, fix), *_skips(run, rest[1:], "no answer")]
    facts = run.facts
    out.append(
        Finding(
            "python", run.host, "pass", f"Python {facts.python_version} at {facts.python} runs the checks"
        )
    )
    out.append(py_spy_finding(run.host, facts))
    out.append(ptrace_finding(run.host, facts))
    out.append(debugpy_finding(run.host, facts))
    out.append(gpu_finding(run.host, facts, run.ray_gpus))
    out.append(clock_finding(run.host, run.clock, run.sent, run.received, tolerance))
    return out


_PYTHON_FIX = (
    "the cockpit runs the Python Ray starts workers with (the raylet's --python_worker_command): it must "
    "exist for the SSH user on that node"
)


def py_spy_finding(host: str, facts: NodeFacts) -> Finding:
    if facts.py_spy:
        where = "beside the workers' Python" if facts.py_spy_where == "beside" else "on the PATH"
        return Finding("py-spy", host, "pass", f"{facts.py_spy} ({where})")
    return Finding(
        "py-spy",
        host,
        "fail",
        f"py-spy is neither beside {facts.python or 'the workers Python'} nor on the PATH of the SSH session",
        "pip install py-spy into the workers' Python (it comes with ray[default]); `cockpit stacks` and the "
        "hang evidence need it",
    )


def _ptrace_context(facts: NodeFacts) -> str:
    parts = [
        f"kernel.yama.ptrace_scope = {facts.ptrace_scope}" if facts.ptrace_scope else "no Yama ptrace scope"
    ]
    if facts.cap_sys_ptrace:
        parts.append("CAP_SYS_PTRACE held")
    elif facts.py_spy_file_caps:
        parts.append("py-spy has file capabilities")
    elif facts.cap_sys_ptrace is False:
        parts.append("no CAP_SYS_PTRACE")
    if facts.uid is not None:
        parts.append(f"uid {facts.uid}")
    if facts.raylet_uids and facts.uid is not None and facts.uid not in facts.raylet_uids:
        parts.append(f"Ray runs as uid {', '.join(map(str, facts.raylet_uids))}")
    return ", ".join(parts)


def _ptrace_fix(facts: NodeFacts) -> str:
    if facts.ptrace_scope == "3":
        return (
            "ptrace is off on this node until it reboots (ptrace_scope 3): ask the admin to boot it with "
            "kernel.yama.ptrace_scope 0 or 1 and CAP_SYS_PTRACE for py-spy"
        )
    other = [u for u in facts.raylet_uids if u != facts.uid]
    if other and facts.uid not in facts.raylet_uids:
        return (
            f"log in as the user Ray runs as (uid {other[0]}: User in your SSH config), or ask the admin for "
            "CAP_SYS_PTRACE on py-spy (setcap cap_sys_ptrace+ep PY-SPY)"
        )
    if not facts.ptrace_scope and facts.cap_sys_ptrace is False:
        # No Yama, same uid: the kernel refuses a tracer that lacks capabilities its target holds.
        return (
            "Ray's processes hold capabilities the SSH login lacks: ask the admin for CAP_SYS_PTRACE on "
            "py-spy (setcap cap_sys_ptrace+ep PY-SPY), or run Ray without the extra capabilities"
        )
    return (
        "ask the admin for `sysctl kernel.yama.ptrace_scope=0`, or CAP_SYS_PTRACE on py-spy "
        "(setcap cap_sys_ptrace+ep PY-SPY); or serve stacks from the head (RAY_DASHBOARD_ENABLE_PROFILING=1)"
    )


def refused_by_kernel(error: str) -> bool:
    low = error.lower()
    return any(word in low for word in _REFUSED)


def ptrace_finding(host: str, facts: NodeFacts) -> Finding:
    """Whether py-spy may attach to Ray's processes: the real attach where one was tried, else what the
    kernel's rules say."""
    context = _ptrace_context(facts)
    if not facts.py_spy:
        return Finding("ptrace", host, "skip", f"needs py-spy ({context})")
    what = f"Ray's {facts.attach_what} (pid {facts.attach_pid})"
    if facts.attach_ok:
        return Finding("ptrace", host, "pass", f"py-spy attached to {what} ({context})")
    if facts.attach_ok is False:
        if refused_by_kernel(facts.attach_error):
            return Finding(
                "ptrace",
                host,
                "fail",
                f"py-spy may not attach to {what}: {facts.attach_error} ({context})",
                _ptrace_fix(facts),
            )
        return Finding(
            "ptrace",
            host,
            "warn",
            f"py-spy could not read {what}: {facts.attach_error} ({context})",
            "run `cockpit stacks` to see whether it reads the workers",
        )
    # Nothing of Ray's to try: what the kernel's rules say.
    may = facts.cap_sys_ptrace or facts.py_spy_file_caps
    if facts.ptrace_scope == "3":
        return Finding(
            "ptrace", host, "fail", f"not tried: no Ray Python process here ({context})", _ptrace_fix(facts)
        )
    if facts.ptrace_scope in ("1", "2") and not may:
        return Finding(
            "ptrace",
            host,
            "warn",
            f"not tried: no Ray Python process here; py-spy may attach only to its own children ({context})",
            _ptrace_fix(facts),
        )
    return Finding(
        "ptrace", host, "pass", f"not tried (no Ray Python process here); the rules allow it ({context})"
    )


DEBUGPY_FIX = (
    "pip install 'debugpy>=1.8' into the workers' Python, or add `debugpy>=1.8` to the profile's runtime_env "
    "pip list"
)


def debugpy_finding(host: str, facts: NodeFacts) -> Finding:
    """debugpy in the workers' Python: only `debug: post_mortem` profiles need it, so its absence warns."""
    version = parse_version(facts.debugpy_version)
    if version is not None and version[:2] >= (1, 8):
        return Finding("debugpy", host, "pass", f"debugpy {facts.debugpy_version} imports")
    if facts.debugpy_version:
        detail = (
            f"debugpy {facts.debugpy_version} is older than 1.8: post-mortem profiles fail instead of pausing"
        )
    elif "No module named" in facts.debugpy_error:
        detail = "the workers' Python has no debugpy: post-mortem profiles fail instead of pausing"
    else:
        detail = f"debugpy does not import ({facts.debugpy_error or 'no reason given'})"
    return Finding("debugpy", host, "warn", detail, DEBUGPY_FIX)


def _gpus(value: float) -> str:
    return f"{value:g} GPU" + ("" if value == 1 else "s")


def gpu_finding(host: str, facts: NodeFacts, ray_gpus: float) -> Finding:
    """GPUs Ray schedules on this machine vs those the vendor library sees."""
    gpus = facts.gpus
    ray = f"Ray schedules {_gpus(ray_gpus)}"
    why = gpus.error.rstrip(". ")
    if gpus.count is None:
        return Finding(
            "gpus",
            host,
            "warn",
            f"{ray}; the vendor library could not be asked ({why})",
            "install nvidia-ml-py (NVIDIA) or ROCm's amdsmi into the workers' Python",
        )
    vendor = {"nvidia": "NVML", "amd": "amdsmi"}.get(gpus.vendor, gpus.vendor or "the vendor library")
    if gpus.count == 0 and ray_gpus == 0:
        return Finding(
            "gpus", host, "pass", "no GPU: Ray schedules none and neither NVML nor amdsmi sees one"
        )
    if gpus.count == 0:
        return Finding(
            "gpus",
            host,
            "warn",
            f"{ray} but neither NVML nor amdsmi sees one ({why}): the GPU views show Ray's numbers only",
            "on real GPUs install nvidia-ml-py (NVIDIA) or ROCm's amdsmi into the workers' Python; logical "
            "GPUs (ray start --num-gpus) have no readings",
        )
    names = sorted(set(gpus.names))
    model = f" ({', '.join(names[:2])})" if names else ""
    if gpus.count == ray_gpus:
        return Finding("gpus", host, "pass", f"{_gpus(gpus.count)}{model}: Ray and {vendor} agree")
    return Finding(
        "gpus",
        host,
        "warn",
        f"{ray}, {vendor} sees {gpus.count}{model}",
        "start Ray with --num-gpus matching the GPUs, or check CUDA_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES "
        "of its raylet",
    )


def clock_finding(
    host: str, clock: float | None, sent: float, received: float, tolerance: float = CLOCK_TOLERANCE
) -> Finding:
    """The node's clock against this machine's: it read CLOCK somewhere between SENT and RECEIVED (this
    machine's clock), so it is off by more than TOLERANCE only if it lies outside that window widened
    by TOLERANCE. No round trip counts as skew."""
    if clock is None:
        return Finding("clock", host, "skip", "the node did not say its time")
    fix = (
        "run time sync on the node (chrony or systemd-timesyncd: timedatectl set-ntp true); logs of "
        "different nodes are merged by their time stamps"
    )
    if clock < sent - tolerance:
        return Finding("clock", host, "warn", f"{sent - clock:.1f} s behind this machine's clock", fix)
    if clock > received + tolerance:
        return Finding("clock", host, "warn", f"{clock - received:.1f} s ahead of this machine's clock", fix)
    window = max(0.0, received - sent)
    return Finding(
        "clock", host, "pass", f"within {tolerance:g} s of this machine's clock (measured to {window:.2f} s)"
    )
