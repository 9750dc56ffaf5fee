"""Provides a real Ray head started without its dashboard (`ray start --head --include-dashboard=false`,
as Ray advises for large clusters), with one worker node, token auth on, for the tests of a head the
cockpit reaches over SSH without a dashboard.

It is remembered like the cockpit's local cluster (`record`, in its own state directory, never the
session cluster's), so `processes.down` stops exactly its processes (`COCKPIT_CLUSTER_ID`), whatever
else runs on the machine.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cockpit.core.local import ownership, processes
from cockpit.core.local.record import LocalCluster, LocalNode, save
from tests.harness.sshd import find_free_port

GPUS_PER_NODE = 2
NODES_PROGRAM_MARK = b"_cfg = json.loads(sys.argv[1])"
"""A line of the cockpit's nodes program, as it shows in its command line on the head."""


@dataclass(frozen=True)
class HeadlessHead:
    cluster: LocalCluster
    state_dir: Path

    @property
    def dashboard_port(self) -> int:
        """The port given to `--dashboard-port`: nothing listens there."""
        return self.cluster.dashboard_port


def _start(cluster: LocalCluster, node: LocalNode, token: str) -> subprocess.Popen[bytes]:
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
            "--head",
            f"--port={cluster.gcs_port}",
            "--include-dashboard=false",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={cluster.dashboard_port}",
            f"--ray-client-server-port={cluster.client_port}",
        ]
    else:
        args = [f"--address={cluster.gcs_address}"]
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
    env.update(
        COCKPIT_CLUSTER_ID=cluster.cluster_id,
        COCKPIT_NODE_INDEX=str(node.index),
        RAY_USAGE_STATS_ENABLED="0",
        RAY_AUTH_MODE="token",
        RAY_AUTH_TOKEN=token,
    )
    node.start_log = str(Path(cluster.root) / f"node{node.index}-start.log")
    with open(node.start_log, "wb") as log:
        return subprocess.Popen(
            [str(Path(sys.executable).parent / "ray"), "start", *args, *common],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )


def _started(proc: subprocess.Popen[bytes], node: LocalNode) -> None:
    if proc.wait(timeout=120) != 0:
        raise RuntimeError(
            f"ray start (node {node.index}) failed: {Path(node.start_log).read_text()[-2000:]}"
        )


@contextmanager
def headless_head(state_dir: Path, workers: int = 1) -> Iterator[HeadlessHead]:
    """A head without its dashboard, up; WORKERS nodes (2 logical GPUs each) joining it from then on (a
    test sees them join); everything stopped on exit."""
    root = ownership.make_root()
    cluster = LocalCluster(
        root=str(root),
        cluster_id=uuid.uuid4().hex,
        gcs_port=find_free_port(),
        dashboard_port=find_free_port(),
        client_port=find_free_port(),
        auth_token=True,
    )
    cluster.nodes.extend(
        LocalNode(
            index=i,
            temp_dir=str(root / f"n{i}"),
            agent_port=find_free_port(),
            num_gpus=GPUS_PER_NODE,
            num_cpus=1,
        )
        for i in range(1 + workers)
    )
    token = secrets.token_urlsafe(32)
    save(cluster, state_dir)
    joining: list[tuple[subprocess.Popen[bytes], LocalNode]] = []
    try:
        head = cluster.nodes[0]
        _started(_start(cluster, head, token), head)
        joining = [(_start(cluster, node, token), node) for node in cluster.nodes[1:]]
        yield HeadlessHead(cluster=cluster, state_dir=state_dir)
        for proc, node in joining:
            _started(proc, node)
    finally:
        for proc, _node in joining:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        processes.down(directory=state_dir)


def programs_on_head() -> list[int]:
    """The cockpit's node programs still running on the head (this machine)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    if NODES_PROGRAM_MARK in fh.read():
                        found.append(int(entry))
            except OSError:
                continue
    return found


def none_left_on_head(timeout: float = 15.0) -> None:
    """Fails unless the node programs are gone within TIMEOUT (one ends with its SSH session: its
    watchdog looks every second)."""
    deadline = time.monotonic() + timeout
    while programs_on_head() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert programs_on_head() == []
