"""The cockpit over SSH: real OpenSSH servers on 127.0.0.1 in front of the real local Ray cluster."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import asyncssh
import pytest

from cockpit.core.cluster.errors import DashboardUnreachable
from cockpit.core.connect.connection import ConnectOptions, open_connection
from cockpit.core.ssh.errors import HostKeyChanged, SshError, UnknownHostKey
from cockpit.core.ssh.link import SshLink, SshOptions
from cockpit.core.targets import parse_target
from tests.harness.cluster import ClusterHandle
from tests.harness.loop_io import opened_on_main_thread
from tests.harness.run import interruptible, run_cockpit
from tests.harness.sshd import SshServer, generate_key, listening_addresses, start_sshd

pytestmark = [pytest.mark.ssh, pytest.mark.cluster]


@pytest.fixture(scope="module")
def head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    """The "head node" sshd: the local cluster's dashboard is on its 127.0.0.1."""
    server = start_sshd(tmp_path_factory.mktemp("head-sshd"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def jump(tmp_path_factory: pytest.TempPathFactory, head: SshServer) -> Iterator[SshServer]:
    server = start_sshd(tmp_path_factory.mktemp("jump-sshd"), client_key=head.client_key)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def ssh_config(tmp_path_factory: pytest.TempPathFactory, head: SshServer, jump: SshServer) -> Path:
    path = tmp_path_factory.mktemp("ssh-config") / "config"
    path.write_text(
        head.ssh_config_entry("head-node")
        + "\n"
        + jump.ssh_config_entry("login-jump")
        + "\n"
        + head.ssh_config_entry("head-via-jump", proxy_jump="login-jump")
    )
    return path


def cockpit(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    # Over SSH the cockpit cannot know the tunnelled cluster is the local one: give it the token.
    token_file = Path(os.environ["COCKPIT_STATE_DIR"]) / "token"
    return run_cockpit(*args, "--token-file", str(token_file), timeout=timeout)


def node_ids(output: str) -> set[str]:
    return {n["node_id"] for n in json.loads(output)["nodes"]}


def test_status_over_ssh_matches_local(ray_cluster: ClusterHandle, ssh_config: Path) -> None:
    port = str(ray_cluster.cluster.dashboard_port)
    over_ssh = cockpit(
        "status", "head-node", "--ssh-config", str(ssh_config), "--dashboard-port", port, "--json"
    )
    assert over_ssh.returncode == 0, over_ssh.stderr
    assert node_ids(over_ssh.stdout) == node_ids(cockpit("status", "local", "--json").stdout)
    assert json.loads(over_ssh.stdout)["dashboard"].startswith("head-node (ssh")


def test_status_through_a_proxyjump_hop(
    ray_cluster: ClusterHandle, ssh_config: Path, jump: SshServer
) -> None:
    port = str(ray_cluster.cluster.dashboard_port)
    result = cockpit(
        "status", "head-via-jump", "--ssh-config", str(ssh_config), "--dashboard-port", port, "--json"
    )
    assert result.returncode == 0, result.stderr
    assert node_ids(result.stdout) == node_ids(cockpit("status", "local", "--json").stdout)
    assert "Accepted publickey" in jump.log_file.read_text()  # the hop was really used


def _config_with_known_hosts(tmp_path: Path, head: SshServer, known_hosts_text: str) -> Path:
    known = tmp_path / "known_hosts"
    known.write_text(known_hosts_text)
    config = tmp_path / "config"
    config.write_text(head.ssh_config_entry("head-node").replace(str(head.known_hosts), str(known)))
    return config


def test_changed_host_key_is_refused(tmp_path: Path, head: SshServer, ray_cluster: ClusterHandle) -> None:
    other = start_sshd(tmp_path / "other")
    try:
        forged = f"[127.0.0.1]:{head.port} {other.host_public_key}\n"
    finally:
        other.stop()
    config = _config_with_known_hosts(tmp_path, head, "# first line\n" + forged)
    result = cockpit("status", "head-node", "--ssh-config", str(config), "--accept-new")
    assert result.returncode == 1
    assert "CHANGED" in result.stderr and f"{tmp_path / 'known_hosts'}:2" in result.stderr
    assert result.stderr.count("\n") == 1


def test_unknown_host_refused_then_accepted_with_accept_new(
    tmp_path: Path, head: SshServer, ray_cluster: ClusterHandle
) -> None:
    config = _config_with_known_hosts(tmp_path, head, "")
    port = str(ray_cluster.cluster.dashboard_port)
    refused = cockpit("status", "head-node", "--ssh-config", str(config), "--dashboard-port", port)
    assert refused.returncode == 1
    assert "is unknown" in refused.stderr and "--accept-new" in refused.stderr
    assert (tmp_path / "known_hosts").read_text() == ""
    accepted = cockpit(
        "status", "head-node", "--ssh-config", str(config), "--dashboard-port", port, "--accept-new"
    )
    assert accepted.returncode == 0, accepted.stderr
    assert head.host_public_key.split()[1] in (tmp_path / "known_hosts").read_text()
    again = cockpit("status", "head-node", "--ssh-config", str(config), "--dashboard-port", port)
    assert again.returncode == 0, again.stderr


def test_an_included_skypilot_style_entry_is_a_target_with_host_keys_verified(
    tmp_path: Path, head: SshServer, ray_cluster: ClusterHandle
) -> None:
    """SkyPilot writes one file per cluster under ~/.sky/generated/ssh/ and `Include`s them from
    ~/.ssh/config (dstack does the same with ~/.dstack/ssh/config), with `StrictHostKeyChecking no` and
    `UserKnownHostsFile=/dev/null`: the alias is a TARGET as it is; the host key is still verified and
    kept in ~/.ssh/known_hosts (never thrown away in /dev/null)."""
    home = tmp_path / "home"
    generated = home / ".sky" / "generated" / "ssh"
    generated.mkdir(parents=True)
    (generated / "my-grpo").write_text(
        "# Added by sky (use locally)\n"
        "Host my-grpo\n"
        "  HostName 127.0.0.1\n"
        f"  User {head.user}\n"
        f"  IdentityFile {head.client_key}\n"
        "  AddKeysToAgent yes\n"
        "  IdentitiesOnly yes\n"
        "  ForwardAgent yes\n"
        "  StrictHostKeyChecking no\n"
        "  UserKnownHostsFile=/dev/null\n"
        "  GlobalKnownHostsFile=/dev/null\n"
        f"  Port {head.port}\n"
    )
    (home / ".ssh").mkdir(mode=0o700)
    (home / ".ssh" / "config").write_text(f"Include {generated}/*\n\nHost elsewhere\n  HostName 192.0.2.77\n")
    env = {**os.environ, "HOME": str(home)}
    port = str(ray_cluster.cluster.dashboard_port)
    token = str(Path(os.environ["COCKPIT_STATE_DIR"]) / "token")
    args = ("status", "my-grpo", "--dashboard-port", port, "--token-file", token, "--json")
    refused = run_cockpit(*args, env=env)
    assert refused.returncode == 1 and "is unknown" in refused.stderr
    assert f"added to {home / '.ssh' / 'known_hosts'}" in refused.stderr  # not /dev/null
    accepted = run_cockpit(*args, "--accept-new", env=env)
    assert accepted.returncode == 0, accepted.stderr
    assert head.host_public_key.split()[1] in (home / ".ssh" / "known_hosts").read_text()
    assert node_ids(accepted.stdout) == node_ids(cockpit("status", "local", "--json").stdout)


def _tcp_listeners_of_this_process() -> list[tuple[str, int]]:
    return listening_addresses(os.getpid())


async def test_tunnel_is_private_and_survives_a_dropped_connection(
    ray_cluster: ClusterHandle, tmp_path: Path
) -> None:
    before = set(_tcp_listeners_of_this_process())
    head_server = start_sshd(tmp_path / "head2")  # its own server: this test kills and restarts it
    config = tmp_path / "config"
    config.write_text(head_server.ssh_config_entry("head-node"))
    options = ray_cluster.over_ssh(config)
    try:
        async with open_connection(parse_target("head-node"), options) as conn:
            assert conn.link is not None
            socket_path = Path(conn.link.socket_path)
            assert stat.S_IMODE(socket_path.stat().st_mode) == 0o600
            assert stat.S_IMODE(socket_path.parent.stat().st_mode) == 0o700
            assert set(_tcp_listeners_of_this_process()) == before  # no TCP listener opened
            assert await conn.client.nodes()

            # The server side of the connection dies: the link reconnects by itself.
            head_server.kill_connections()
            recovered = await _until_answers(conn.client, timeout=30)
            assert recovered

            # The server goes away for a while and comes back.
            head_server.stop()
            with pytest.raises(DashboardUnreachable):
                await conn.client.version()
            await asyncio.sleep(2)
            head_server.restart()
            back = time.monotonic()
            assert await _until_answers(conn.client, timeout=30)
            print(f"data flowed again {time.monotonic() - back:.1f} s after sshd was back")
            assert socket_path.exists()
        assert not socket_path.exists() and not socket_path.parent.exists()  # removed on exit
    finally:
        head_server.stop()


async def _until_answers(client: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            await client.version()  # type: ignore[attr-defined]
            return True
        except DashboardUnreachable:
            await asyncio.sleep(0.2)
    return False


async def test_open_channel_reaches_a_service_behind_the_head(
    ray_cluster: ClusterHandle, ssh_config: Path
) -> None:
    options = ray_cluster.over_ssh(ssh_config)
    async with open_connection(parse_target("head-node"), options) as conn:
        assert conn.link is not None
        reader, writer = await conn.link.open_channel("127.0.0.1", ray_cluster.cluster.dashboard_port)
        token = ray_cluster.token_file.read_text().strip()
        writer.write(
            f"GET /api/version HTTP/1.0\r\nHost: dashboard\r\nAuthorization: Bearer {token}\r\n\r\n".encode()
        )
        response = await asyncio.wait_for(reader.read(-1), 10)
        writer.close()
    assert response.startswith(b"HTTP/1.") and b'"ray_version"' in response


async def test_expose_port_binds_loopback_only(ray_cluster: ClusterHandle, ssh_config: Path) -> None:
    options = ray_cluster.over_ssh(ssh_config, expose_port=0)
    async with open_connection(parse_target("head-node"), options) as conn:
        assert conn.link is not None and conn.link.expose_url
        port = int(conn.link.expose_url.rsplit(":", 1)[1])
        assert ("127.0.0.1", port) in _tcp_listeners_of_this_process()
        assert all(host == "127.0.0.1" for host, _ in _tcp_listeners_of_this_process())


def test_ctrl_c_removes_the_tunnel_socket(
    ray_cluster: ClusterHandle, ssh_config: Path, tmp_path: Path
) -> None:
    port = str(ray_cluster.cluster.dashboard_port)
    command = [
        "wait",
        "head-node",
        "--ssh-config",
        str(ssh_config),
        "--dashboard-port",
        port,
        "--nodes",
        "99",
        "--token-file",  # a refused token now ends `wait` at once (the retry rule): it must wait here
        str(ray_cluster.token_file),
    ]
    waiting = subprocess.Popen(
        [sys.executable, "-m", "cockpit.cli", *command, "--timeout", "120"],
        env={**os.environ, "TMPDIR": str(tmp_path)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=interruptible,
    )
    try:
        deadline = time.monotonic() + 90  # a bound only: a fresh interpreter and an SSH handshake, loaded
        while (
            not list(tmp_path.glob("cockpit-*/dashboard.sock"))
            and waiting.poll() is None
            and time.monotonic() < deadline
        ):
            time.sleep(0.2)
        if not list(tmp_path.glob("cockpit-*/dashboard.sock")):
            waiting.kill()
            out, err = waiting.communicate(timeout=30)
            raise AssertionError(f"no tunnel socket (exit {waiting.returncode}): {err[-2000:]}{out[-500:]}")
        waiting.send_signal(signal.SIGINT)
        _out, err = waiting.communicate(timeout=30)
    finally:
        waiting.kill()
    assert waiting.returncode == 130 and "interrupted" in err, (waiting.returncode, err[-2000:])
    assert list(tmp_path.glob("cockpit-*")) == []


async def test_processes_run_on_the_head_and_on_a_node_through_it(
    tmp_path: Path, ray_cluster: ClusterHandle, head: SshServer, jump: SshServer
) -> None:
    """What high-resolution GPU mode relies on: a command on the head, and one on another node reached
    through the head by its bare IP (the second sshd plays a worker node). The SSH config names only the
    head (user, key, known hosts), as on most clusters; a node pattern sets just the port here. The node
    gets the head's user, key and known hosts, and an unknown node key is refused."""
    known = tmp_path / "known_hosts"
    known.write_text(head.known_hosts.read_text() + jump.known_hosts.read_text())
    config = tmp_path / "config"
    config.write_text(
        head.ssh_config_entry("head-node").replace(str(head.known_hosts), str(known))
        + f"Host 127.0.0.1\n    Port {jump.port}\n"
        + f"Host localhost\n    Port {jump.port}\n    UserKnownHostsFile {tmp_path / 'empty'}\n"
    )
    (tmp_path / "empty").write_text("")
    options = ray_cluster.over_ssh(config)
    async with open_connection(parse_target("head-node"), options) as conn:
        assert conn.link is not None
        on_head = await conn.link.start_process("echo head $SSH_CONNECTION")
        head_line = await asyncio.wait_for(on_head.stdout.readline(), 10)
        on_node = await conn.link.start_process("echo node $SSH_CONNECTION", host="127.0.0.1")
        node_line = await asyncio.wait_for(on_node.stdout.readline(), 10)
        # SSH_CONNECTION ends with the server's port: each command ran behind the sshd it was meant for.
        assert head_line.split()[0] == "head" and head_line.split()[-1] == str(head.port)
        assert node_line.split()[0] == "node" and node_line.split()[-1] == str(jump.port)
        with pytest.raises(SshError, match="host key"):
            await conn.link.start_process("true", host="localhost")
        await conn.link.close_node_connections()
        again = await conn.link.start_process("echo again", host="127.0.0.1")  # a fresh connection
        assert (await asyncio.wait_for(again.stdout.readline(), 10)).strip() == "again"


# -- host keys and certificates against a real sshd (no cluster needed) -------------------------------


@pytest.fixture
def own_head(tmp_path: Path) -> Iterator[SshServer]:
    """An sshd of the test's own: the certificate tests restart it with their own HostCertificate."""
    server = start_sshd(tmp_path / "sshd")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def ca(tmp_path: Path) -> Path:
    """A host CA (`ssh-keygen`), its public half beside it as `ca.pub`."""
    generate_key(tmp_path / "ca", "test-host-ca")
    return tmp_path / "ca"


def public(key: Path) -> str:
    """`TYPE BASE64` of a key pair made by ssh-keygen."""
    return " ".join(key.with_name(key.name + ".pub").read_text().split()[:2])


async def start_link(config: Path) -> SshLink:
    link = SshLink(parse_target("head-node"), SshOptions(config=str(config)))
    try:
        await link.start()
    except BaseException:
        await link.close()
        raise
    return link


async def run_on(link: SshLink, command: str) -> str:
    process = await link.start_process(command)
    return (await asyncio.wait_for(process.stdout.readline(), 10)).strip()


async def test_a_host_certificate_signed_by_a_listed_ca_is_trusted(
    tmp_path: Path, own_head: SshServer, ca: Path
) -> None:
    """Only an `@cert-authority` line in known_hosts, as on sites that sign their hosts' keys."""
    own_head.use_host_certificate(ca)
    config = _config_with_known_hosts(
        tmp_path, own_head, f"@cert-authority [127.0.0.1]:{own_head.port} {public(ca)}\n"
    )
    link = await start_link(config)
    try:
        assert await run_on(link, "echo certified") == "certified"
    finally:
        await link.close()


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("principal not this host", "principal"),
        ("expired", "expired"),
        ("CA revoked", "CA that signed .* is revoked"),
        ("host key under the certificate revoked", "revoked"),
        ("signed by another CA", "not listed"),
        ("CA listed for port 22 only", "is unknown"),
    ],
)
async def test_a_host_certificate_is_refused(
    tmp_path: Path, own_head: SshServer, ca: Path, case: str, message: str
) -> None:
    label = f"[127.0.0.1]:{own_head.port}"
    listed = f"@cert-authority {label} {public(ca)}\n"
    if case == "principal not this host":
        own_head.use_host_certificate(ca, principals="other.example")
    elif case == "expired":
        own_head.use_host_certificate(ca, validity="20000101:20000102")
    elif case == "CA revoked":
        own_head.use_host_certificate(ca)
        listed += f"@revoked * {public(ca)}\n"
    elif case == "host key under the certificate revoked":
        own_head.use_host_certificate(ca)
        listed += f"@revoked {label} {own_head.host_public_key}\n"
    elif case == "signed by another CA":
        generate_key(tmp_path / "other-ca", "other-ca")
        own_head.use_host_certificate(tmp_path / "other-ca")
    else:
        own_head.use_host_certificate(ca)
        listed = f"@cert-authority 127.0.0.1 {public(ca)}\n"
    config = _config_with_known_hosts(tmp_path, own_head, listed)
    with pytest.raises(SshError, match=message) as info:
        await start_link(config)
    assert info.value.permanent and "\n" not in str(info.value)


async def test_a_revoked_host_key_on_another_port_is_refused(tmp_path: Path, own_head: SshServer) -> None:
    label = f"[127.0.0.1]:{own_head.port}"
    config = _config_with_known_hosts(
        tmp_path,
        own_head,
        f"@revoked {label} {own_head.host_public_key}\n{label} {own_head.host_public_key}\n",
    )
    with pytest.raises(HostKeyChanged, match=rf"revoked \({tmp_path / 'known_hosts'}:1\)"):
        await start_link(config)


# -- nodes behind the head (high-resolution GPU mode) ------------------------------------------------


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A real ssh-agent of the test's own, as SSH_AUTH_SOCK."""
    sock = tmp_path / "agent.sock"
    process = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
        yield sock
    finally:
        process.kill()
        process.wait()


def node_config(tmp_path: Path, head: SshServer, node: SshServer, identities: list[Path]) -> Path:
    """The head named in the config (its user, keys, known hosts); the node only by its address, with
    its port (both sshds are on 127.0.0.1), as most cluster configs read."""
    known = tmp_path / "known_hosts"
    known.write_text(head.known_hosts.read_text() + node.known_hosts.read_text())
    entry = head.ssh_config_entry("head-node").replace(str(head.known_hosts), str(known))
    entry = entry.replace(f"    IdentityFile {head.client_key}\n", "")
    entry += "".join(f"    IdentityFile {key}\n" for key in identities)
    config = tmp_path / "config"
    config.write_text(entry + f"Host 127.0.0.1\n    Port {node.port}\n")
    return config


async def test_an_encrypted_identity_held_in_the_agent_reaches_nodes(tmp_path: Path, agent: Path) -> None:
    """The usual setup: an encrypted IdentityFile, unlocked once with ssh-add. The node must be reached
    with the agent's key, as the head is (not fail on the file it cannot open)."""
    key = tmp_path / "id_encrypted"
    generate_key(key, "encrypted", passphrase="correct horse")
    agent_client = await asyncssh.connect_agent(str(agent))
    await agent_client.add_keys([asyncssh.read_private_key(key, "correct horse")])
    agent_client.close()
    head = start_sshd(tmp_path / "head", client_key=key)
    node = start_sshd(tmp_path / "node", client_key=key)
    try:
        link = await start_link(node_config(tmp_path, head, node, [key]))
        try:
            on_node = await link.start_process("echo $SSH_CONNECTION", host="127.0.0.1")
            line = await asyncio.wait_for(on_node.stdout.readline(), 10)
            assert line.split()[-1] == str(node.port)
        finally:
            await link.close()
    finally:
        head.stop()
        node.stop()


@pytest.mark.parametrize("node_key", ["known", "accepted"])
async def test_a_node_asking_for_a_passphrase_keeps_the_heads_login(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, node_key: str
) -> None:
    """No agent; the head takes one key, the node only the head's other, encrypted, key. The cockpit asks
    for its passphrase, and the retry still logs in to the node as `node_login` says: the head's keys and
    the head's known_hosts (the node's key is in no other file). A node key accepted on the first try is
    recorded once, before the retry reads known_hosts again."""
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    head = start_sshd(tmp_path / "head")
    locked = tmp_path / "id_locked"
    generate_key(locked, "locked", passphrase="correct horse")
    node = start_sshd(tmp_path / "node", client_key=locked)
    asked: list[str] = []

    async def ask(prompt: str) -> str:
        asked.append(prompt)
        return "correct horse"

    try:
        config = node_config(tmp_path, head, node, [head.client_key, locked])
        known = tmp_path / "known_hosts"
        if node_key == "accepted":
            known.write_text(head.known_hosts.read_text())
        options = SshOptions(config=str(config), ask_passphrase=ask, accept_new=node_key == "accepted")
        link = SshLink(parse_target("head-node"), options)
        try:
            await link.start()
            on_node = await link.start_process("echo $SSH_CONNECTION", host="127.0.0.1")
            line = await asyncio.wait_for(on_node.stdout.readline(), 10)
            assert line.split()[-1] == str(node.port)
            assert asked == [f"Passphrase for {locked}"]
            assert known.read_text().count(node.host_public_key.split()[1]) == 1
        finally:
            await link.close()
    finally:
        head.stop()
        node.stop()


async def test_known_hosts_are_never_read_or_written_on_the_event_loop(tmp_path: Path) -> None:
    """A home directory on NFS can stall: known_hosts is read (head and node) and the accepted node key
    written in worker threads, never on the loop that draws the TUI."""
    head = start_sshd(tmp_path / "head")
    node = start_sshd(tmp_path / "node", client_key=head.client_key)
    try:
        config = node_config(tmp_path, head, node, [head.client_key])
        known = tmp_path / "known_hosts"
        known.write_text(head.known_hosts.read_text())  # the node's key is new: accepted, recorded
        with opened_on_main_thread(str(known)) as on_loop:
            link = SshLink(parse_target("head-node"), SshOptions(config=str(config), accept_new=True))
            try:
                await link.start()
                on_node = await link.start_process("echo node", host="127.0.0.1")
                assert (await asyncio.wait_for(on_node.stdout.readline(), 10)).strip() == "node"
            finally:
                await link.close()
        assert on_loop == []
        assert node.host_public_key.split()[1] in known.read_text()
    finally:
        head.stop()
        node.stop()


async def test_a_host_key_confirmed_at_the_prompt_is_recorded_off_the_event_loop(tmp_path: Path) -> None:
    """The interactive path (`confirm_host_key`, the TUI's dialog) records the key in a worker thread too."""
    head = start_sshd(tmp_path / "head")
    try:
        config = _config_with_known_hosts(tmp_path, head, "")
        asked: list[str] = []

        async def confirm(unknown: UnknownHostKey) -> bool:
            asked.append(unknown.fingerprint)
            return True

        options = ConnectOptions(ssh_config=str(config), confirm_host_key=confirm)
        with opened_on_main_thread(str(tmp_path / "known_hosts")) as on_loop:
            async with open_connection(parse_target("head-node"), options) as conn:
                assert conn.link is not None
        assert on_loop == [] and len(asked) == 1
        assert head.host_public_key.split()[1] in (tmp_path / "known_hosts").read_text()
    finally:
        head.stop()
