"""`cockpit local up | status | down` on a cluster of its own (the session cluster stays untouched)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from cockpit.core.errors import LocalClusterError
from cockpit.core.local import processes, record
from tests.harness.cluster import cluster_processes, process_names, processes_named
from tests.harness.run import run_cockpit

pytestmark = pytest.mark.cluster


def cockpit(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_cockpit(*args, env=env, timeout=180)


def test_up_status_down_leaves_no_ray_process(tmp_path: Path, ray_cluster: object) -> None:
    env = {**os.environ, "COCKPIT_STATE_DIR": str(tmp_path)}
    up = cockpit("local", "up", "--nodes", "2", "--gpus-per-node", "1", "--cpus-per-node", "1", env=env)
    assert up.returncode == 0, up.stderr
    assert "2/2 nodes alive" in up.stderr
    cluster = record.load(tmp_path)
    assert cluster is not None
    try:
        before = process_names(cluster_processes(cluster))
        names = set(before.values())
        # Daemons, and the Python agents that overwrite their environment with their title.
        assert {"raylet", "gcs_server"} <= names and any(n.startswith("ray::Dashboard") for n in names), names
        assert (tmp_path / "token").stat().st_mode & 0o777 == 0o600
        status = cockpit("local", "status", env=env)
        assert status.returncode == 0, status.stderr
        assert f"http://127.0.0.1:{cluster.dashboard_port}" in status.stdout
        assert status.stdout.count("ALIVE") == 2

        again = cockpit("local", "up", env=env)
        assert again.returncode == 1
        assert (
            again.stderr.startswith("cockpit: a local cluster is already running")
            and again.stderr.count("\n") == 1
        )

        as_json = cockpit("status", "local", "--json", env=env)
        doc = json.loads(as_json.stdout)
        assert doc["alive_nodes"] == 2 and doc["gpus"] == 2
    finally:
        down = cockpit("local", "down", env=env)
    assert down.returncode == 0 and "stopped" in down.stdout
    # Checked by the pids seen before `down`, not by the same lookup `down` uses.
    assert process_names(list(before)) == {}
    assert record.load(tmp_path) is None
    assert not Path(cluster.root).exists()
    # The session cluster was not touched by that `down`.
    assert cluster_processes(ray_cluster.cluster)  # type: ignore[attr-defined]
    assert processes_named("raylet", "gcs_server")  # the session cluster's, still running


def test_status_without_cluster_is_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "COCKPIT_STATE_DIR": str(tmp_path)}
    result = cockpit("status", "local", env=env)
    assert result.returncode == 1
    assert result.stderr == "cockpit: no local cluster is running: start one with `cockpit local up`.\n"
    status = cockpit("local", "status", env=env)
    assert status.returncode == 1 and status.stdout == "" and "no local cluster" in status.stderr


def test_kill_node_requires_a_cluster(tmp_path: Path) -> None:
    with pytest.raises(LocalClusterError, match="no local cluster"):
        processes.kill_node(1, directory=tmp_path)


def test_bad_shape_is_one_sentence(tmp_path: Path) -> None:
    env = {**os.environ, "COCKPIT_STATE_DIR": str(tmp_path)}
    result = cockpit("local", "up", "--nodes", "1", "--cpus-per-node", "0", env=env)
    assert result.returncode == 1
    assert result.stderr == "cockpit: --gpus-per-node must be 0 or more and --cpus-per-node 1 or more.\n"
