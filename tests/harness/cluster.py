"""Provides the real local Ray cluster the tests share, started through the cockpit's own `local up`."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cockpit.core.cluster.dashboard import DashboardClient
from cockpit.core.connect.connection import ConnectOptions
from cockpit.core.local import processes, record
from cockpit.core.local.record import LocalCluster

NODES = 3
GPUS_PER_NODE = 2
FAST_HEALTH_CHECKS = {"RAY_health_check_period_ms": "1000", "RAY_health_check_failure_threshold": "3"}
"""Ray's GCS asks each raylet every second and marks a node DEAD after 3 failed asks (Ray's defaults: 3 s
and 5), so a killed node is seen dead in about 3 s, not 15. A check fails only when refused or unanswered
for `health_check_timeout_ms` (10 s, unchanged), so a slow raylet on a busy machine is not declared dead."""

QUIET_LOG_MONITORS = {"RAY_LOG_MONITOR_MANY_FILES_THRESHOLD": "0", "LOG_NAME_UPDATE_INTERVAL_S": "1"}
"""Each node's log monitor (the process that forwards workers' prints to their driver) looks for new log
files once a second instead of on each of its 10 passes a second (Ray does that until a node has 1,000
files): a worker's first lines reach its driver up to a second later. Measured on a 3-node cluster
running two demo jobs: its three monitors 13.6 CPU-s before, 3.9 after; in a whole run they were 86 CPU-s
before (docs/testing.md). Set for every Ray the tests start (tests/conftest.py), the old versions' too;
Ray reads both at the monitor's start."""

NO_PRESTART = {"RAY_prestart_worker_first_driver": "0"}
"""When the first driver connects, each raylet starts two idle Python workers ahead of need (Ray's
`prestart_worker_first_driver`, on by default: it saves a task's first start). The jobs the tests run
want actors, which get workers of their own, so those two are started and never used: about 5 CPU-s per
cluster that runs a job (a 3-node cluster's first demo run: 11 workers started, 9 with this off; later
runs 9 either way). Set for every Ray the tests start, like QUIET_LOG_MONITORS."""


@dataclass
class ClusterHandle:
    """The session cluster: where it is remembered and how to reach its dashboard."""

    cluster: LocalCluster
    state_dir: Path

    @property
    def url(self) -> str:
        return self.cluster.dashboard_url

    @property
    def token_file(self) -> Path:
        """The cluster's auth token (0600), for targets that cannot find it themselves (SSH)."""
        return self.state_dir / "token"

    def client(self) -> DashboardClient:
        return DashboardClient(self.url, token=record.cluster_token(self.state_dir))

    def over_ssh(self, ssh_config: Path, **options: Any) -> ConnectOptions:
        """Options that reach this cluster's dashboard through an sshd on this machine (`head-node`)."""
        return ConnectOptions(
            ssh_config=str(ssh_config),
            dashboard_port=self.cluster.dashboard_port,
            token_file=str(self.token_file),
            **options,
        )


@contextmanager
def running_cluster(
    state_dir: Path, nodes: int = NODES, gpus: int = GPUS_PER_NODE, env: dict[str, str] | None = None
) -> Iterator[ClusterHandle]:
    """Start a cluster remembered in `state_dir` and stop it on exit, even when a test failed. ENV: more
    environment for its Ray processes (set here only while they start)."""
    saved = {name: os.environ.get(name) for name in env or {}}
    os.environ.update(env or {})
    try:
        cluster = processes.up(nodes, gpus, directory=state_dir)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    try:
        yield ClusterHandle(cluster=cluster, state_dir=state_dir)
    finally:
        processes.down(directory=state_dir)


def wait_for(predicate_async, timeout: float = 60.0, interval: float = 0.5):  # type: ignore[no-untyped-def]
    """Poll an async predicate until it returns something truthy; returns that value."""

    async def run():  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        while True:
            value = await predicate_async()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"condition not met within {timeout:.0f} s")
            await asyncio.sleep(interval)

    return run()


def cluster_processes(cluster: LocalCluster) -> list[int]:
    """Live processes carrying the cluster's COCKPIT_CLUSTER_ID (whatever their command line says)."""
    return processes.cluster_pids(cluster)


def processes_named(*names: str) -> list[str]:
    """Live (non-zombie) processes of this user whose name is one of `names`, e.g. raylet, gcs_server."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    stat = fh.read()
            except OSError:
                continue
            name = stat[stat.index("(") + 1 : stat.rindex(")")]
            if name in names and stat.rsplit(") ", 1)[-1][:1] != "Z":
                out.append(f"{entry} {name}")
    return out


def process_names(pids: list[int]) -> dict[int, str]:
    """The name of each pid that is still running (not a zombie)."""
    names = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        if stat.rsplit(") ", 1)[-1][:1] != "Z":
            names[pid] = stat[stat.index("(") + 1 : stat.rindex(")")]
    return names
