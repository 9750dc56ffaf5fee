"""Provides a real multi-node Ray cluster on this machine: `cockpit local up | status | down`, its processes.

What is remembered of the cluster (where, which ports, its token) is `record`, which needs none of this.

Each node is its own `ray start` (own temp dir, own agent port, logical GPUs), the way Slurm or SkyPilot
start nodes on real machines, so everything the cockpit does against it is what it does on a cluster.

Ownership: every Ray process of the cluster inherits `COCKPIT_CLUSTER_ID` (and `COCKPIT_NODE_INDEX`) in
its environment, whatever name it gives itself later; `down` ends exactly the processes carrying this
cluster's id, never another user's or another cluster's Ray, nor a `tail -f` of its logs, nor a process
that took a pid of theirs (`ownership`).

Safety on a shared machine: the dashboard binds 127.0.0.1, and the cluster uses Ray's token auth by
default (a fresh random token, kept in the 0600 state directory), because any local user can reach a
loopback port, and Ray's GCS listens on the machine's address.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path

from cockpit.core.local import ownership
from cockpit.core.local.record import (
    LocalCluster,
    LocalClusterError,
    LocalNode,
    cluster_token,
    forget,
    load,
    save,
    save_token,
)

Progress = Callable[[str], None]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ray_executable() -> str:
    """The `ray` CLI of the Python running the cockpit, so the cluster's Ray matches the demo's."""
    candidate = Path(sys.executable).parent / "ray"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("ray")
    if not found:
        raise LocalClusterError("the `ray` command is not installed here: pip install 'ray[default]'.")
    return found


def _node_env(cluster: LocalCluster, node: LocalNode, token: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
    env["COCKPIT_CLUSTER_ID"] = cluster.cluster_id
    env["COCKPIT_NODE_INDEX"] = str(node.index)
    # Job entrypoints run with the raylet's PATH: put this interpreter's bin first so `python` is ours.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    # A user's ~/.ray/auth_token silently switches new clusters to token mode; decide explicitly.
    env["RAY_AUTH_MODE"] = "token" if token else "disabled"
    if token:
        env["RAY_AUTH_TOKEN"] = token
    else:
        env.pop("RAY_AUTH_TOKEN", None)
    return env


def _http_json(url: str, token: str | None = None, timeout: float = 2.0) -> object:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    with urllib.request.urlopen(request, timeout=timeout) as resp:
        return json.loads(resp.read())


def _alive_nodes(cluster: LocalCluster, token: str | None = None) -> list[dict[str, object]]:
    """The cluster's ALIVE nodes; only call it once `dashboard_is_ours` said so (it sends the token)."""
    url = f"{cluster.dashboard_url}/api/v0/nodes?limit=10000&detail=true"
    doc = _http_json(url, token)
    rows = doc["data"]["result"]["result"]  # type: ignore[index]
    return [r for r in rows if r.get("state") == "ALIVE"]


def _ray_start(cluster: LocalCluster, node: LocalNode, token: str | None) -> subprocess.Popen[bytes]:
    Path(node.temp_dir).mkdir(parents=True, exist_ok=True)
    common = [
        f"--num-cpus={node.num_cpus}",
        f"--num-gpus={node.num_gpus}",
        f"--temp-dir={node.temp_dir}",
        f"--dashboard-agent-listen-port={node.agent_port}",
        "--disable-usage-stats",
    ]
    if node.index == 0:
        args = [
            "start",
            "--head",
            f"--port={cluster.gcs_port}",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={cluster.dashboard_port}",
            f"--ray-client-server-port={cluster.client_port}",
            "--include-dashboard=true",
            *common,
        ]
    else:
        args = ["start", f"--address={cluster.gcs_address}", *common]
    node.start_log = str(Path(cluster.root) / f"node{node.index}-start.log")
    log = open(node.start_log, "wb")  # noqa: SIM115 - handed to the child, closed by it
    proc = subprocess.Popen(
        [_ray_executable(), *args],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=_node_env(cluster, node, token),
        start_new_session=True,
    )
    log.close()
    return proc


def _wait_started(proc: subprocess.Popen[bytes], node: LocalNode, timeout: float) -> None:
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise LocalClusterError(
            f"`ray start` for node {node.index} did not finish within {timeout:.0f} s; read {node.start_log}."
        ) from None
    if code != 0:
        tail = _last_error_line(node.start_log)
        raise LocalClusterError(f"Ray failed to start node {node.index}{tail}; read {node.start_log}.")


def _last_error_line(log_path: str) -> str:
    try:
        lines = [ln.strip() for ln in Path(log_path).read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    for line in reversed(lines):
        if any(word in line for word in ("Error", "error", "failed", "already")):
            return f" ({line[:200]})"
    return ""


def up(
    nodes: int = 3,
    gpus_per_node: int = 2,
    cpus_per_node: int = 2,
    *,
    token: str | None = None,
    auth: bool = True,
    directory: Path | None = None,
    progress: Progress | None = None,
    timeout: float = 120.0,
) -> LocalCluster:
    """Start a head plus `nodes - 1` joined nodes and wait until all are ALIVE.

    Args:
        token: the auth token to use; by default a fresh random one (see the module docstring).
        auth: False starts the cluster without token auth (anyone on this machine can submit jobs).
        directory: state directory (tests use their own so they never touch the user's cluster).

    Raises:
        LocalClusterError: a cluster is already recorded, or Ray failed; the message names the log.
    """
    say = progress or (lambda _msg: None)
    if nodes < 1:
        raise LocalClusterError("--nodes must be at least 1.")
    if gpus_per_node < 0 or cpus_per_node < 1:
        raise LocalClusterError("--gpus-per-node must be 0 or more and --cpus-per-node 1 or more.")
    existing = load(directory)
    if existing is not None and is_running(existing):
        raise LocalClusterError(
            f"a local cluster is already running at {existing.dashboard_url}: "
            "use it, or `cockpit local down` first."
        )
    if existing is not None:
        down(directory=directory)
    root = ownership.make_root()
    try:
        return _start(root, nodes, gpus_per_node, cpus_per_node, token, auth, directory, say, timeout)
    except BaseException as exc:
        # A failure keeps the logs: its message names the one to read. Anything else (Ctrl+C, SIGTERM, a
        # bug) keeps nothing, the directory included, whether or not the cluster was recorded yet; nor
        # does a failure before anything was written (the state directory refused).
        failed = isinstance(exc, LocalClusterError)
        down(directory=directory, keep_logs=failed)
        if ownership.is_our_root(str(root)) and (not failed or not any(root.iterdir())):
            shutil.rmtree(root, ignore_errors=True)
        raise


def _start(
    root: Path,
    nodes: int,
    gpus_per_node: int,
    cpus_per_node: int,
    token: str | None,
    auth: bool,
    directory: Path | None,
    say: Progress,
    timeout: float,
) -> LocalCluster:
    """`up`'s work in ROOT: the token saved, each node started and recorded, all waited for ALIVE."""
    if auth and token is None:
        token = secrets.token_urlsafe(32)
    save_token(token, directory)
    cluster = LocalCluster(
        root=str(root),
        cluster_id=uuid.uuid4().hex,
        gcs_port=_free_port(),
        dashboard_port=_free_port(),
        client_port=_free_port(),
        auth_token=token is not None,
    )
    for index in range(nodes):
        cluster.nodes.append(
            LocalNode(
                index=index,
                temp_dir=str(root / f"n{index}"),
                agent_port=_free_port(),
                num_gpus=gpus_per_node,
                num_cpus=cpus_per_node,
            )
        )
    started = time.monotonic()
    say(f"starting head node (dashboard http://127.0.0.1:{cluster.dashboard_port}) ...")
    head = cluster.nodes[0]
    proc = _ray_start(cluster, head, token)
    save(cluster, directory)
    _wait_started(proc, head, timeout)
    cluster.head_ip = _wait_for_dashboard(cluster, token, started + timeout)
    save(cluster, directory)
    procs = []
    for node in cluster.nodes[1:]:
        procs.append((_ray_start(cluster, node, token), node))
        save(cluster, directory)
    if procs:
        say(f"joining {len(procs)} more node(s) ...")
    for proc, node in procs:
        _wait_started(proc, node, max(5.0, started + timeout - time.monotonic()))
    _wait_for_nodes(cluster, nodes, token, started + timeout, say)
    say(f"{nodes} node(s) up in {time.monotonic() - started:.1f} s")
    return cluster


def _wait_for_dashboard(cluster: LocalCluster, token: str | None, deadline: float) -> str:
    while True:
        try:
            # The port was free when picked; until the dashboard holds it, another program could.
            alive = _alive_nodes(cluster, token) if dashboard_is_ours(cluster) else []
            if alive:
                return str(alive[0].get("node_ip", "127.0.0.1"))
        except (OSError, ValueError, KeyError, TypeError, urllib.error.URLError):
            pass
        if time.monotonic() > deadline:
            raise LocalClusterError(
                f"the dashboard at {cluster.dashboard_url} did not come up; read "
                f"{cluster.nodes[0].temp_dir}/session_latest/logs/dashboard.log."
            )
        time.sleep(0.3)


def _wait_for_nodes(
    cluster: LocalCluster, expected: int, token: str | None, deadline: float, say: Progress
) -> None:
    last = -1
    while True:
        try:
            count = len(_alive_nodes(cluster, token)) if dashboard_is_ours(cluster) else 0
        except (OSError, ValueError, KeyError, TypeError, urllib.error.URLError):
            count = 0
        if count != last:
            say(f"{count}/{expected} nodes alive")
            last = count
        if count >= expected:
            return
        if time.monotonic() > deadline:
            raise LocalClusterError(
                f"only {count} of {expected} nodes joined; read {Path(cluster.root)}/node*-start.log."
            )
        time.sleep(0.3)


def add_node(
    gpus: int = 2,
    cpus: int = 1,
    *,
    directory: Path | None = None,
    timeout: float = 60.0,
) -> LocalNode:
    """Join one more node to the running local cluster (used to show join progress and node death)."""
    cluster = load(directory)
    if cluster is None:
        raise LocalClusterError("no local cluster is running: `cockpit local up` first.")
    if not dashboard_is_ours(cluster):
        raise LocalClusterError(
            f"the local cluster does not hold its dashboard port {cluster.dashboard_port} any more: "
            "`cockpit local down`, then `cockpit local up`."
        )
    token = cluster_token(directory)
    before = len(_alive_nodes(cluster, token))
    node = LocalNode(
        index=max(n.index for n in cluster.nodes) + 1,
        temp_dir=str(Path(cluster.root) / f"n{len(cluster.nodes)}"),
        agent_port=_free_port(),
        num_gpus=gpus,
        num_cpus=cpus,
    )
    cluster.nodes.append(node)
    proc = _ray_start(cluster, node, token)
    save(cluster, directory)
    _wait_started(proc, node, timeout)
    _wait_for_nodes(cluster, before + 1, token, time.monotonic() + timeout, lambda _m: None)
    return node


def cluster_pids(cluster: LocalCluster) -> list[int]:
    """Every live process of the cluster (Ray daemons, workers, job drivers)."""
    return [member.pid for member in ownership.members(ownership.needles(cluster.cluster_id))]


def _terminate(cluster: LocalCluster, grace: float) -> None:
    """SIGTERM, then SIGKILL what is left after `grace` s, then wait (briefly) until init reaps them;
    each signal only to a process that is still the cluster's right then (`ownership.send`)."""
    marks = ownership.needles(cluster.cluster_id)
    left = ownership.members(marks)
    signalled = list(left)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        left = [member for member in left if ownership.send(member, marks, sig)]
        deadline = time.monotonic() + grace
        while left and time.monotonic() < deadline:
            time.sleep(0.1)
            left = [member for member in left if member.still(marks)]
        if not left:
            break
    # Orphaned daemons are reaped by init; wait a little so `pgrep raylet` agrees the cluster is gone.
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and any(m.still(marks) for m in signalled):
        time.sleep(0.1)


def kill_node(index: int, sig: int = signal.SIGKILL, *, directory: Path | None = None) -> None:
    """Kill every process of one node at once, as a crashed machine would (tests use SIGKILL)."""
    cluster = load(directory)
    if cluster is None:
        raise LocalClusterError("no local cluster is running.")
    if all(node.index != index for node in cluster.nodes):
        raise LocalClusterError(f"the local cluster has no node {index}.")
    marks = ownership.needles(cluster.cluster_id, index)
    for member in ownership.members(marks):
        ownership.send(member, marks, sig)


def dashboard_is_ours(cluster: LocalCluster) -> bool:
    """Whether the recorded dashboard port is still the cluster's own (`ownership.holds_port`)."""
    return ownership.holds_port(ownership.needles(cluster.cluster_id), cluster.dashboard_port)


def is_running(cluster: LocalCluster) -> bool:
    return bool(ownership.members(ownership.needles(cluster.cluster_id, 0)))


def down(*, directory: Path | None = None, keep_logs: bool = False, grace: float = 5.0) -> bool:
    """Stop every process of the remembered cluster; True if there was one."""
    cluster = load(directory)
    if cluster is None:
        return False
    _terminate(cluster, grace)
    forget(directory)
    # `root` comes from a file: remove it only if it is what `up` made (never a path put there).
    if not keep_logs and ownership.is_our_root(cluster.root):
        shutil.rmtree(cluster.root, ignore_errors=True)
    return True
