"""The cockpit over SSH as a user meets it: the host-key question, a dropped link, the real process."""

from __future__ import annotations

import os
import shlex
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cockpit.core.targets import parse_target
from cockpit.ui.app import CockpitApp
from cockpit.ui.screens.cluster import ClusterScreen
from cockpit.ui.screens.prompts import HostKeyScreen, PassphraseScreen
from cockpit.ui.widgets.node_table import NodeTable
from cockpit.ui.widgets.status_bar import StatusBar
from tests.harness.cluster import ClusterHandle
from tests.harness.run import until
from tests.harness.sshd import listening_addresses, start_sshd
from tests.harness.terminal import Terminal

pytestmark = [pytest.mark.ssh, pytest.mark.cluster]


def header(app: CockpitApp) -> str:
    return str(app.screen.query_one(StatusBar).render())


async def test_unknown_host_key_is_asked_then_trusted(tmp_path: Path, ray_cluster: ClusterHandle) -> None:
    server = start_sshd(tmp_path / "sshd")
    known = tmp_path / "known_hosts"
    known.write_text("")
    config = tmp_path / "config"
    config.write_text(server.ssh_config_entry("head-node").replace(str(server.known_hosts), str(known)))
    options = ray_cluster.over_ssh(config)
    try:
        app = CockpitApp(parse_target("head-node"), options)
        async with app.run_test(size=(120, 36)) as pilot:
            await until(pilot, lambda: isinstance(app.screen, HostKeyScreen))
            dialog = app.screen
            assert isinstance(dialog, HostKeyScreen)
            assert dialog.unknown.fingerprint.startswith("SHA256:")
            assert known.read_text() == ""  # nothing is recorded before the user answers
            await pilot.press("y")
            await until(pilot, lambda: isinstance(app.screen, ClusterScreen) and "connected" in header(app))
            table = app.screen.query_one(NodeTable)
            await until(pilot, lambda: table.row_count >= 3)
        assert server.host_public_key.split()[1] in known.read_text()
    finally:
        server.stop()


async def test_dropped_link_keeps_stale_data_and_resumes(tmp_path: Path, ray_cluster: ClusterHandle) -> None:
    server = start_sshd(tmp_path / "sshd")
    config = tmp_path / "config"
    config.write_text(server.ssh_config_entry("head-node"))
    options = ray_cluster.over_ssh(config)
    try:
        app = CockpitApp(parse_target("head-node"), options)
        async with app.run_test(size=(120, 36)) as pilot:
            table = app.screen.query_one(NodeTable)
            await until(pilot, lambda: table.row_count >= 3 and "connected" in header(app))
            rows = table.row_count
            server.stop()
            await until(pilot, lambda: "reconnecting" in header(app) or "unreachable" in header(app))
            assert table.row_count == rows and table.has_class("stale")  # last data kept, marked stale
            assert "data" in header(app) and "old" in header(app)
            server.restart()
            back = time.monotonic()
            await until(
                pilot, lambda: "connected" in header(app) and not table.has_class("stale"), timeout=30
            )
            print(f"TUI showed fresh data {time.monotonic() - back:.1f} s after sshd was back")
    finally:
        server.stop()


def test_connect_process_opens_no_tcp_listener(tmp_path: Path, ray_cluster: ClusterHandle) -> None:
    server = start_sshd(tmp_path / "sshd")
    config = tmp_path / "config"
    config.write_text(server.ssh_config_entry("head-node"))
    term = Terminal(f"cockpit-ssh-{int(time.time())}", 100, 30)
    try:
        port = ray_cluster.cluster.dashboard_port
        command = (
            f"TMPDIR={shlex.quote(str(tmp_path))} {shlex.quote(sys.executable)} -m cockpit.cli"
            " connect head-node"
            f" --ssh-config {shlex.quote(str(config))} --dashboard-port {port}"
            f" --token-file {shlex.quote(str(ray_cluster.token_file))}"
        )
        term.type(f"{command}; echo connect-exit=$?", "Enter")
        term.wait_for(lambda s: "connected" in s and "ALIVE" in s, timeout=60)
        (pid,) = term.foreground_pids()
        assert listening_addresses(pid) == []
        sockets = list(tmp_path.glob("cockpit-*/dashboard.sock"))
        assert len(sockets) == 1
        assert stat.S_IMODE(sockets[0].stat().st_mode) == 0o600
        assert stat.S_IMODE(sockets[0].parent.stat().st_mode) == 0o700
        term.type("q")
        term.wait_for(lambda s: "connect-exit=0" in s, timeout=30)
        assert list(tmp_path.glob("cockpit-*")) == []  # the socket and its directory are removed
    finally:
        term.close()
        server.stop()


def test_a_terminal_closed_under_connect_removes_its_tunnel_socket(
    tmp_path: Path, ray_cluster: ClusterHandle
) -> None:
    """tmux killed under `cockpit connect` (SIGHUP, then EIO on every write): the process ends and the
    private tunnel socket and its directory are gone, as after `q`."""
    server = start_sshd(tmp_path / "sshd")
    config = tmp_path / "config"
    config.write_text(server.ssh_config_entry("head-node"))
    term = Terminal(f"cockpit-ssh-hup-{int(time.time())}", 100, 30)
    pid = 0
    try:
        command = (
            f"TMPDIR={shlex.quote(str(tmp_path))} {shlex.quote(sys.executable)} -m cockpit.cli"
            " connect head-node"
            f" --ssh-config {shlex.quote(str(config))} --dashboard-port {ray_cluster.cluster.dashboard_port}"
            f" --token-file {shlex.quote(str(ray_cluster.token_file))}"
        )
        term.type(command, "Enter")
        term.wait_for(lambda s: "connected" in s and "ALIVE" in s, timeout=60)
        (pid,) = term.foreground_pids()
        assert len(list(tmp_path.glob("cockpit-*/dashboard.sock"))) == 1
    finally:
        term.close()
    try:
        deadline = time.monotonic() + 30
        while (
            Path(f"/proc/{pid}").exists() or list(tmp_path.glob("cockpit-*"))
        ) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not Path(f"/proc/{pid}").exists(), "the cockpit ended with its terminal"
        assert list(tmp_path.glob("cockpit-*")) == []  # the socket and its directory are removed
    finally:
        if Path(f"/proc/{pid}").exists():
            os.kill(pid, signal.SIGKILL)
        server.stop()


def _encrypted_copy(key: Path, passphrase: str) -> Path:
    encrypted = key.with_name("encrypted_key")
    encrypted.write_bytes(key.read_bytes())
    encrypted.chmod(0o600)
    subprocess.run(["ssh-keygen", "-p", "-q", "-f", str(encrypted), "-P", "", "-N", passphrase], check=True)
    return encrypted


async def test_encrypted_key_asks_for_the_passphrase(tmp_path: Path, ray_cluster: ClusterHandle) -> None:
    server = start_sshd(tmp_path / "sshd")
    key = _encrypted_copy(server.client_key, "correct horse")
    config = tmp_path / "config"
    config.write_text(server.ssh_config_entry("head-node").replace(str(server.client_key), str(key)))
    options = ray_cluster.over_ssh(config)
    try:
        refused = subprocess.run(
            [sys.executable, "-m", "cockpit.cli", "status", "head-node", "--ssh-config", str(config)],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            env={k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"},
        )
        assert refused.returncode == 1 and "encrypted" in refused.stderr and "ssh-add" in refused.stderr

        app = CockpitApp(parse_target("head-node"), options)
        async with app.run_test(size=(120, 36)) as pilot:
            await until(pilot, lambda: isinstance(app.screen, PassphraseScreen))
            await pilot.press(*"correct horse", "enter")
            await until(pilot, lambda: isinstance(app.screen, ClusterScreen) and "connected" in header(app))
        # The passphrase lives in memory only: no file the test or the cockpit wrote holds it.
        state = Path(os.environ["COCKPIT_STATE_DIR"])
        for path in [*tmp_path.rglob("*"), *state.rglob("*")]:
            if path.is_file() and not path.is_symlink():
                assert b"correct horse" not in path.read_bytes(), path
    finally:
        server.stop()
