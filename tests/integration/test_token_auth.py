"""A cluster started with RAY_AUTH_MODE=token: works with the token, one clear sentence without it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from cockpit.core.connect.connection import ConnectOptions
from cockpit.core.local.record import LocalCluster
from cockpit.core.targets import parse_target
from cockpit.ui.app import CockpitApp
from cockpit.ui.feeds import NOT_RETRYING
from cockpit.ui.widgets.status_bar import StatusBar
from tests.harness.cluster import NODES, ClusterHandle
from tests.harness.run import run_cockpit, until
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


REJECTED = (
    "the dashboard rejected the token: check --token-file / RAY_AUTH_TOKEN against `ray get-auth-token` "
    "on the head."
)


def test_wait_gives_up_on_a_wrong_token_at_once(
    token_cluster: tuple[LocalCluster, Path], tmp_path: Path
) -> None:
    """A refused token is permanent (`is_permanent`): one line and exit 1, not exit 3 after 10 minutes of
    asking again with the same token (the harness's 60 s would end such a run first)."""
    cluster, _token_file = token_cluster
    wrong = tmp_path / "wrong-token"
    wrong.write_text("not-the-token\n")
    refused = cockpit(
        "wait",
        cluster.dashboard_url,
        "--nodes",
        "1",
        "--timeout",
        "600",
        "--token-file",
        str(wrong),
        home=tmp_path,
    )
    assert refused.returncode == 1
    assert refused.stderr == f"cockpit: {REJECTED}\n"
    missing = cockpit("wait", cluster.dashboard_url, "--nodes", "1", "--timeout", "600", home=tmp_path)
    assert (
        missing.returncode == 1
        and missing.stderr.count("\n") == 1
        and "token authentication" in missing.stderr
    )


async def test_the_tui_gives_up_on_a_wrong_token(
    token_cluster: tuple[LocalCluster, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same refusal in the TUI: said, not retried, until the user fixes it and presses r."""
    cluster, token_file = token_cluster
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    wrong = tmp_path / "wrong-token"
    wrong.write_text("not-the-token\n")
    app = CockpitApp(parse_target(cluster.dashboard_url), ConnectOptions(token_file=str(wrong)))
    async with app.run_test(size=(160, 30)) as pilot:
        connection = app.state.connection
        await until(pilot, lambda: connection.detail != "", timeout=30)
        assert connection.phase == "unreachable"
        assert connection.detail == REJECTED + NOT_RETRYING
        # The status bar says it on its next repaint (the state changed first).
        bar = app.screen.query_one(StatusBar)
        await until(pilot, lambda: "not retrying" in str(bar.render()), timeout=10)
        wrong.write_text(token_file.read_text())  # fixed: r reads the token file again and connects
        await pilot.press("r")
        await until(pilot, lambda: connection.phase == "connected", timeout=30)
        await pilot.press("q")
