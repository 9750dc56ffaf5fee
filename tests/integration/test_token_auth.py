"""A cluster started with RAY_AUTH_MODE=token: works with the token, one clear sentence without it."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from cockpit.core.local import processes
from cockpit.core.local.record import LocalCluster
from tests.harness.run import run_cockpit
from tests.harness.sshd import start_sshd

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def token_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, Path]]:
    state = tmp_path_factory.mktemp("token-state")
    token = secrets.token_hex(16)
    token_file = state / "token"
    token_file.write_text(token + "\n")
    token_file.chmod(0o600)
    cluster = processes.up(1, 1, 1, token=token, directory=state)
    try:
        yield cluster, token_file
    finally:
        processes.down(directory=state)


def cockpit(*args: str, home: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k != "RAY_AUTH_TOKEN"}
    # A private HOME: no ~/.ray/auth_token of the person running the tests is picked up.
    return run_cockpit(*args, timeout=60, env={**clean, "HOME": str(home), **(env or {})})


def test_token_file_works_and_missing_token_is_one_sentence(
    token_cluster: tuple[LocalCluster, Path], tmp_path: Path
) -> None:
    cluster, token_file = token_cluster
    ok = cockpit("status", cluster.dashboard_url, "--token-file", str(token_file), "--json", home=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["alive_nodes"] == 1

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
