"""Provides a real multi-host Ray cluster on this machine: a jump host, a head and worker hosts, each a
network namespace with its own IP on a private bridge, its own host name, its own OpenSSH server and its
own Ray node; and the faults users meet on real clusters, on demand.

Topology (one run; N = a /24 that no route of the machine covers, picked at start)::

    login (this process, the root namespace)  10.231.N.1   on the bridge ckmh<PID>br
      jump     10.231.N.2    sshd only
      head     10.231.N.3    sshd, Ray head (GCS :6379, dashboard 0.0.0.0:8265)
      worker1  10.231.N.11   sshd, Ray worker node (1 CPU, 1 logical GPU)
      worker2  10.231.N.12   ...

The login side reaches only the jump host's and the head's sshd (port 22), never a Ray port, as from an
HPC login node: routing rules inside each host (`ip rule ... prohibit`) drop every reply to the login
address but sshd's, so a connection from the login side to any other port gets no answer. The hosts reach
each other freely. The cockpit reaches the head as `head` (ProxyJump `jump`) with the SSH config the
harness writes (`ssh_config`, `cli_args()`), and each worker through the head by the worker's own IP, as
the product does (`cockpit.core.ssh.link`): those logins come from the head's address in the worker's
sshd log (`logins()`).

Use::

    with multihost(tmp_path) as cluster:            # or the session fixture `multihost` (tests/conftest.py)
        run_cockpit("status", cluster.target, *cluster.cli_args(), "--json")
        cluster.run(cluster.head, "hostname")       # a command inside a host (its namespace and name)
        with cluster.link_cut(cluster.workers[0]):  # faults: see the methods under "Faults"
            ...

What a test reaches (all on `MultiHost`):

* hosts: `jump`, `head`, `workers`, `ray_hosts` (head first), `host(name or host name or IP)`; each `Host`
  has `name`, `hostname`, `ip`, `netns`, `root` (its files), `sshd_log`, `ray_logs`, `pids()`.
* the cockpit's side: `target` (`"head"`), `cli_args()`, `connect_options()`, `ssh_config`, `known_hosts`,
  `client_key`, `token_file`, `login_ip`.
* inside the cluster: `run(host, *argv)` / `popen(host, argv)` (a command on that host), `connect(host,
  ip, port)` (a TCP connection from a host, or from the login side with None), `dashboard(path[, body])`
  (the head's REST API from the head), `alive_nodes()`, `wait_nodes()`, `submit_job(entrypoint, id)`,
  `job_logs(id)`, `dashboard_pid()`, `logins(host)` (where each SSH login its sshd accepted came from).
* faults: `cut_link`/`restore_link` (`link_cut`), `slow_link`/`clear_slow_link` (tc netem; where the kernel
  has none, `netem_available` is False, `netem_reason` says why and `slow_link` raises NetemUnavailable),
  `drop_packets`/`clear_drops` (random loss with nftables inside the host's namespace, where tc netem is
  missing: `loss_available`, `loss_reason`),
  `stop_sshd`/`start_sshd`, `change_host_key` (then `trust_host_keys` to make it whole), `kill_host`/
  `start_host`, `stop_ray` (a host's Ray alone), `kill_dashboard`, `restart_head(workers=True)` (a new Ray
  session at the same address, the workers joined again).
* what the start cost: `timings` (seconds by phase), `start_cpu_seconds`.

A fault test that leaves a host broken makes it whole before it ends (`restore_link`, `start_sshd`,
`start_host`, `trust_host_keys`): the cluster is shared by the session. `restart_head` ends every job,
the session's `multihost_job` included.

Cleanup: `close()` (the `with` block, an atexit hook, SIGTERM) kills every process inside the run's
namespaces (`ip netns pids`: Ray, sshd, the commands run there) and deletes the namespaces, the bridge and
its links; a run killed with SIGKILL is removed by the next one (`netns.remove_stale`). `python -m
tests.harness.multihost` starts one and waits (the teardown test drives it).
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from tests.harness import netns
from tests.harness.cluster import FAST_HEALTH_CHECKS
from tests.harness.sshd import ensure_openssh, generate_key, log_tail, write_sshd_config

WORKERS = 3
GCS_PORT = 6379
DASHBOARD_PORT = 8265
SSH_PORT = 22
TOKEN = "multihost-harness-token-0123456789abcdef"
"""Ray's auth token for the harness's clusters (token auth on, as `cockpit local up` does)."""
START_TIMEOUT = 120.0
"""How long a start waits for sshd, the Ray nodes and their joining (a busy 2-core machine is slow)."""
RAY_NODE_PORTS = {
    "node-manager-port": 6380,
    "object-manager-port": 6381,
    "dashboard-agent-listen-port": 52365,
    "dashboard-agent-grpc-port": 52366,
    "runtime-env-agent-port": 52367,
    "metrics-export-port": 52368,
}
"""The ports of every Ray node of the harness (each host has its own; the head's GCS and dashboard are
`GCS_PORT` and `DASHBOARD_PORT`)."""
MARK = "COCKPIT_MULTIHOST"
"""Every process the harness starts in a host carries MARK=<its run's prefix> in its environment (and
passes it on to its children: Ray's daemons, workers and job drivers), so a test can prove none is left."""
RAY_ENV = {
    **FAST_HEALTH_CHECKS,
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_AUTH_MODE": "token",
    "RAY_AUTH_TOKEN": TOKEN,
    # A raylet waits this long for its node's agents (Python: seconds of imports) to say where they
    # listen, then aborts; on a 2-core machine busy with other tests they can need more than 15 s. (Ray
    # 2.60's raylet still waits 15 s for the dashboard agent's port file whatever this says.)
    "RAY_agent_register_timeout_ms": "120000",
}
START_NICENESS = -10
"""The priority a node's Ray processes start at, until its `ray start` is over (see `_ray_start`)."""
RAY_START_ATTEMPTS = 3
"""A node whose `ray start` failed is started again (its Ray processes killed first), up to this many
times: Ray 2.60's raylet aborts when its dashboard agent has not written its port file within 15 s, which
a machine loaded by other tests can make it miss (the agent's imports are seconds of CPU)."""
"""Environment of every Ray process of the harness: a dead host is DEAD in ~3 s (`FAST_HEALTH_CHECKS`)."""


RULES_TO_DROP = """table inet {table} {{
    chain incoming {{
        type filter hook input priority 0; policy accept;
        {match}counter drop
    }}
    chain outgoing {{
        type filter hook output priority 0; policy accept;
        {match}counter drop
    }}
}}
"""
"""Each packet in and out dropped where MATCH holds (`loss_match`)."""


def loss_match(percent: float) -> str:
    """The nftables match for PERCENT of the packets at random: a number of 0-9,999 below 100 for 1 %."""
    below = round(percent * 100)
    return "" if below >= 10_000 else f"numgen random mod 10000 < {max(0, below)} "


def _nft_program() -> str | None:
    """nftables' `nft` (in /usr/sbin, which a user's PATH may lack), or None."""
    return shutil.which("nft") or next(
        (p for p in ("/usr/sbin/nft", "/sbin/nft") if os.access(p, os.X_OK)), None
    )


class NetemUnavailable(RuntimeError):
    """The kernel has no `sch_netem`: delay and loss cannot be made here (`MultiHost.netem_reason`)."""


LOSS_TABLE = "cockpit_loss"
"""The nftables table `drop_packets` makes inside a host's namespace (gone with the namespace)."""


@dataclass(eq=False)
class Host:
    """One machine of the cluster: a network namespace with its own IP, host name, sshd and Ray node."""

    name: str
    """`jump`, `head`, `worker1` ...: the harness's name, and the SSH config's alias for it."""
    hostname: str
    """Its host name (`hostname` inside it, what Ray reports), `mh-<name>`."""
    ip: str
    netns: str
    veth: str
    """The root-side end of its link to the bridge (`cut_link` takes it down)."""
    root: Path
    """Its private directory: host key, sshd config and log, Ray's temp dir."""
    ray: bool
    """Whether it runs a Ray node (the jump host does not)."""
    host_public_key: str = ""
    anchor: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    """A `sleep` holding the host's UTS namespace (its host name); every command enters it."""
    sshd: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def host_key(self) -> Path:
        return self.root / "ssh_host_ed25519_key"

    @property
    def sshd_log(self) -> Path:
        return self.root / "sshd.log"

    @property
    def ray_temp_dir(self) -> Path:
        """Ray's `--temp-dir` of this host (`/tmp/ckmh<PID>/<name>`: Ray's socket paths must stay under
        107 characters, which a pytest temporary directory would pass); its logs are under
        `session_latest/logs`. Removed with the cluster, its logs copied to `root/ray-logs` first."""
        return netns.scratch_dir(self.netns.rsplit("-", 1)[0]) / self.name

    @property
    def ray_logs(self) -> Path:
        return self.ray_temp_dir / "session_latest" / "logs"

    @property
    def is_head(self) -> bool:
        return self.name == "head"

    def pids(self) -> list[int]:
        """Every live process of this host (`ip netns pids`)."""
        return netns.pids_in(self.netns)


class MultiHost:
    """A running multi-host cluster (see the module docstring); made by `multihost()`, ended by `close()`."""

    def __init__(self, root: Path, workers: int = WORKERS, ray: bool = True) -> None:
        self.root = root.resolve()
        self.prefix = netns.run_prefix()
        self.bridge = f"{self.prefix}br"
        self.subnet = ""
        self.login_ip = ""
        self.with_ray = ray
        self.hosts: dict[str, Host] = {}
        self.client_key = self.root / "id_ed25519"
        self.known_hosts = self.root / "known_hosts"
        self.ssh_config = self.root / "ssh_config"
        self.token_file = self.root / "token"
        self.user = pwd.getpwuid(os.getuid()).pw_name
        self.timings: dict[str, float] = {}
        """Seconds of each start phase: `namespaces` (namespaces, links, keys), `sshd` (until every host's
        sshd listens), `ray` (from then until every node is ALIVE and named), `total`."""
        self.netem_available = False
        self.netem_reason = "not checked yet"
        self.loss_available = False
        self.loss_reason = "not checked yet"
        self._workers = workers
        self._closed = False
        self._close_lock = threading.RLock()
        self._closing = False
        """Set first thing in `close()`: the start threads stop waiting and start nothing more."""
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(4, workers + 2))
        self._sshd = ""
        self._saved_handlers: dict[int, Any] = {}
        self._sshd_ready: dict[str, float] = {}
        self.start_cpu_seconds = 0.0
        """CPU seconds the hosts' processes (Ray's daemons, sshd) had used when the start was over."""

    # -- what tests use ---------------------------------------------------------------------------

    @property
    def jump(self) -> Host:
        return self.hosts["jump"]

    @property
    def head(self) -> Host:
        return self.hosts["head"]

    @property
    def workers(self) -> list[Host]:
        return [h for h in self.hosts.values() if h.name.startswith("worker")]

    @property
    def ray_hosts(self) -> list[Host]:
        """The head, then the workers: the hosts with a Ray node."""
        return [self.head, *self.workers]

    target = "head"
    """The cockpit's TARGET for this cluster: the SSH config's alias of the head (through `jump`)."""

    def cli_args(self) -> list[str]:
        """The options every cockpit command needs after TARGET to reach this cluster."""
        return [
            "--ssh-config",
            str(self.ssh_config),
            "--dashboard-port",
            str(DASHBOARD_PORT),
            "--token-file",
            str(self.token_file),
        ]

    def connect_options(self, **options: Any) -> Any:
        """`ConnectOptions` for `open_connection(parse_target(cluster.target), ...)`."""
        from cockpit.core.connect.connection import ConnectOptions

        return ConnectOptions(
            ssh_config=str(self.ssh_config),
            dashboard_port=DASHBOARD_PORT,
            token_file=str(self.token_file),
            **options,
        )

    def host(self, name_or_ip: str) -> Host:
        """The host by its name (`worker2`), host name (`mh-worker2`) or IP."""
        for host in self.hosts.values():
            if name_or_ip in (host.name, host.hostname, host.ip):
                return host
        raise KeyError(name_or_ip)

    def command(self, host: Host, argv: Sequence[str]) -> list[str]:
        """ARGV as run inside HOST: its network namespace and host name (`nsenter` into its anchor)."""
        if host.anchor is None or host.anchor.poll() is not None:
            return ["nsenter", f"--net=/run/netns/{host.netns}", "--", *argv]
        return ["nsenter", "-t", str(host.anchor.pid), "-n", "-u", "--", *argv]

    def run(
        self,
        host: Host,
        *argv: str,
        timeout: float = 60.0,
        check: bool = True,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run ARGV inside HOST (its network and host name; same files and users); raises on a non-zero
        exit when CHECK."""
        done = subprocess.run(
            self.command(host, argv),
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        if check and done.returncode != 0:
            raise RuntimeError(
                f"{' '.join(argv)} on {host.name} exited {done.returncode}: {done.stderr[-2000:]}"
            )
        return done

    def popen(self, host: Host, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        """Start ARGV inside HOST in a session of its own; it ends with the host (or `close()`)."""
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        env = dict(kwargs.pop("env", None) or os.environ)
        env[MARK] = self.prefix
        return subprocess.Popen(self.command(host, argv), start_new_session=True, env=env, **kwargs)

    def connect(self, host: Host | None, address: str, port: int, timeout: float = 2.0) -> Any:
        """A TCP connection to ADDRESS:PORT from inside HOST (None: from the login side, this process)."""
        return netns.connect_from(None if host is None else host.netns, address, port, timeout)

    def dashboard(self, path: str, body: Any = None, timeout: float = 5.0) -> Any:
        """GET PATH of the head's dashboard (POST BODY as JSON when given), from inside the head with the
        token, as a program on the head would; the parsed JSON."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
        request = urllib.request.Request(
            f"http://127.0.0.1:{DASHBOARD_PORT}{path}", data=data, headers=headers
        )

        def call() -> Any:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return json.loads(response.read() or b"null")

        return netns.inside(self.head.netns, call)

    def submit_job(self, entrypoint: str, submission_id: str) -> str:
        """Submit a job to the head's dashboard (its entrypoint runs on the head; the hosts share this
        machine's files, so a path here is a path there); returns its submission id."""
        doc = self.dashboard("/api/jobs/", {"entrypoint": entrypoint, "submission_id": submission_id})
        return str(doc["submission_id"])

    def job_logs(self, submission_id: str) -> str:
        """The driver's log of a job so far."""
        return str(self.dashboard(f"/api/jobs/{submission_id}/logs")["logs"])

    def alive_nodes(self) -> list[dict[str, Any]]:
        """The ALIVE nodes of the dashboard's `/api/v0/nodes` (`node_ip`, `node_name`, ...)."""
        doc = self.dashboard("/api/v0/nodes?limit=1000&detail=true")
        return [row for row in doc["data"]["result"]["result"] if row.get("state") == "ALIVE"]

    def reported_hostnames(self) -> dict[str, str]:
        """IP -> host name, as the head's reporter summary (`/nodes?view=summary`) has them so far."""
        doc = self.dashboard("/nodes?view=summary")
        return {str(e.get("ip")): str(e.get("hostname")) for e in doc["data"]["summary"]}

    def wait_nodes(self, count: int | None = None, timeout: float = START_TIMEOUT) -> list[dict[str, Any]]:
        """Wait until COUNT nodes (default: every Ray host) are ALIVE, and (for every Ray host) the head's
        reporter knows each by its host name, as the cockpit will show them; returns the ALIVE nodes."""
        wanted = len(self.ray_hosts) if count is None else count
        deadline = time.monotonic() + timeout
        alive: list[dict[str, Any]] = []
        while time.monotonic() < deadline and not self._closing:
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                alive = self.alive_nodes()
                named = count is not None or self.reported_hostnames() == {
                    h.ip: h.hostname for h in self.ray_hosts
                }
                if len(alive) >= wanted and named:
                    return alive
            time.sleep(0.3)
        raise RuntimeError(
            f"{len(alive)} of {wanted} Ray nodes alive after {timeout:.0f} s; head's log: "
            f"{self.head.ray_logs}\n{log_tail(self.head.root / 'ray-start.log')}"
        )

    def logins(self, host: Host) -> list[str]:
        """Where each SSH login HOST's sshd accepted came from (one address per login, oldest first)."""
        try:
            text = host.sshd_log.read_text(errors="replace")
        except OSError:
            return []
        return [
            line.split(" from ", 1)[1].split()[0]
            for line in text.splitlines()
            if "Accepted publickey" in line
        ]

    # -- faults -----------------------------------------------------------------------------------

    def cut_link(self, host: Host) -> None:
        """HOST's cable pulled: its link to the bridge down (its processes run on, unreachable)."""
        netns.ip("link", "set", host.veth, "down")

    def restore_link(self, host: Host, timeout: float = 10.0) -> None:
        """HOST's cable back: returns once its bridge port forwards again (a link set up comes up a moment
        later, longer on a loaded machine), or after TIMEOUT."""
        netns.ip("link", "set", host.veth, "up")
        port = Path("/sys/class/net") / host.veth
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                up = (port / "operstate").read_text().strip() == "up"
                state = port / "brport" / "state"  # 3: forwarding
                if up and (not state.exists() or state.read_text().strip() == "3"):
                    return
            time.sleep(0.05)

    @contextlib.contextmanager
    def link_cut(self, host: Host) -> Iterator[None]:
        """HOST unreachable for the block, then back."""
        self.cut_link(host)
        try:
            yield
        finally:
            self.restore_link(host)

    def slow_link(self, host: Host, delay_ms: int = 200, loss_percent: float = 0.0) -> None:
        """Delay (each way) and drop packets on HOST's link with `tc netem`. Raises NetemUnavailable."""
        if not self.netem_available:
            raise NetemUnavailable(self.netem_reason)
        spec = ["delay", f"{delay_ms}ms", *(["loss", f"{loss_percent}%"] if loss_percent else [])]
        for dev, ns in ((host.veth, None), ("eth0", host.netns)):
            self._tc(ns, "qdisc", "replace", "dev", dev, "root", "netem", *spec)

    def clear_slow_link(self, host: Host) -> None:
        for dev, ns in ((host.veth, None), ("eth0", host.netns)):
            self._tc(ns, "qdisc", "del", "dev", dev, "root", check=False)

    def drop_packets(self, host: Host, percent: float) -> None:
        """Drop PERCENT of the packets HOST's processes send and receive (its sshd, the connections it
        makes for a jump), at random, with nftables inside HOST's namespace: loss without tc netem. Only
        the harness's own namespace is touched; the table goes with it. Raises RuntimeError where
        `loss_available` is False."""
        if not self.loss_available:
            raise RuntimeError(self.loss_reason)
        self._nft(
            host.netns, "-f", "-", rules=RULES_TO_DROP.format(table=LOSS_TABLE, match=loss_match(percent))
        )

    def dropped(self, host: Host) -> int:
        """Packets `drop_packets` has dropped on HOST so far (its rules' counters), 0 without the table."""
        listed = self._nft(host.netns, "list", "table", "inet", LOSS_TABLE, check=False)
        return sum(int(n) for n in re.findall(r"counter packets (\d+)", listed))

    def clear_drops(self, host: Host) -> None:
        self._nft(host.netns, "delete", "table", "inet", LOSS_TABLE, check=False)

    @staticmethod
    def _nft(ns: str, *args: str, rules: str | None = None, check: bool = True) -> str:
        """`nft ARGS` inside namespace NS (RULES on its stdin); its output."""
        command = ["ip", "netns", "exec", ns, _nft_program() or "nft", *args]
        done = subprocess.run(command, input=rules, capture_output=True, text=True, check=False)
        if check and done.returncode != 0:
            raise RuntimeError(f"nft in {ns}: {done.stderr.strip() or f'exit {done.returncode}'}")
        return done.stdout

    def stop_sshd(self, host: Host) -> None:
        """HOST's sshd gone, with every connection to it (its other processes run on)."""
        process = host.sshd
        if process is None:
            return
        # The listener stopped first (no connection forks meanwhile), then it, every connection and the
        # commands under them killed (found by their parents before the listener's death orphans them).
        os.kill(process.pid, signal.SIGSTOP)
        for pid in [process.pid, *_descendants(process.pid, host.pids())]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        process.wait(timeout=10)
        host.sshd = None

    def start_sshd(self, host: Host) -> None:
        """HOST's sshd (again), with its host key; returns once it listens on HOST's IP:22."""
        if host.sshd is not None and host.sshd.poll() is None:
            return
        host.sshd = self.popen(
            host,
            [self._sshd, "-D", "-e", "-E", str(host.sshd_log), "-f", str(host.root / "sshd_config")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + START_TIMEOUT
        while not netns.listening(host.sshd.pid, host.ip, SSH_PORT):
            if host.sshd.poll() is not None or time.monotonic() > deadline or self._closing:
                raise RuntimeError(f"sshd of {host.name} did not listen:\n{log_tail(host.sshd_log)}")
            time.sleep(0.02)
        self._sshd_ready[host.name] = time.monotonic()

    def change_host_key(self, host: Host) -> str:
        """Give HOST a new host key (as a reinstalled machine has) and restart its sshd; the login side's
        known_hosts keeps the old one. Returns the new public key."""
        self.stop_sshd(host)
        host.host_key.unlink()
        host.host_key.with_name(host.host_key.name + ".pub").unlink()
        host.host_public_key = generate_key(host.host_key, f"{host.hostname}-new")
        self.start_sshd(host)
        return host.host_public_key

    def trust_host_keys(self) -> None:
        """Write the login side's known_hosts afresh from every host's current key (after
        `change_host_key`, to make the cluster whole again)."""
        self._write_client_files()

    def kill_host(self, host: Host) -> list[int]:
        """Every process of HOST killed at once (SIGKILL), as a machine that lost power; its link stays up
        (add `cut_link` for a host that no longer answers ARP). Returns the pids killed."""
        killed = netns.kill_all_in(host.netns)
        for process in (host.anchor, host.sshd):
            if process is not None:
                process.wait(timeout=10)
        host.anchor = host.sshd = None
        return killed

    def start_host(self, host: Host) -> None:
        """HOST booted again after `kill_host`: its host name, its sshd (same host key), its Ray node
        (joining the head at the same address); waits until its node is ALIVE."""
        self._boot(host)
        self.start_sshd(host)
        if host.ray and self.with_ray:
            self._ray_start(host)
            if not host.is_head:
                self._wait_node(host)

    def dashboard_pid(self) -> int:
        """The head's dashboard process (Ray's `dashboard.py`, not the agents)."""
        for pid in self.head.pids():
            if "dashboard/dashboard.py" in _cmdline(pid):
                return pid
        raise LookupError("the head has no dashboard process")

    def kill_dashboard(self) -> int:
        """The head's dashboard process alone killed (SIGKILL); the GCS and the raylets live on."""
        pid = self.dashboard_pid()
        os.kill(pid, signal.SIGKILL)
        return pid

    def stop_ray(self, host: Host) -> None:
        """Every Ray process of HOST killed; its sshd (and the logins under it) stays."""
        keep = {p.pid for p in (host.anchor, host.sshd) if p is not None}
        for pid in host.pids():
            if pid not in keep and _parent(pid) not in keep:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(
            p not in keep and _parent(p) not in keep for p in host.pids()
        ):
            time.sleep(0.05)

    def restart_head(self, workers: bool = True) -> None:
        """The whole head killed and started again at the same address: a new Ray session (new GCS, no
        jobs). WORKERS: also restart every worker's Ray node so it joins the new head, one after the
        other (several `ray start` at once on a busy 2-core machine miss Ray's startup wait), and wait
        until all are ALIVE. Their raylets are stopped before the head starts again: `ray start --head`
        refuses an address that a live raylet's command line names as its GCS (Ray's own check,
        `find_gcs_addresses`), and theirs name the old head; nor should a raylet of the old session meet
        the new GCS. Without WORKERS their raylets stay, as on a cluster whose head alone came back.
        The head's start is tried a second time when a busy machine makes `ray start` time out."""
        self.kill_host(self.head)
        restart = workers and self.with_ray
        if restart:
            for worker in self.workers:
                self.stop_ray(worker)
        try:
            self.start_host(self.head)
        except RuntimeError:
            self.kill_host(self.head)
            self.start_host(self.head)
        if restart:
            self._start_workers()
            self.wait_nodes()

    # -- start and stop ---------------------------------------------------------------------------

    def start(self) -> None:
        """Make the namespaces and links, then start every host (in parallel) and wait for Ray."""
        began = time.monotonic()
        self._sshd = ensure_openssh()
        self.root.mkdir(parents=True, exist_ok=True)
        self.token_file.write_text(TOKEN)
        self.token_file.chmod(0o600)
        netns.remove_stale()
        netns.claim(self.prefix)
        with netns.subnet_lock():
            self.subnet = netns.free_subnet(os.getpid() % 256)
            self.login_ip = f"{self.subnet}.1"
            netns.ip("link", "add", self.bridge, "type", "bridge")
            netns.ip("addr", "add", f"{self.login_ip}/24", "dev", self.bridge)
            netns.ip("link", "set", self.bridge, "up")
        names = ["jump", "head", *(f"worker{i}" for i in range(1, self._workers + 1))]
        for index, name in enumerate(names):
            last = 2 + index if index < 2 else 10 + index - 1
            host = Host(
                name=name,
                hostname=f"mh-{name}",
                ip=f"{self.subnet}.{last}",
                netns=f"{self.prefix}-{name}",
                veth=f"{self.prefix}v{index}",
                root=self.root / name,
                ray=name != "jump",
            )
            self.hosts[name] = host
            self._make_namespace(host)
        self._check_netem()
        self._check_loss()
        generate_key(self.client_key, f"multihost-login@{self.user}")
        for host in self.hosts.values():
            host.root.mkdir(parents=True, exist_ok=True)
            host.host_public_key = generate_key(host.host_key, host.hostname)
            authorized = host.root / "authorized_keys"
            authorized.write_text(self.client_key.with_name(self.client_key.name + ".pub").read_text())
            write_sshd_config(host.root, host.ip, SSH_PORT, host.host_key, authorized, self.user)
        self._write_client_files()
        self.timings["namespaces"] = time.monotonic() - began

        def boot(host: Host) -> None:
            self._boot(host)
            self.start_sshd(host)

        sshd_started = time.monotonic()
        boots = {h.name: self._pool.submit(boot, h) for h in self.hosts.values()}
        if self.with_ray:
            # The head first: a worker's `ray start` gives up when the head's node is not in the GCS within
            # its own wait, and the head's raylet registers only once the head's dashboard is up.
            boots["head"].result()
            self._ray_start(self.head)
            self._start_workers()
        _raise_first(list(boots.values()))
        self.timings["sshd"] = max(self._sshd_ready.values()) - sshd_started
        if self.with_ray:
            self.wait_nodes()
            self.timings["ray"] = time.monotonic() - sshd_started
        self.start_cpu_seconds = sum(_cpu_seconds(pid) for h in self.hosts.values() for pid in h.pids())
        self.timings["total"] = time.monotonic() - began

    def _start_workers(self) -> None:
        """Start the workers' Ray nodes one after the other, each as soon as the one before is past its
        raylet's 15 s wait for its dashboard agent (the agent wrote its port file): several nodes'
        Python imports at once on two cores would make every agent late."""
        started = []
        for worker in self.workers:
            started.append(self._pool.submit(self._ray_start, worker))
            deadline = time.monotonic() + START_TIMEOUT
            while not started[-1].done() and not self._closing and time.monotonic() < deadline:
                if any(worker.ray_temp_dir.glob("session_*/dashboard_agent_listen_port_*")):
                    break
                time.sleep(0.1)
        _raise_first(started)

    def _make_namespace(self, host: Host) -> None:
        netns.ip("netns", "add", host.netns)
        netns.ip("link", "add", host.veth, "type", "veth", "peer", "name", "eth0", "netns", host.netns)
        netns.ip("link", "set", host.veth, "master", self.bridge, "up")
        for args in (
            ("link", "set", "lo", "up"),
            ("addr", "add", f"{host.ip}/24", "dev", "eth0"),
            ("link", "set", "eth0", "up"),
        ):
            netns.ip(*args, netns=host.netns)
        # The login side gets answers from sshd alone (source port 22 on the jump host and the head),
        # from nothing on the workers: its connections to any other port go unanswered.
        if host.name in ("jump", "head"):
            rule = ("rule", "add", "to", self.login_ip, "ipproto", "tcp", "sport", str(SSH_PORT))
            netns.ip(*rule, "lookup", "main", "pref", "100", netns=host.netns)
        netns.ip("rule", "add", "to", self.login_ip, "prohibit", "pref", "200", netns=host.netns)

    def _check_netem(self) -> None:
        probe = subprocess.run(
            ["tc", "qdisc", "add", "dev", self.jump.veth, "root", "netem", "delay", "1ms"],
            capture_output=True,
            text=True,
            check=False,
        )
        if probe.returncode == 0:
            self._tc(None, "qdisc", "del", "dev", self.jump.veth, "root", check=False)
            self.netem_available, self.netem_reason = True, "tc netem available"
        else:
            why = probe.stderr.strip() or f"tc exited {probe.returncode}"
            self.netem_available = False
            self.netem_reason = (
                f"tc netem is not available on this kernel ({why}): the slow link's delay comes from a "
                "relay on the login side, its loss from nftables where `nft` is installed"
            )

    def _check_loss(self) -> None:
        if _nft_program() is None:
            self.loss_reason = "no `nft` here (Debian's nftables): packet loss tests without it"
            return
        try:
            self._probe_loss()
        except RuntimeError as exc:
            self.loss_reason = f"nftables does not work in a namespace here ({exc})"
        else:
            self.loss_available, self.loss_reason = True, "nftables available"

    def _probe_loss(self) -> None:
        """The loss table made (dropping nothing) and removed in the jump host's namespace."""
        self._nft(
            self.jump.netns, "-f", "-", rules=RULES_TO_DROP.format(table=LOSS_TABLE, match=loss_match(0))
        )
        self._nft(self.jump.netns, "delete", "table", "inet", LOSS_TABLE)

    @staticmethod
    def _tc(ns: str | None, *args: str, check: bool = True) -> None:
        command = ["tc", *(["-n", ns] if ns else []), *args]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)}: {done.stderr.strip()}")

    def _write_client_files(self) -> None:
        self.known_hosts.write_text("".join(f"{h.ip} {h.host_public_key}\n" for h in self.hosts.values()))
        blocks = []
        for host in self.hosts.values():
            lines = [
                f"Host {host.name}",
                f"    HostName {host.ip}",
                f"    User {self.user}",
                f"    IdentityFile {self.client_key}",
                f"    UserKnownHostsFile {self.known_hosts}",
                "    StrictHostKeyChecking yes",
                "    IdentitiesOnly yes",
            ]
            if host.name != "jump":
                lines.append(f"    ProxyJump {'jump' if host.is_head else 'head'}")
            blocks.append("\n".join(lines) + "\n")
        self.ssh_config.write_text("\n".join(blocks))

    def _boot(self, host: Host) -> None:
        """HOST's anchor: a `sleep` in its namespace with its own host name, which commands enter."""
        host.anchor = subprocess.Popen(
            [
                "nsenter",
                f"--net=/run/netns/{host.netns}",
                "--",
                "unshare",
                "--uts",
                "--",
                "sh",
                "-c",
                f"hostname {host.hostname} && exec sleep infinity",
            ],
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, MARK: self.prefix},
        )
        deadline = time.monotonic() + START_TIMEOUT
        while _comm(host.anchor.pid) != "sleep":
            if host.anchor.poll() is not None or time.monotonic() > deadline or self._closing:
                raise RuntimeError(f"{host.name} did not boot (exit {host.anchor.poll()})")
            time.sleep(0.01)

    def _ray_start(self, host: Host) -> None:
        ray = Path(sys.executable).parent / "ray"
        common = [
            f"--node-ip-address={host.ip}",
            f"--temp-dir={host.ray_temp_dir}",
            # Fixed ports, free on each host (its own namespace), as on real machines.
            *(f"--{flag}={port}" for flag, port in RAY_NODE_PORTS.items()),
            "--num-cpus=1",
            f"--num-gpus={0 if host.is_head else 1}",
            "--object-store-memory=100000000",
            "--disable-usage-stats",
        ]
        if host.is_head:
            # `ray start --head` refuses a port that a raylet's --gcs-address names, looking at every
            # process of the machine: here the other hosts' raylets (on real machines it cannot see
            # them). It looks only when the address file of the last start names the same address.
            (host.ray_temp_dir / "ray_current_cluster").unlink(missing_ok=True)
            args = [
                "start",
                "--head",
                f"--port={GCS_PORT}",
                "--dashboard-host=0.0.0.0",
                f"--dashboard-port={DASHBOARD_PORT}",
                "--include-dashboard=true",
                *common,
            ]
        else:
            args = ["start", f"--address={self.head.ip}:{GCS_PORT}", *common]
        env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
        env.update(RAY_ENV)
        env["PATH"] = f"{ray.parent}{os.pathsep}{env.get('PATH', '')}"
        env["RAY_TMPDIR"] = str(host.ray_temp_dir)
        host.ray_temp_dir.mkdir(parents=True, exist_ok=True)
        log = host.root / "ray-start.log"
        for attempt in range(1, RAY_START_ATTEMPTS + 1):
            # Started at a higher priority (nice -10), put back to 0 once up: Ray 2.60's raylet aborts
            # when its dashboard agent has not written its port file within 15 s, and on a 2-core
            # machine shared with other tests the agent's imports (seconds of CPU) can take longer.
            command = ["nice", "-n", str(START_NICENESS), str(ray), *args]
            with open(log, "ab") as out:
                process = self.popen(host, command, stdout=out, stderr=subprocess.STDOUT, env=env)
            deadline = time.monotonic() + START_TIMEOUT
            while (code := process.poll()) is None:
                if self._closing or time.monotonic() > deadline:
                    process.kill()
                    process.wait()
                    raise RuntimeError(f"`ray start` on {host.name} did not finish:\n{log_tail(log)}")
                time.sleep(0.05)
            if code == 0:
                for pid in host.pids():
                    with contextlib.suppress(OSError):
                        if os.getpriority(os.PRIO_PROCESS, pid) == START_NICENESS:
                            os.setpriority(os.PRIO_PROCESS, pid, 0)
                return
            if attempt < RAY_START_ATTEMPTS and not self._closing:
                self.stop_ray(host)
        raise RuntimeError(f"`ray start` on {host.name} failed {RAY_START_ATTEMPTS} times:\n{log_tail(log)}")

    def _wait_node(self, host: Host) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                if any(n.get("node_ip") == host.ip for n in self.alive_nodes()):
                    return
            time.sleep(0.3)
        raise RuntimeError(f"{host.name}'s Ray node did not join within {START_TIMEOUT:.0f} s")

    def close(self) -> None:
        """Kill every process of every host, delete the namespaces, the bridge and the links; safe to call
        more than once, from any exit path."""
        self._closing = True
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        for host in self.hosts.values():
            with contextlib.suppress(RuntimeError):
                netns.kill_all_in(host.netns)
        # The start threads return once what they waited on is dead; then nothing can start any more.
        self._pool.shutdown(wait=True, cancel_futures=True)
        for host in self.hosts.values():  # Ray's logs, kept with the rest of the host's files
            with contextlib.suppress(OSError):
                shutil.copytree(host.ray_logs, host.root / "ray-logs", symlinks=True, dirs_exist_ok=True)
        netns.remove_run(self.prefix)  # (its scratch directory too: Ray's temp dirs)
        for host in self.hosts.values():
            for process in (host.anchor, host.sshd):
                if process is not None:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        process.wait(timeout=5)
        # A veth goes with its namespace, asynchronously: wait until `ip link` no longer shows ours.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(n.startswith(self.prefix) for n in netns.links()):
            time.sleep(0.05)
        atexit.unregister(self.close)
        self._restore_signals()

    def install_exit_hooks(self) -> None:
        """`close()` at interpreter exit and on SIGTERM (then the previous handler runs: by default the
        process ends as SIGTERM ends it); SIGINT raises KeyboardInterrupt, which the `with` block sees."""
        atexit.register(self.close)
        if threading.current_thread() is not threading.main_thread():
            return

        def on_term(signum: int, frame: FrameType | None) -> None:
            previous = self._saved_handlers.get(signum)
            self.close()  # (puts the previous handler back)
            if callable(previous):
                previous(signum, frame)
            elif previous != signal.SIG_IGN:
                os.kill(os.getpid(), signum)  # the default action: end as SIGTERM would

        self._saved_handlers[signal.SIGTERM] = signal.signal(signal.SIGTERM, on_term)

    def _restore_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for signum, handler in self._saved_handlers.items():
            signal.signal(signum, handler)
        self._saved_handlers.clear()

    def __enter__(self) -> MultiHost:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def leftovers(prefix: str) -> list[str]:
    """What is left of run PREFIX: its namespaces, its links, and every live process carrying its MARK
    (`pid name`); empty once it was removed."""
    left = [f"namespace {n}" for n in netns.namespaces() if n.startswith(prefix + "-")]
    if netns.scratch_dir(prefix).exists():
        left.append(f"directory {netns.scratch_dir(prefix)}")
    left += [
        f"link {n}" for n in netns.links() if n.startswith(prefix) and not n[len(prefix) :][:1].isdigit()
    ]
    needle = f"{MARK}={prefix}\0".encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and entry.name != str(os.getpid()):
            try:
                environ = (entry / "environ").read_bytes()
            except OSError:
                continue
            if needle in environ and _comm(int(entry.name)) and not _zombie(int(entry.name)):
                left.append(f"process {entry.name} {_comm(int(entry.name))}")
    return left


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2 :][:1] in ("Z", "X")


def _cpu_seconds(pid: int) -> float:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _descendants(pid: int, among: list[int]) -> list[int]:
    """The processes of AMONG below PID (children, their children ...)."""
    parents = {p: _parent(p) for p in among}
    found: list[int] = []
    wanted = {pid}
    while True:
        more = [p for p, parent in parents.items() if parent in wanted and p not in found]
        if not more:
            return found
        found.extend(more)
        wanted.update(more)


def _raise_first(futures: list[concurrent.futures.Future[Any]]) -> None:
    for future in futures:
        future.result()


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _parent(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat[stat.rindex(")") + 2 :].split()[1])


@contextlib.contextmanager
def multihost(root: Path, workers: int = WORKERS, ray: bool = True) -> Iterator[MultiHost]:
    """A started cluster (a jump host, a head, WORKERS worker hosts; RAY False: sshd only) under ROOT,
    removed on every exit path. Raises RuntimeError when it cannot start (after removing what it made)."""
    cluster = MultiHost(root, workers=workers, ray=ray)
    cluster.install_exit_hooks()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m tests.harness.multihost ROOT [--workers N] [--no-ray]`: start, print one JSON line
    (`ready`, the timings, the hosts), then wait for SIGTERM/SIGINT; prints `starting PREFIX` first."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tests.harness.multihost")
    parser.add_argument("root", type=Path)
    parser.add_argument("--workers", type=int, default=WORKERS)
    parser.add_argument("--no-ray", action="store_true")
    args = parser.parse_args(argv)
    # Ctrl+C ends it even when it was started with SIGINT ignored (a shell's `cmd &` ignores it, and an
    # ignored signal is inherited): Python then installs no KeyboardInterrupt handler of its own.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    print(f"starting {netns.run_prefix()}", flush=True)
    with multihost(args.root, workers=args.workers, ray=not args.no_ray) as cluster:
        hosts = {h.name: {"ip": h.ip, "netns": h.netns, "pids": h.pids()} for h in cluster.hosts.values()}
        print(json.dumps({"ready": cluster.prefix, "timings": cluster.timings, "hosts": hosts}), flush=True)
        while True:
            time.sleep(3600)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
