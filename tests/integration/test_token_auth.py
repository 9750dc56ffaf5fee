"""A cluster started with RAY_AUTH_MODE=token: works with the token, one clear sentence without it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from cockpit.core.local.record import LocalCluster
from tests.harness.cluster import NODES, ClusterHandle
from tests.harness.run import run_cockpit
from tests.harness.sshd import start_sshd

pytestmark = pytest.mark.cluster


@pytest.fixture
def token_cluster(ray_cluster: ClusterHandle) -> tuple[LocalCluster, Path]:
    """The session cluster: `local up` starts it with RAY_AUTH_MODE=token and a token of its own (0600);
    the commands here do not know it as the local cluster (`cockpit`)."""
    assert ray_cluster.cluster.auth_token and ray_cluster.token_file.stat().st_mode & 0o777 == 0o600
    return ray_cluster.cluster, ray_cluster.token_file


def cockpit(*args: str, home: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k != "RAY_AUTH_TOKEN"}
    # A private HOME: no ~/.ray/auth_token of the person running the tests is picked up. No local
    # cluster recorded: the session cluster is a cluster at a URL, whose token `local` would send.
    no_local = {"HOME": str(home), "COCKPIT_STATE_DIR": str(home / "no-local-cluster")}
    return run_cockpit(*args, timeout=60, env={**clean, **no_local, **(env or {})})


def test_token_file_works_and_missing_token_is_one_sentence(
    token_cluster: tuple[LocalCluster, Path], tmp_path: Path
) -> None:
    cluster, token_file = token_cluster
    ok = cockpit("status", cluster.dashboard_url, "--token-file", str(token_file), "--json", home=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["alive_nodes"] == NODES

    missing = cockpit("status", cluster.dashboard_url, home=tmp_path)
    assert missing.returncode == 1
    assert missing.stderr == (
        "cockpit: the cluster uses token authentication: pass --token-file FILE or set RAY_AUTH_TOKEN.\n"
    )

    wrong = cockpit("status", cluster.dashboard_url, home=tmp_path, env={"RAY_AUTH_TOKEN": "not-the-token"})
    assert wrong.returncode == 1 and "rejected the token" in wrong.stderr

    by_env = cockpit(
        "status", cluster.dashboard_url, home=tmp_path, env={"RAY_AUTH_TOKEN": token_file.read_text().strip()}
    )
    assert by_env.returncode == 0, by_env.stderr

    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text(token_file.read_text())
    by_home = cockpit("status", cluster.dashboard_url, home=tmp_path)
    assert by_home.returncode == 0, by_home.stderr


def test_token_over_ssh(token_cluster: tuple[LocalCluster, Path], tmp_path: Path) -> None:
    cluster, token_file = token_cluster
    server = start_sshd(tmp_path / "sshd")
    config = tmp_path / "config"
    config.write_text(server.ssh_config_entry("head-node"))
    try:
        args = [
            "status",
            "head-node",
            "--ssh-config",
            str(config),
            "--dashboard-port",
            str(cluster.dashboard_port),
        ]
        ok = cockpit(*args, "--token-file", str(token_file), "--json", home=tmp_path)
        assert ok.returncode == 0, ok.stderr
        refused = cockpit(*args, home=tmp_path)
        assert refused.returncode == 1 and "token authentication" in refused.stderr
    finally:
        server.stop()
