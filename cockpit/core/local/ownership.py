"""Provides which processes, ports and directories belong to the local cluster, and signals that reach
only its processes.

Everything here reads what the kernel says (/proc), never what a state file or a port's answer claims:

* A process is the cluster's when its environment carries `COCKPIT_CLUSTER_ID` (every process `local up`
  starts inherits it), or when it descends from one that does (Ray's Python agents write their process
  titles over their environment). Only our own processes' environments are readable, which is exactly
  the set we may stop.
* A pid can change hands between the moment it is found and a signal (the process exits, the pid is
  reused). So each member is remembered with its start time, and checked again right before every
  signal (same start time; still carrying the id, if it carried it); the signal then goes through a
  pidfd opened before that check, so it reaches that very process or none.
* A port is the cluster's when every listener on it is a socket one of its processes holds.
* A directory is the cluster's to remove when `local up` made it: directly in the temp directory, named
  with its prefix, a real directory (not a link), owned by this user.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT_PARENT = "/tmp"
"""Where `local up` makes the cluster's directory: short, because Ray's socket paths must fit 107 bytes."""


def root_prefix() -> str:
    return f"rc-{os.getuid()}-"


def make_root() -> Path:
    """A new private, unpredictable directory for a cluster's temp dirs and logs."""
    return Path(tempfile.mkdtemp(prefix=root_prefix(), dir=ROOT_PARENT))


def is_our_root(root: str) -> bool:
    """Whether `root` (from the state file) is a directory `make_root` made, safe to remove."""
    path = Path(root)
    if str(path.parent) != ROOT_PARENT or not path.name.startswith(root_prefix()):
        return False
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat after the command name: [state, ppid, ...]; field 22 (start time) is index 19."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(") ", 1)[-1].split()
    except OSError:
        return None


def running(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] != "Z"


def _start_time(pid: int) -> str | None:
    fields = _stat_fields(pid)
    return fields[19] if fields is not None and len(fields) > 19 and fields[0] != "Z" else None


def _carries(pid: int, needles: list[bytes]) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            variables = fh.read().split(b"\0")
    except OSError:
        return False
    return all(needle in variables for needle in needles)


def needles(cluster_id: str, node_index: int | None = None) -> list[bytes]:
    """The environment entries that mark the cluster's processes (of one node, if given)."""
    marks = [f"COCKPIT_CLUSTER_ID={cluster_id}".encode()]
    if node_index is not None:
        marks.append(f"COCKPIT_NODE_INDEX={node_index}".encode())
    return marks


@dataclass(frozen=True)
class Member:
    """One process of the cluster, as found."""

    pid: int
    started: str
    """Its start time (clock ticks since boot): a reused pid has another."""
    marked: bool
    """It carried the cluster's id itself (else: it descends from a process that did)."""

    def still(self, marks: list[bytes]) -> bool:
        """Whether the process is still this one, alive, and (if it was marked) still marked."""
        return _start_time(self.pid) == self.started and (not self.marked or _carries(self.pid, marks))


def _children() -> dict[int, list[int]]:
    """Parent pid -> child pids, for every process."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if fields is not None and len(fields) > 1:
                children.setdefault(int(fields[1]), []).append(int(entry))
    return children


def members(marks: list[bytes]) -> list[Member]:
    """Live processes carrying `marks`, and their descendants (never this process)."""
    found: dict[int, Member] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        pid = int(entry)
        before = _start_time(pid)
        # Read the start time on both sides of the environment: the mark belongs to that process.
        if before is not None and _carries(pid, marks) and _start_time(pid) == before:
            found[pid] = Member(pid, before, marked=True)
    children = _children()
    pending = list(found)
    while pending:
        for child in children.get(pending.pop(), ()):
            started = _start_time(child)
            if child not in found and child != os.getpid() and started is not None:
                found[child] = Member(child, started, marked=False)
                pending.append(child)
    return [found[pid] for pid in sorted(found)]


def send(member: Member, marks: list[bytes], sig: int) -> bool:
    """Send `sig` if the process is still the cluster's (`Member.still`); False if it was not sent."""
    pidfd = None
    with contextlib.suppress(AttributeError, OSError):  # no pidfd (old kernel): os.kill after the check
        pidfd = os.pidfd_open(member.pid)
    try:
        if not member.still(marks):
            return False
        if pidfd is not None:
            signal.pidfd_send_signal(pidfd, sig)
        else:
            os.kill(member.pid, sig)
        return True
    except OSError:
        return False
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _listening_inodes(port: int) -> set[str]:
    """The socket inodes listening on TCP `port` (any address, IPv4 or IPv6), from /proc/net."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as fh:
                rows = fh.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def _socket_inodes(pid: int) -> set[str]:
    inodes: set[str] = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[len("socket:[") : -1])
    return inodes


def holds_port(marks: list[bytes], port: int) -> bool:
    """Whether every listener on `port` is a socket of one of the cluster's processes.

    What a recorded port is checked with before the cluster's token is sent there: a port can change
    hands once the cluster is gone, to another user's program too, and a reply proves nothing (anyone
    can answer like a dashboard); the socket's owner does.
    """
    listening = _listening_inodes(port)
    if not listening:
        return False
    held: set[str] = set()
    for member in members(marks):
        held |= _socket_inodes(member.pid) & listening
        if held == listening:
            return True
    return False
