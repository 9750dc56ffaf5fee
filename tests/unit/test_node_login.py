"""How high-resolution mode logs in to cluster nodes behind the head: the head's account and keys."""

from __future__ import annotations

import getpass
from pathlib import Path

from cockpit.core.ssh.config import Hop, node_login


def write(tmp_path: Path, text: str) -> list[str]:
    config = tmp_path / "config"
    config.write_text(text)
    return [str(config)]


def test_user_at_head_without_any_config_logs_in_to_nodes_as_that_user() -> None:
    username, keys, files = node_login(Hop("head", user="alice"), Hop("10.0.0.7"), [])
    assert username == "alice" and keys == []
    assert files[0] == Path.home() / ".ssh" / "known_hosts"


def test_the_heads_key_comes_before_a_host_star_key(tmp_path: Path) -> None:
    paths = write(
        tmp_path,
        "Host head-node\n  HostName 203.0.113.5\n  User gcpuser\n  IdentityFile ~/.sky/key\n"
        "  UserKnownHostsFile /tmp/sky_known_hosts\n\n"
        "Host *\n  IdentityFile ~/.ssh/id_ed25519\n",
    )
    username, keys, files = node_login(Hop("head-node"), Hop("10.0.0.7"), paths)
    assert username == "gcpuser"
    home = str(Path.home())
    assert keys == [f"{home}/.sky/key", f"{home}/.ssh/id_ed25519"]
    assert files[0] == Path("/tmp/sky_known_hosts")  # the node's config names none: the head's


def test_a_node_pattern_with_its_own_known_hosts_keeps_them(tmp_path: Path) -> None:
    paths = write(
        tmp_path,
        "Host head-node\n  User alice\n  UserKnownHostsFile /tmp/head_known\n\n"
        "Host 10.*\n  UserKnownHostsFile /tmp/cluster_known\n",
    )
    username, keys, files = node_login(Hop("head-node"), Hop("10.0.0.7"), paths)
    assert username == "alice" and keys == [] and files[0] == Path("/tmp/cluster_known")


def test_no_user_anywhere_means_the_local_user(tmp_path: Path) -> None:
    paths = write(tmp_path, "Host head-node\n  HostName 203.0.113.5\n")
    username, _keys, _files = node_login(Hop("head-node"), Hop("10.0.0.7"), paths)
    assert username in ((), getpass.getuser())


def test_known_hosts_files_default_to_openssh_s_four(tmp_path: Path) -> None:
    """OpenSSH reads known_hosts2 and ssh_known_hosts2 too: a key revoked there must count here."""
    from cockpit.core.ssh.config import known_hosts_files

    home = Path.home() / ".ssh"
    assert known_hosts_files(None) == [
        home / "known_hosts",
        home / "known_hosts2",
        Path("/etc/ssh/ssh_known_hosts"),
        Path("/etc/ssh/ssh_known_hosts2"),
    ]
