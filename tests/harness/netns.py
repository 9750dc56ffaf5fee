"""Provides the network plumbing of the multi-host harness (`multihost`): network namespaces on a private
Linux bridge, their processes, the choice of a subnet nobody routes, and the removal of what a killed
earlier run left behind.

Names: every namespace and link of one run starts with `ckmh<PID>` (PID: the process that made them), so
parallel runs never collide and a later run can tell whose they are. A run is stale when that process is
gone (or the pid now belongs to another process: the start time kept in `RUN_DIR/<PID>` differs);
`remove_stale` kills the processes still inside its namespaces and deletes the namespaces and links.

Everything here needs root and iproute2 (`ip netns`); `unavailable()` says why not, for a skip.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

PREFIX = "ckmh"
"""Every namespace and link the harness makes is named `ckmh<PID>...` (links: 15 characters at most)."""
RUN_DIR = Path("/run/cockpit-multihost")
"""One file per live run (its owner's start time), and the lock taken while a subnet is chosen."""
SUBNET_BASE = "10.231"
"""The /24s tried, 10.231.N.0/24: one that no route or address of the machine covers is taken."""

_OWNED = re.compile(rf"^{PREFIX}(\d+)")
T = TypeVar("T")


def _which(name: str) -> str | None:
    return shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"]))


def unavailable() -> str | None:
    """Why namespaces cannot be made here (a sentence for a skip), or None."""
    if os.geteuid() != 0:
        return "the multi-host harness makes network namespaces (ip netns): needs root"
    for tool in ("ip", "nsenter", "unshare", "hostname"):
        if _which(tool) is None:
            return f"the multi-host harness needs `{tool}` (iproute2, util-linux), not found"
    probe = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        return f"`ip netns` is not available here: {probe.stderr.strip() or probe.returncode}"
    return None


def ip(*args: str, check: bool = True, netns: str | None = None) -> str:
    """`ip ARGS` (in NETNS with `ip -n`); its stdout. Raises RuntimeError with ip's own message."""
    command = ["ip", *(["-n", netns] if netns else []), *args]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {done.stderr.strip()}")
    return done.stdout


def namespaces() -> list[str]:
    """The names `ip netns list` shows."""
    return [line.split()[0] for line in ip("netns", "list", check=False).splitlines() if line.strip()]


def links() -> list[str]:
    """The names of the root namespace's links (`ip link`), without the `@peer` part."""
    names = []
    for line in ip("-o", "link", "show", check=False).splitlines():
        parts = line.split(":", 2)
        if len(parts) > 1:
            names.append(parts[1].strip().split("@")[0])
    return names


def pids_in(netns: str) -> list[int]:
    """The live processes inside NETNS (`ip netns pids`)."""
    out = ip("netns", "pids", netns, check=False)
    return [int(word) for word in out.split() if word.isdigit()]


def kill_all_in(netns: str, timeout: float = 10.0) -> list[int]:
    """SIGKILL every process of NETNS until none is left (a dying Ray can still fork); returns the pids."""
    killed: list[int] = []
    deadline = time.monotonic() + timeout
    while True:
        pids = pids_in(netns)
        if not pids:
            return killed
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        killed.extend(p for p in pids if p not in killed)
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes of namespace {netns} survive SIGKILL: {pids}")
        time.sleep(0.05)


def start_time(pid: int) -> str | None:
    """The process's start time (field 22 of /proc/PID/stat), None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split()[19]


def run_prefix(pid: int | None = None) -> str:
    """`ckmh<PID>`: the names of the run owned by PID (this process by default)."""
    return f"{PREFIX}{os.getpid() if pid is None else pid}"


def scratch_dir(prefix: str) -> Path:
    """`/tmp/PREFIX`: short paths for what a run's hosts keep (Ray's temp dirs); removed with the run."""
    return Path("/tmp") / prefix


def claim(prefix: str) -> None:
    """Record this process as the live owner of PREFIX (its start time), so no other run removes it."""
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    (RUN_DIR / prefix).write_text(start_time(os.getpid()) or "")


def _owner_alive(pid: int) -> bool:
    now = start_time(pid)
    if now is None:
        return False
    try:
        recorded = (RUN_DIR / run_prefix(pid)).read_text().strip()
    except OSError:
        return True  # alive and no record: perhaps mid-start; never remove a live process's run
    return recorded == now


def owned_names() -> dict[str, list[str]]:
    """Run prefix -> the namespaces, links and scratch directories carrying it (any owner)."""
    found: dict[str, list[str]] = {}
    scratch = [p.name for p in scratch_dir(PREFIX).parent.glob(f"{PREFIX}*") if p.is_dir()]
    for name in [*namespaces(), *links(), *scratch]:
        match = _OWNED.match(name)
        if match:
            found.setdefault(run_prefix(int(match.group(1))), []).append(name)
    return found


def remove_run(prefix: str) -> None:
    """Kill what runs in PREFIX's namespaces, then delete them and its links and its record."""
    own = [n for n in namespaces() if n.startswith(prefix + "-")]
    for name in own:
        kill_all_in(name)
    for name in own:
        ip("netns", "delete", name, check=False)
    for name in links():
        if _OWNED.match(name) and name.startswith(prefix) and not name[len(prefix) :][:1].isdigit():
            ip("link", "delete", name, check=False)
    shutil.rmtree(scratch_dir(prefix), ignore_errors=True)
    with contextlib.suppress(OSError):
        (RUN_DIR / prefix).unlink()


def remove_stale() -> list[str]:
    """Remove the runs whose owner is gone (a run killed with SIGKILL, a crashed session); their prefixes."""
    removed = []
    for prefix in owned_names():
        pid = int(prefix[len(PREFIX) :])
        if not _owner_alive(pid):
            remove_run(prefix)
            removed.append(prefix)
    if RUN_DIR.is_dir():
        for record in RUN_DIR.glob(f"{PREFIX}*"):
            if not _owner_alive(int(record.name[len(PREFIX) :])):
                record.unlink(missing_ok=True)
    return removed


@contextlib.contextmanager
def subnet_lock() -> Iterator[None]:
    """Held while a run picks its subnet and makes its bridge, so two runs starting together differ."""
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    with open(RUN_DIR / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def free_subnet(start: int = 0) -> str:
    """`10.231.N` for the first N (from START, wrapping) that no route or address of the machine covers."""
    used = ip("-4", "route", "show", "table", "all", check=False) + ip("-4", "-o", "addr", check=False)
    taken = set(re.findall(r"\b(\d+\.\d+\.\d+)\.\d+", used))
    # A route wider than a /24 over 10.231 (10.0.0.0/8, 10.231.0.0/16) covers every candidate.
    wide = re.search(r"\b(10\.0\.0\.0/8|10\.231\.0\.0/(1[6-9]|2[0-3]))\b", used)
    if wide:
        raise RuntimeError(f"a route of this machine covers {SUBNET_BASE}.0.0/16 ({wide.group(1)})")
    for offset in range(256):
        candidate = f"{SUBNET_BASE}.{(start + offset) % 256}"
        if candidate not in taken:
            return candidate
    raise RuntimeError(f"every {SUBNET_BASE}.N.0/24 is routed on this machine")


_CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def inside(netns: str, work: Callable[[], T]) -> T:
    """Run WORK in a thread that joined NETNS (setns(2) changes only the calling thread), and return what
    it returned: a socket made there belongs to NETNS, and stays usable from any thread."""
    result: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            fd = os.open(f"/run/netns/{netns}", os.O_RDONLY)
            try:
                if _libc.setns(fd, _CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), f"setns into {netns} failed")
            finally:
                os.close(fd)
            result.append(work())
        except BaseException as exc:  # handed to the caller's thread
            failure.append(exc)

    thread = threading.Thread(target=run, name=f"in-{netns}", daemon=True)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return result[0]


def connect_from(netns: str | None, address: str, port: int, timeout: float = 2.0) -> socket.socket:
    """A TCP connection to ADDRESS:PORT opened from NETNS (None: this process's own namespace)."""

    def connect() -> socket.socket:
        return socket.create_connection((address, port), timeout=timeout)

    return connect() if netns is None else inside(netns, connect)


def listening(pid: int, address: str, port: int) -> bool:
    """Whether process PID holds a TCP socket listening on ADDRESS:PORT (read in its own namespace)."""
    fd_dir = Path(f"/proc/{pid}/fd")
    inodes = set()
    try:
        for fd in fd_dir.iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        lines = Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return False
    wanted = f"{socket.inet_aton(address)[::-1].hex().upper()}:{port:04X}"
    return any(f[1] == wanted and f[3] == "0A" and f[9] in inodes for f in (ln.split() for ln in lines))
