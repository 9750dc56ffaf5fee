"""Provides a real one-node Slurm cluster (munged, slurmctld, slurmd) for tests.

Everything the cluster needs lives under one private directory: its own munge key, socket, pid,
log and seed files; a ``slurm.conf`` with free ports, its own state and spool directories, pid and
log files and a unique ``ClusterName``. Nothing reads or writes /etc/slurm, /etc/munge,
/run/munge or the default spool directories, so several test sessions (and a site's own Slurm)
run side by side. The daemons run as root (``SlurmUser=root``), listen on the host name's loopback
address only (``CommunicationParameters=NoCtldInAddrAny,NoInAddrAny``) and accept only requests
signed with the private munge key.

The one node is this host (``hostname -s``) claiming 16 CPUs and 4 logical GPUs
(``SlurmdParameters=config_overrides``). Slurm 22.05 drops a ``gpu`` GRES without ``File=``
("Removing file-less GPU"), so the harness gives it four device nodes in its own directory, made
with /dev/null's numbers (``mknod c 1 3``): never opened, since ``TaskPlugin=task/none`` constrains
no devices. Jobs see ``CUDA_VISIBLE_DEVICES=0,1`` for ``--gpus-per-node 2``. Without slurmdbd a
job's ``TRES`` field carries no ``gres/gpu`` (``AccountingStorageTRES=gres/gpu`` is fatal without
slurmdbd); the request shows as ``TresPerNode=gres:gpu:2`` and the allocation in
``scontrol show job -dd`` as ``JOB_GRES=gpu:2`` and ``GRES=gpu:2(IDX:0-1)``.

Ended jobs stay visible to ``scontrol show job`` for ``MinJobAge=600`` seconds (there is no
accounting, so no ``sacct``).

Typical use from a fixture::

    with start_slurm(tmp_path_factory.mktemp("slurm")) as cluster:
        job = cluster.sbatch("#!/bin/bash\\nsleep 60\\n", "--hold")
        cluster.wait_state(job, "PENDING")

``stop()`` cancels the cluster's jobs, stops its three daemons and kills what its jobs left behind
(processes whose environment names this cluster's ``SLURM_CONF``); it runs at interpreter exit too.
"""

from __future__ import annotations

import atexit
import contextlib
import ipaddress
import os
import re
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from tests.harness.sshd import find_free_port, log_tail, process_table

__all__ = [
    "ENDED_STATES",
    "NODE_CPUS",
    "NODE_GPUS",
    "PARTITION",
    "SlurmCluster",
    "missing_slurm_binaries",
    "parse_job_record",
    "start_slurm",
]

NODE_CPUS = 16
"""CPUs the one node claims (whatever the host has)."""

NODE_GPUS = 4
"""Logical GPUs (``gres/gpu``) the one node claims."""

PARTITION = "debug"
"""The one partition, the default."""

STARTUP_TIMEOUT_S = 60.0
"""How long `start_slurm` waits for munged, then slurmctld, then the node to be idle."""

STOP_TIMEOUT_S = 15.0
"""How long `SlurmCluster.stop` waits for jobs to end and each daemon to exit before SIGKILL."""

ENDED_STATES = frozenset(
    {
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "TIMEOUT",
    }
)
"""Job states a job never leaves."""

_SEARCH_PATH = os.pathsep.join(
    [os.environ.get("PATH", ""), "/usr/sbin", "/sbin", "/usr/local/sbin", "/usr/bin", "/bin"]
)
_DAEMONS = ("munged", "slurmctld", "slurmd")
_CLIENTS = ("sbatch", "scontrol", "squeue", "sinfo", "scancel", "srun")
_SOCKET_PATH_MAX = 107
"""sockaddr_un's sun_path holds 108 bytes, the terminating NUL included."""


def _which(name: str) -> str | None:
    # Not resolved: Debian's /usr/sbin/slurmd is an alternatives link to slurmd-wlm, and slurmd started
    # as slurmd-wlm reads no gres from slurm.conf ("4 more configured than expected in slurm.conf").
    return shutil.which(name, path=_SEARCH_PATH)


def missing_slurm_binaries() -> list[str]:
    """Return the Slurm and munge programs the harness needs that are not installed."""
    return [name for name in (*_DAEMONS, *_CLIENTS) if _which(name) is None]


def parse_job_record(line: str) -> dict[str, str]:
    """Parse one ``scontrol show job -o`` line into ``{field: value}``, enough for tests.

    Fields are ``Key=value`` separated by spaces, and values are not quoted: a value with spaces
    (``Comment=hello world``) runs up to the next `` Key=``. A value that itself contains
    `` Word=`` is split there. A key seen twice (``-dd``'s per-node ``Nodes=``) keeps its first value.
    """
    record: dict[str, str] = {}
    matches = list(re.finditer(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=", line))
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(line)
        record.setdefault(match.group(1), line[match.end() : end].strip())
    return record


def _loopback_address(host: str) -> str:
    """Return the address ``host`` resolves to, which must be a loopback address.

    With ``NoInAddrAny`` slurmd (and slurmctld with ``NoCtldInAddrAny``) bind the address that
    gethostname() resolves to; a non-loopback one would open the daemons to the network.
    """
    try:
        infos = socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM)
    except OSError as error:
        raise RuntimeError(
            f"this host's name {host!r} does not resolve ({error}); add it to /etc/hosts"
        ) from error
    address = str(infos[0][4][0])
    if not ipaddress.ip_address(address).is_loopback:
        raise RuntimeError(
            f"this host's name {host!r} resolves to {address}, not a loopback address; the Slurm "
            f"harness listens on the host name's address only, so add '127.0.1.1 {host}' to /etc/hosts"
        )
    return address


def _process_environ(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""


def _command_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _live_processes() -> dict[int, int]:
    """Return ``{pid: ppid}`` for every live (not zombie) process."""
    return {pid: ppid for pid, (ppid, state) in process_table().items() if state not in ("Z", "X")}


def _ancestors(pid: int, table: dict[int, int]) -> set[int]:
    found: set[int] = set()
    while pid in table and pid not in found:
        found.add(pid)
        pid = table[pid]
    return found


def _with_descendants(pids: set[int], table: dict[int, int]) -> set[int]:
    children: dict[int, list[int]] = {}
    for child, parent in table.items():
        children.setdefault(parent, []).append(child)
    found = set(pids)
    pending = list(pids)
    while pending:
        for child in children.get(pending.pop(), []):
            if child not in found:
                found.add(child)
                pending.append(child)
    return found


def _kill_group(process: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM the process group ``process`` leads, then SIGKILL it if it has not exited in time."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=timeout)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


@dataclass(eq=False)
class SlurmCluster:
    """A running one-node Slurm cluster and the environment its client commands need.

    ``env`` is ``os.environ`` (less any ``SLURM_*``) plus ``SLURM_CONF``: pass it to any ``sbatch``,
    ``squeue``, ``scontrol`` (or cockpit) subprocess meant to talk to this cluster.
    """

    root: Path
    conf: Path
    cluster_name: str
    node: str
    node_addr: str
    ctld_port: int
    slurmd_port: int
    munge_socket: Path
    env: dict[str, str]
    log_files: dict[str, Path]
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    jobs_dir: Path = field(default=Path())

    # -- client commands -------------------------------------------------------------------------

    def run(
        self, *argv: str, check: bool = True, cwd: Path | None = None, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run a Slurm client command (``"squeue", "-h"``) against this cluster, in ``cwd`` (the jobs
        directory by default) with ``stdin`` as its input; raise on failure when ``check``, with its
        stderr."""
        result = subprocess.run(
            list(argv),
            env=self.env,
            cwd=cwd or self.jobs_dir,
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        if check and result.returncode != 0:
            said = result.stderr.strip() or result.stdout.strip()
            raise RuntimeError(f"{' '.join(argv)} exited {result.returncode}: {said}")
        return result

    def sbatch(self, script: str | Path, *args: str, cwd: Path | None = None) -> str:
        """Submit a batch job and return its id.

        ``script`` is a file (`Path`) or the script's text (`str`, given to sbatch on stdin;
        ``#!/bin/bash`` is added when it has no ``#!`` line). ``args`` are sbatch options
        (``"--hold"``, ``"--gpus-per-node", "2"``). ``cwd`` is the job's working directory, where
        ``slurm-JOBID.out`` goes by default; the cluster's ``jobs`` directory when not given.
        """
        if isinstance(script, Path):
            result = self.run("sbatch", "--parsable", *args, str(script), cwd=cwd)
        else:
            text = script if script.startswith("#!") else "#!/bin/bash\n" + script
            result = self.run("sbatch", "--parsable", *args, cwd=cwd, stdin=text)
        return result.stdout.strip().split(";")[0]

    def hold(self, job_id: str) -> None:
        """``scontrol hold``: the job stays PENDING with reason JobHeldAdmin (root holds it)."""
        self.run("scontrol", "hold", job_id)

    def release(self, job_id: str) -> None:
        """``scontrol release``: a held job becomes eligible to start."""
        self.run("scontrol", "release", job_id)

    def cancel(self, job_id: str) -> None:
        """``scancel``: the job ends CANCELLED."""
        self.run("scancel", job_id)

    def show(self, job_id: str, *, detail: bool = False) -> dict[str, str]:
        """The job's ``scontrol show job -o`` record (``-dd`` when ``detail``), see `parse_job_record`.

        Raises:
            RuntimeError: the job is not known (never was, or ended more than ``MinJobAge`` ago).
        """
        flags = ["-dd"] if detail else []
        return parse_job_record(self.run("scontrol", *flags, "show", "job", "-o", job_id).stdout.strip())

    def wait_state(self, job_id: str, states: str | Iterable[str], timeout: float = 60.0) -> dict[str, str]:
        """Wait until the job's ``JobState`` is one of ``states``; return its record then.

        Raises:
            AssertionError: the job ended in another state, or ``timeout`` seconds passed; the
                message has the job's record and the daemons' log tails.
        """
        wanted = {states} if isinstance(states, str) else set(states)
        deadline = time.monotonic() + timeout
        while True:
            record = self.show(job_id)
            state = record.get("JobState", "")
            if state in wanted:
                return record
            if state in ENDED_STATES or time.monotonic() > deadline:
                why = "ended" if state in ENDED_STATES else f"is still {state} after {timeout:.0f} s"
                raise AssertionError(
                    f"job {job_id} {why}, not {'/'.join(sorted(wanted))}: Reason={record.get('Reason')} "
                    f"ExitCode={record.get('ExitCode')}\n{self.log_tails()}"
                )
            time.sleep(0.2)

    def job_ids(self) -> list[str]:
        """The ids of the jobs the controller still lists (``squeue``: pending, running, completing)."""
        return self.run("squeue", "-h", "-o", "%i").stdout.split()

    # -- lifecycle -------------------------------------------------------------------------------

    @property
    def daemon_pids(self) -> dict[str, int]:
        """The pids of munged, slurmctld and slurmd as started (whether alive or not)."""
        return {name: process.pid for name, process in self.processes.items()}

    @property
    def running(self) -> bool:
        """Whether all three daemons are alive."""
        return len(self.processes) == len(_DAEMONS) and all(
            process.poll() is None for process in self.processes.values()
        )

    def log_tails(self, lines: int = 25) -> str:
        """The last ``lines`` of each daemon's log, for error messages."""
        return "\n".join(
            f"--- {name} ({path}):\n{log_tail(path, lines)}" for name, path in self.log_files.items()
        )

    def job_processes(self) -> set[int]:
        """Pids of this cluster's job processes and slurmstepds (and what they started), alive now.

        They are recognised by their environment: slurmd passes its ``SLURM_CONF`` to slurmstepd,
        and every job step (``--export=NONE`` included) gets ``SLURM_CONF`` and ``SLURM_JOB_ID``.
        Daemons a job started with setsid and left behind (``ray start``) carry both too.
        """
        marker = f"SLURM_CONF={self.conf}".encode()
        table = _live_processes()
        own = _ancestors(os.getpid(), table)
        found: set[int] = set()
        for pid in table.keys() - own:
            environ = _process_environ(pid).split(b"\0")
            if marker in environ and (
                any(item.startswith(b"SLURM_JOB_ID=") for item in environ)
                or _command_name(pid) == "slurmstepd"
            ):
                found.add(pid)
        return _with_descendants(found, table) - own

    def stop(self) -> None:
        """Cancel every job, stop slurmd, slurmctld and munged, and kill the jobs' leftovers.

        Safe to call more than once and after a failed start; touches no other Slurm or munge.
        """
        atexit.unregister(self.stop)
        ctld = self.processes.get("slurmctld")
        if ctld is not None and ctld.poll() is None:
            with contextlib.suppress(Exception):
                self._cancel_all_jobs()
        for name in ("slurmd", "slurmctld"):
            if name in self.processes:
                _kill_group(self.processes[name], STOP_TIMEOUT_S)
        # slurmstepd daemonizes away from slurmd's process group, and jobs may leave daemons behind.
        for pid in self.job_processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if "munged" in self.processes:
            _kill_group(self.processes["munged"], STOP_TIMEOUT_S)

    def _cancel_all_jobs(self) -> None:
        ids = self.job_ids()
        if ids:
            self.run("scancel", *ids, check=False)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while self.job_ids() and time.monotonic() < deadline:
            time.sleep(0.2)

    def __enter__(self) -> SlurmCluster:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _make_gpu_devices(directory: Path, count: int) -> list[Path]:
    """Create ``count`` device nodes for the logical GPUs (character devices with /dev/null's
    numbers; plain files where mknod is not allowed, which slurmd accepts with an error in its log)."""
    directory.mkdir()
    devices = [directory / f"gpu{index}" for index in range(count)]
    for device in devices:
        try:
            os.mknod(device, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
        except OSError:
            device.touch(mode=0o600)
    return devices


def _slurm_conf(cluster: SlurmCluster) -> str:
    root = cluster.root
    return "\n".join(
        [
            f"ClusterName={cluster.cluster_name}",
            f"SlurmctldHost={cluster.node}({cluster.node_addr})",
            f"SlurmctldPort={cluster.ctld_port}",
            f"SlurmdPort={cluster.slurmd_port}",
            # Bind the host name's (loopback) address, not every interface.
            "CommunicationParameters=NoCtldInAddrAny,NoInAddrAny",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={cluster.munge_socket}",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"StateSaveLocation={root / 'state'}",
            f"SlurmdSpoolDir={root / 'spool'}",
            f"SlurmctldPidFile={root / 'slurmctld.pid'}",
            f"SlurmdPidFile={root / 'slurmd.pid'}",
            f"SlurmctldLogFile={cluster.log_files['slurmctld']}",
            f"SlurmdLogFile={cluster.log_files['slurmd']}",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "SchedulerType=sched/backfill",
            # Backfill every 2 s rather than 30 s, so that pending jobs get their start estimate soon.
            "SchedulerParameters=bf_interval=2",
            "ReturnToService=2",
            # Ended jobs stay in `scontrol show job` for 10 minutes (no slurmdbd, no sacct).
            "MinJobAge=600",
            # Cancelled and timed-out jobs get SIGKILL 5 s after SIGTERM (default 30 s).
            "KillWait=5",
            "MpiDefault=none",
            "SwitchType=switch/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "MailProg=/bin/true",
            "SlurmdParameters=config_overrides",
            "GresTypes=gpu",
            f"NodeName={cluster.node} NodeAddr={cluster.node_addr} CPUs={NODE_CPUS} RealMemory=65536 "
            f"Gres=gpu:{NODE_GPUS} State=UNKNOWN",
            f"PartitionName={PARTITION} Nodes={cluster.node} Default=YES MaxTime=INFINITE State=UP",
            "",
        ]
    )


def _start(argv: list[str], env: dict[str, str], output: Path) -> subprocess.Popen[bytes]:
    with output.open("ab") as sink:
        return subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _wait(
    cluster: SlurmCluster, what: str, ready: Callable[[], bool], timeout: float = STARTUP_TIMEOUT_S
) -> None:
    """Poll ``ready()`` until true; raise with the daemons' log tails if a daemon exits or time runs out."""
    deadline = time.monotonic() + timeout
    while not ready():
        for name, process in cluster.processes.items():
            if process.poll() is not None:
                raise RuntimeError(
                    f"{name} exited with code {process.returncode} while waiting for {what}\n"
                    f"{cluster.log_tails()}"
                )
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not within {timeout:.0f} s\n{cluster.log_tails()}")
        time.sleep(0.2)


def _node_state(cluster: SlurmCluster) -> str:
    result = cluster.run("sinfo", "-h", "-n", cluster.node, "-o", "%T", check=False)
    return result.stdout.strip()


def _client_env(conf: Path) -> dict[str, str]:
    """This process's environment without inherited ``SLURM_*`` variables (tests run inside a Slurm
    job would otherwise pass its job id and options on), plus ``SLURM_CONF``."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("SLURM_")}
    return {**env, "SLURM_CONF": str(conf)}


def start_slurm(workdir: Path) -> SlurmCluster:
    """Start munged, slurmctld and slurmd as root with everything under ``workdir``; return once
    ``sinfo`` shows the node idle. The cluster is also stopped at interpreter exit.

    Raises:
        RuntimeError: not root, Slurm or munge missing, the host name not loopback, or a daemon
            that exits or the node not idle within `STARTUP_TIMEOUT_S` (with the daemons' log tails).
    """
    if os.geteuid() != 0:
        raise RuntimeError("the Slurm harness runs slurmctld and slurmd as root (SlurmUser=root)")
    missing = missing_slurm_binaries()
    if missing:
        raise RuntimeError(
            f"Slurm is not installed ({', '.join(missing)} not found); scripts/test installs "
            "slurmctld, slurmd, slurm-client and munge"
        )
    root = workdir.resolve()
    root.mkdir(parents=True, exist_ok=True)
    node = socket.gethostname().split(".")[0]
    munge_dir = root / "munge"
    munge_socket = munge_dir / "munge.socket"
    if len(str(munge_socket)) > _SOCKET_PATH_MAX:
        raise RuntimeError(f"{munge_socket} is too long for a unix socket; use a shorter work directory")
    ctld_port = find_free_port()
    slurmd_port = find_free_port()
    while slurmd_port == ctld_port:
        slurmd_port = find_free_port()
    cluster = SlurmCluster(
        root=root,
        conf=root / "slurm.conf",
        cluster_name=f"cockpit{secrets.token_hex(4)}",
        node=node,
        node_addr=_loopback_address(node),
        ctld_port=ctld_port,
        slurmd_port=slurmd_port,
        munge_socket=munge_socket,
        env=_client_env(root / "slurm.conf"),
        log_files={name: root / f"{name}.log" for name in _DAEMONS},
        jobs_dir=root / "jobs",
    )
    atexit.register(cluster.stop)
    try:
        _launch(cluster)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _launch(cluster: SlurmCluster) -> None:
    root = cluster.root
    munge_dir = cluster.munge_socket.parent
    munge_dir.mkdir(mode=0o700)
    key = munge_dir / "munge.key"
    key.touch(mode=0o600)
    key.write_bytes(secrets.token_bytes(1024))
    for name in ("state", "spool", "jobs"):
        (root / name).mkdir()
    gpu_dir = root / "gpus"
    devices = _make_gpu_devices(gpu_dir, NODE_GPUS)
    (root / "gres.conf").write_text(f"Name=gpu File={gpu_dir}/gpu[0-{len(devices) - 1}]\n")
    cluster.conf.write_text(_slurm_conf(cluster))

    # -F: stay in the foreground (our child). -f: run although the socket's directory is not
    # world-searchable (pytest's temporary directories are 0700; only root uses this cluster).
    munged = _which("munged") or "munged"
    cluster.processes["munged"] = _start(
        [
            munged,
            "-F",
            "-f",
            f"--key-file={key}",
            f"--socket={cluster.munge_socket}",
            f"--pid-file={munge_dir / 'munged.pid'}",
            f"--log-file={cluster.log_files['munged']}",
            f"--seed-file={munge_dir / 'munged.seed'}",
        ],
        cluster.env,
        cluster.log_files["munged"],
    )
    _wait(cluster, "munged's socket", cluster.munge_socket.exists, timeout=10)

    # slurmstepd inherits slurmd's environment: its SLURM_CONF is how stop() recognises our steps.
    conf = str(cluster.conf)
    cluster.processes["slurmctld"] = _start(
        [_which("slurmctld") or "slurmctld", "-D", "-f", conf], cluster.env, root / "slurmctld.out"
    )
    _wait(cluster, "slurmctld to answer", lambda: "UP" in cluster.run("scontrol", "ping", check=False).stdout)
    cluster.processes["slurmd"] = _start(
        [_which("slurmd") or "slurmd", "-D", "-f", conf], cluster.env, root / "slurmd.out"
    )
    _wait(cluster, f"node {cluster.node} to be idle", lambda: _node_state(cluster) == "idle")
