"""Host-key rules of the SSH link, on known_hosts files written here (no network)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import subprocess
from pathlib import Path

import asyncssh
import pytest

from cockpit.core.ssh.config import Hop, hop_chain
from cockpit.core.ssh.errors import HostKeyChanged, SshError, UnknownHostKey
from cockpit.core.ssh.host_keys import (
    check_host_ca,
    check_host_key,
    host_key_algorithms,
    known_keys,
    offered_algorithms,
    read_known_hosts,
    record_host_key,
)

ED = asyncssh.generate_private_key("ssh-ed25519")
ED_OTHER = asyncssh.generate_private_key("ssh-ed25519")
EC = asyncssh.generate_private_key("ecdsa-sha2-nistp256")


def line(host: str, key: asyncssh.SSHKey) -> str:
    return f"{host} {key.export_public_key('openssh').decode().strip()}\n"


def known(tmp_path: Path, text: str) -> list[Path]:
    path = tmp_path / "known_hosts"
    path.write_text(text)
    return [path, tmp_path / "no-global-file"]


def check(host: str, port: int, key: asyncssh.SSHKey, files: list[Path]) -> None:
    check_host_key(host, port, key, read_known_hosts(files))


def keys(host: str, port: int, files: list[Path]) -> list[tuple[asyncssh.SSHKey, str]]:
    return known_keys(host, port, read_known_hosts(files))


def test_pinned_key_is_accepted(tmp_path: Path) -> None:
    check("head", 22, ED.convert_to_public(), known(tmp_path, line("head", ED)))


def test_changed_key_names_the_line(tmp_path: Path) -> None:
    files = known(tmp_path, "# comment\n" + line("other", EC) + line("head", ED))
    with pytest.raises(HostKeyChanged) as info:
        check("head", 22, ED_OTHER.convert_to_public(), files)
    assert f"{files[0]}:3" in str(info.value) and "ssh-keygen -R 'head'" in str(info.value)


def test_unknown_host_names_the_file_to_record_in(tmp_path: Path) -> None:
    files = known(tmp_path, line("other", ED))
    with pytest.raises(UnknownHostKey) as info:
        check("head", 22, ED.convert_to_public(), files)
    assert info.value.known_hosts == files[0] and info.value.fingerprint.startswith("SHA256:")
    record_host_key(info.value)
    check("head", 22, ED.convert_to_public(), files)  # recorded: accepted from now on
    assert "head ssh-ed25519 " in files[0].read_text()


def test_ports_are_separate_hosts_as_in_openssh(tmp_path: Path) -> None:
    files = known(tmp_path, line("head", ED) + line("[head]:2222", EC))
    assert [k for k, _ in keys("head", 2222, files)] == [EC.convert_to_public()]
    assert [k for k, _ in keys("head", 22, files)] == [ED.convert_to_public()]
    # A plain `head` line does not pin port 2200: an sshd there is unknown, not "changed".
    with pytest.raises(UnknownHostKey):
        check("head", 2200, ED_OTHER.convert_to_public(), files)


def test_hashed_entries_match(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.write_text(line("[head]:2222", ED))
    # OpenSSH's own hashing (ssh-keygen -H) of the entry:
    subprocess.run(["ssh-keygen", "-H", "-f", str(plain)], check=True, capture_output=True)
    assert plain.read_text().startswith("|1|")
    check("head", 2222, ED.convert_to_public(), [plain])


def test_revoked_key_is_refused(tmp_path: Path) -> None:
    files = known(tmp_path, "@revoked " + line("head", ED) + line("head", ED))
    with pytest.raises(HostKeyChanged, match="revoked"):
        check("head", 22, ED.convert_to_public(), files)


def test_only_pinned_key_types_are_asked_for(tmp_path: Path) -> None:
    files = known(tmp_path, line("head", EC))
    assert host_key_algorithms(keys("head", 22, files)) == ["ecdsa-sha2-nistp256"]
    rsa_like = host_key_algorithms([(asyncssh.generate_private_key("ssh-rsa", 1024), "f:1")])
    assert rsa_like == ["rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"]


@pytest.mark.parametrize(
    ("text", "host", "user", "port"),
    [
        ("head", "head", None, None),
        ("alice@login:2222", "login", "alice", 2222),
        ("[::1]:22", "::1", None, 22),
        ("bob@[fe80::1]", "fe80::1", "bob", None),
        ("fe80::1", "fe80::1", None, None),
    ],
)
def test_hop_parse(text: str, host: str, user: str | None, port: int | None) -> None:
    assert Hop.parse(text) == Hop(host=host, user=user, port=port)


def test_a_malformed_hop_is_an_ssh_error() -> None:
    with pytest.raises(SshError, match="'login:abc' is not an SSH destination"):
        Hop.parse("login:abc")


def test_proxyjump_chains_are_followed_like_openssh(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text(
        "Host head\n  HostName 10.0.0.5\n  ProxyJump login2\n"
        "Host login2\n  ProxyJump bastion,login1\n"
        "Host bastion\n  HostName bastion.example.edu\n"
    )
    chain = hop_chain(Hop("head"), [str(config)])
    assert [h.host for h in chain] == ["bastion", "login1", "login2", "head"]
    loop = tmp_path / "loop"
    loop.write_text("Host a\n  ProxyJump b\nHost b\n  ProxyJump a\n")
    with pytest.raises(Exception, match="nests more than"):
        hop_chain(Hop("a"), [str(loop)])


def test_reconnect_schedule_resumes_within_seconds() -> None:
    """The design behind "data flows again within 10 s of the head being back" (measured in the SSH
    tests): the link retries at most 4 s apart, and the UI polls as soon as the link is back."""
    from cockpit.core.ssh.link import BACKOFF_SECONDS

    assert max(BACKOFF_SECONDS) <= 4.0 and tuple(sorted(BACKOFF_SECONDS)) == BACKOFF_SECONDS


def test_recording_after_a_last_line_without_newline_keeps_both_entries(tmp_path: Path) -> None:
    """A known_hosts whose last entry has no newline (an editor, a script) must not be glued to the
    new entry: the old host would then look unknown, not changed, and the new one would not be pinned."""
    files = known(tmp_path, line("head", ED).rstrip("\n"))
    with pytest.raises(UnknownHostKey) as info:
        check("other", 22, EC.convert_to_public(), files)
    record_host_key(info.value)
    check("other", 22, EC.convert_to_public(), files)
    check("head", 22, ED.convert_to_public(), files)
    with pytest.raises(HostKeyChanged):
        check("head", 22, ED_OTHER.convert_to_public(), files)


def test_recording_keeps_the_files_mode_and_replaces_it_whole(tmp_path: Path) -> None:
    files = known(tmp_path, line("head", ED))
    files[0].chmod(0o640)
    before = files[0].stat().st_ino
    with pytest.raises(UnknownHostKey) as info:
        check("other", 22, EC.convert_to_public(), files)
    record_host_key(info.value)
    assert files[0].stat().st_mode & 0o777 == 0o640
    # Written beside and renamed over: a crash half-way leaves the old file, never half a file.
    assert files[0].stat().st_ino != before
    assert [p.name for p in tmp_path.iterdir()] == ["known_hosts"]


def test_recording_into_a_missing_ssh_directory_makes_it_private(tmp_path: Path) -> None:
    home_ssh = tmp_path / "home" / ".ssh"
    files = [home_ssh / "known_hosts", tmp_path / "no-global-file"]
    with pytest.raises(UnknownHostKey) as info:
        check("head", 22, ED.convert_to_public(), files)
    record_host_key(info.value)
    assert home_ssh.stat().st_mode & 0o777 == 0o700
    assert files[0].stat().st_mode & 0o777 == 0o600
    check("head", 22, ED.convert_to_public(), files)


def test_recording_through_a_symlinked_known_hosts_keeps_the_link(tmp_path: Path) -> None:
    """Dotfile managers link ~/.ssh/known_hosts elsewhere: the entry goes into the file linked to."""
    real = tmp_path / "dotfiles" / "known_hosts"
    real.parent.mkdir()
    real.write_text(line("head", ED))
    link = tmp_path / "known_hosts"
    link.symlink_to(real)
    with pytest.raises(UnknownHostKey) as info:
        check("other", 22, EC.convert_to_public(), [link])
    record_host_key(info.value)
    assert link.is_symlink() and "other ecdsa-sha2-nistp256 " in real.read_text()


def hashed(tmp_path: Path, text: str) -> list[Path]:
    """`text` as `ssh-keygen -H` writes it (OpenSSH's own hashing of the host field)."""
    files = known(tmp_path, text)
    subprocess.run(["ssh-keygen", "-H", "-f", str(files[0])], check=True, capture_output=True)
    assert files[0].read_text().startswith("|1|")
    return files


@pytest.mark.parametrize("revoked_for", ["[head]:2222", "*", "[head]:*"])
def test_revoked_applies_on_other_ports_too(tmp_path: Path, revoked_for: str) -> None:
    files = known(tmp_path, "@revoked " + line(revoked_for, ED) + line("[head]:2222", ED))
    with pytest.raises(HostKeyChanged, match=r"revoked \(.*known_hosts:1\)"):
        check("head", 2222, ED.convert_to_public(), files)


def test_a_hashed_port_22_entry_does_not_pin_other_ports(tmp_path: Path) -> None:
    files = hashed(tmp_path, line("head", ED))
    check("head", 22, ED.convert_to_public(), files)
    with pytest.raises(UnknownHostKey):
        check("head", 2222, ED.convert_to_public(), files)
    assert keys("head", 2222, files) == []


def hash_of(name: str) -> str:
    """A hashed host field as OpenSSH writes it (`ssh-keygen -H` leaves marked lines alone)."""
    salt = os.urandom(20)
    digest = hmac.new(salt, name.encode(), hashlib.sha1).digest()
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"


def test_a_hashed_revoked_entry_is_refused(tmp_path: Path) -> None:
    files = known(tmp_path, "@revoked " + line(hash_of("[head]:2222"), ED) + line("[head]:2222", ED))
    with pytest.raises(HostKeyChanged, match="revoked"):
        check("head", 2222, ED.convert_to_public(), files)


def test_wildcards_and_negation_match_host_and_port_as_openssh(tmp_path: Path) -> None:
    """OpenSSH matches the patterns against `host` on port 22 and `[host]:port` elsewhere."""
    files = known(tmp_path, line("*.cluster,!bad.cluster", ED) + line("[*.cluster]:2222", EC))
    assert [k for k, _ in keys("n1.cluster", 22, files)] == [ED.convert_to_public()]
    assert [k for k, _ in keys("N1.Cluster", 22, files)] == [ED.convert_to_public()]
    assert [k for k, _ in keys("n1.cluster", 2222, files)] == [EC.convert_to_public()]
    assert keys("bad.cluster", 22, files) == [] and keys("n1.cluster", 2200, files) == []
    everywhere = known(tmp_path, line("*", ED))
    with pytest.raises(HostKeyChanged):  # `*` matches `[head]:2222` too
        check("head", 2222, ED_OTHER.convert_to_public(), everywhere)


CA = asyncssh.generate_private_key("ssh-ed25519")
CA_OTHER = asyncssh.generate_private_key("ssh-ed25519")


def ca_line(hosts: str, ca: asyncssh.SSHKey, marker: str = "@cert-authority") -> str:
    return f"{marker} {line(hosts, ca)}"


def test_a_listed_ca_is_trusted_for_its_patterns_only(tmp_path: Path) -> None:
    files = known(tmp_path, ca_line("*.cluster,[*.cluster]:2222", CA))
    check_ca("n1.cluster", 22, CA.convert_to_public(), files)
    check_ca("n1.cluster", 2222, CA.convert_to_public(), files)
    with pytest.raises(HostKeyChanged, match="not listed"):
        check_ca("n1.cluster", 2200, CA.convert_to_public(), files)
    with pytest.raises(HostKeyChanged, match=r"@cert-authority.*known_hosts:1"):
        check_ca("n1.cluster", 22, CA_OTHER.convert_to_public(), files)


def test_a_revoked_ca_is_refused(tmp_path: Path) -> None:
    files = known(tmp_path, ca_line("*", CA) + ca_line("*", CA, "@revoked"))
    with pytest.raises(HostKeyChanged, match=r"revoked \(.*known_hosts:2\)"):
        check_ca("head", 22, CA.convert_to_public(), files)


def test_certificates_are_asked_for_only_where_a_ca_is_listed(tmp_path: Path) -> None:
    files = known(tmp_path, ca_line("[head]:2222", CA) + line("head", EC))
    with_ca = offered_algorithms("head", 2222, read_known_hosts(files))
    assert with_ca[0].endswith("-cert-v01@openssh.com") and "ssh-ed25519" in with_ca
    assert offered_algorithms("head", 22, read_known_hosts(files)) == ["ecdsa-sha2-nistp256"]
    unknown = offered_algorithms("other", 22, read_known_hosts(files))
    assert "ssh-ed25519" in unknown and not any("-cert-" in alg for alg in unknown)


def test_a_host_key_alias_is_looked_up_without_port(tmp_path: Path) -> None:
    """`HostKeyAlias` (OpenSSH): the alias names the host in known_hosts, whatever the port."""
    files = known(tmp_path, line("gpu-head", ED))
    check_host_key("10.0.0.5", 2222, ED.convert_to_public(), read_known_hosts(files), alias="gpu-head")
    with pytest.raises(HostKeyChanged, match="ssh-keygen -R 'gpu-head'"):
        check_host_key("10.0.0.5", 2222, EC.convert_to_public(), read_known_hosts(files), alias="gpu-head")


def check_ca(host: str, port: int, ca: asyncssh.SSHKey, files: list[Path]) -> None:
    check_host_ca(host, port, ca, read_known_hosts(files))
