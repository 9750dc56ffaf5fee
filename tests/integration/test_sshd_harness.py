"""Tests that the OpenSSH test harness starts a real sshd that real clients can use.

The clients are asyncssh (what the cockpit uses) and the OpenSSH ``ssh`` command (what the
cockpit's users have in their ``~/.ssh/config``).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncssh
import pytest

from tests.harness import sshd as sshd_harness
from tests.harness.sshd import SshServer, ensure_openssh, start_sshd

pytestmark = pytest.mark.ssh

CLOSE_TIMEOUT_S = 10.0


def _stop(server: SshServer) -> None:
    server.stop()
    assert not server.running


@pytest.fixture(scope="module")
def sshd_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    """The target server, shared by the tests of this module that leave it as they found it."""
    server = start_sshd(tmp_path_factory.mktemp("sshd-target"))
    try:
        yield server
    finally:
        _stop(server)


@pytest.fixture(scope="module")
def jump_server(tmp_path_factory: pytest.TempPathFactory, sshd_server: SshServer) -> Iterator[SshServer]:
    """A jump host that accepts the target's client key."""
    server = start_sshd(tmp_path_factory.mktemp("sshd-jump"), client_key=sshd_server.client_key)
    try:
        yield server
    finally:
        _stop(server)


@pytest.fixture(scope="module")
def closed_jump_server(
    tmp_path_factory: pytest.TempPathFactory, sshd_server: SshServer
) -> Iterator[SshServer]:
    """A jump host that refuses TCP forwarding, so that nothing can be tunnelled through it."""
    server = start_sshd(
        tmp_path_factory.mktemp("sshd-closed-jump"),
        client_key=sshd_server.client_key,
        allow_tcp_forwarding=False,
    )
    try:
        yield server
    finally:
        _stop(server)


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[SshServer]:
    """A server of the test's own, for tests that restart it or kill its connections."""
    server = start_sshd(tmp_path / "sshd")
    try:
        yield server
    finally:
        _stop(server)


async def _connect(server: SshServer, **kwargs: Any) -> asyncssh.SSHClientConnection:
    """Connect with the harness's client key and known_hosts, ignoring ~/.ssh and any agent."""
    options: dict[str, Any] = {
        "username": server.user,
        "client_keys": [str(server.client_key)],
        "known_hosts": str(server.known_hosts),
        "agent_path": None,
        "config": None,
        "connect_timeout": 10,
    }
    options.update(kwargs)
    return await asyncssh.connect(server.host, server.port, **options)


def _ssh(config: Path, alias: str, command: str) -> subprocess.CompletedProcess[str]:
    ssh = shutil.which("ssh")
    assert ssh is not None, "the OpenSSH client (ssh) is not installed"
    return subprocess.run(
        [ssh, "-F", str(config), "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", alias, command],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_server_listens_on_loopback_only(sshd_server: SshServer) -> None:
    assert sshd_server.host == "127.0.0.1"
    assert sshd_server.running
    assert sshd_server.listening_addresses() == [("127.0.0.1", sshd_server.port)]
    config = (sshd_server.root / "sshd_config").read_text()
    assert "ListenAddress 127.0.0.1\n" in config
    assert config.count("ListenAddress") == 1
    assert sshd_server.known_hosts.read_text() == (
        f"[127.0.0.1]:{sshd_server.port} {sshd_server.host_public_key}\n"
    )
    assert sshd_server.host_public_key.startswith("ssh-ed25519 AAAA")
    assert f"Server listening on 127.0.0.1 port {sshd_server.port}." in sshd_server.log_file.read_text()


async def test_asyncssh_runs_a_command(sshd_server: SshServer) -> None:
    async with await _connect(sshd_server) as conn:
        result = await conn.run("echo hello", check=True)
    assert result.exit_status == 0
    assert result.stdout == "hello\n"


@pytest.mark.parametrize("known_hosts_kind", ["empty", "other-key"])
async def test_asyncssh_rejects_an_unknown_host_key(
    sshd_server: SshServer, jump_server: SshServer, tmp_path: Path, known_hosts_kind: str
) -> None:
    known_hosts = tmp_path / "known_hosts"
    if known_hosts_kind == "empty":
        known_hosts.write_text("")
    else:
        # The right host and port, but another server's key.
        known_hosts.write_text(f"[127.0.0.1]:{sshd_server.port} {jump_server.host_public_key}\n")
    with pytest.raises(asyncssh.HostKeyNotVerifiable):
        await _connect(sshd_server, known_hosts=str(known_hosts))
    # HostKeyNotVerifiable is a DisconnectError: callers catching that see it too.
    assert issubclass(asyncssh.HostKeyNotVerifiable, asyncssh.DisconnectError)


async def test_asyncssh_through_a_jump_host(sshd_server: SshServer, jump_server: SshServer) -> None:
    assert jump_server.port != sshd_server.port
    async with (
        await _connect(jump_server) as jump_conn,
        await _connect(sshd_server, tunnel=jump_conn) as conn,
    ):
        result = await conn.run("echo through-the-jump", check=True)
    assert result.stdout == "through-the-jump\n"


async def test_asyncssh_jump_host_without_forwarding_refuses_the_tunnel(
    sshd_server: SshServer, closed_jump_server: SshServer
) -> None:
    """The control for the jump test: the tunnel really goes through the jump host."""
    async with await _connect(closed_jump_server) as jump_conn:
        assert (await jump_conn.run("echo jump-ok", check=True)).stdout == "jump-ok\n"
        with pytest.raises(asyncssh.ChannelOpenError):
            await _connect(sshd_server, tunnel=jump_conn)


def test_ssh_config_entry_works_with_the_openssh_client(sshd_server: SshServer, tmp_path: Path) -> None:
    entry = sshd_server.ssh_config_entry("target")
    assert entry.startswith("Host target\n")
    assert f"    Port {sshd_server.port}\n" in entry
    assert "    StrictHostKeyChecking yes\n" in entry
    assert "ProxyJump" not in entry
    config = tmp_path / "ssh_config"
    config.write_text(entry)
    result = _ssh(config, "target", "echo ok")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ok\n"


def test_ssh_config_entry_proxy_jump_with_the_openssh_client(
    sshd_server: SshServer, jump_server: SshServer, closed_jump_server: SshServer, tmp_path: Path
) -> None:
    config = tmp_path / "ssh_config"
    config.write_text(
        jump_server.ssh_config_entry("jump")
        + closed_jump_server.ssh_config_entry("closed-jump")
        + sshd_server.ssh_config_entry("target", proxy_jump="jump")
        + sshd_server.ssh_config_entry("target-via-closed", proxy_jump="closed-jump")
    )
    assert "    ProxyJump jump\n" in sshd_server.ssh_config_entry("target", proxy_jump="jump")

    result = _ssh(config, "target", "echo jumped")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "jumped\n"

    refused = _ssh(config, "target-via-closed", "echo jumped")
    assert refused.returncode != 0
    assert refused.stdout == ""


async def test_restart_drops_connections_and_comes_back_on_the_same_port(own_server: SshServer) -> None:
    port = own_server.port
    known_hosts = own_server.known_hosts.read_text()
    old_pid = own_server.pid
    conn = await _connect(own_server)
    try:
        assert (await conn.run("echo before", check=True)).stdout == "before\n"
        own_server.restart()
        await asyncio.wait_for(conn.wait_closed(), CLOSE_TIMEOUT_S)
        with pytest.raises((asyncssh.Error, OSError)):
            await conn.run("echo after", check=True)
    finally:
        conn.close()

    assert own_server.running
    assert own_server.pid != old_pid
    assert own_server.port == port
    assert own_server.known_hosts.read_text() == known_hosts
    async with await _connect(own_server) as new_conn:
        assert (await new_conn.run("echo after", check=True)).stdout == "after\n"


async def test_restart_while_disconnected_refuses_then_accepts(own_server: SshServer) -> None:
    own_server.stop()
    assert not own_server.running
    with pytest.raises(OSError):
        await _connect(own_server)
    own_server.restart()
    async with await _connect(own_server) as conn:
        assert (await conn.run("echo back", check=True)).stdout == "back\n"


async def test_kill_connections_drops_connections_but_keeps_listening(own_server: SshServer) -> None:
    listener = own_server.pid
    first = await _connect(own_server)
    second = await _connect(own_server)
    try:
        for conn in (first, second):
            assert (await conn.run("echo alive", check=True)).stdout == "alive\n"
        killed = own_server.kill_connections()
        assert len(killed) >= 2
        assert listener not in killed
        for conn in (first, second):
            await asyncio.wait_for(conn.wait_closed(), CLOSE_TIMEOUT_S)
            with pytest.raises((asyncssh.Error, OSError)):
                await conn.run("echo dead", check=True)
    finally:
        first.close()
        second.close()

    assert own_server.running
    assert own_server.pid == listener
    async with await _connect(own_server) as conn:
        assert (await conn.run("echo new", check=True)).stdout == "new\n"


def test_kill_connections_without_connections_kills_nothing(own_server: SshServer) -> None:
    assert own_server.kill_connections() == []
    assert own_server.running


def test_start_on_a_port_in_use_fails(own_server: SshServer, tmp_path: Path) -> None:
    """A second server cannot take a port in use, and the harness does not mistake the first for it."""
    with pytest.raises(RuntimeError, match=r"already in use"):
        start_sshd(tmp_path / "second", port=own_server.port)


def test_ensure_openssh_finds_sshd() -> None:
    sshd = ensure_openssh()
    assert Path(sshd).is_absolute()
    assert Path(sshd).name == "sshd"


def test_ensure_openssh_explains_when_it_cannot_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sshd_harness, "_which", lambda name: None)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(RuntimeError, match="openssh-server"):
        ensure_openssh()
