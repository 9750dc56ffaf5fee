from __future__ import annotations

import pytest

from cockpit.core.targets import TargetError, parse_destination, parse_target


def test_local() -> None:
    assert parse_target("local").kind == "local"


def test_http_dashboard() -> None:
    target = parse_target("http://127.0.0.1:8265/")
    assert target.kind == "http" and target.url == "http://127.0.0.1:8265"


@pytest.mark.parametrize(
    ("raw", "user", "host", "port"),
    [
        ("head-node", None, "head-node", None),
        ("alice@login.hpc.edu", "alice", "login.hpc.edu", None),
        ("10.0.0.5:2222", None, "10.0.0.5", 2222),
        ("bob@[::1]:22", "bob", "::1", 22),
    ],
)
def test_ssh_destinations(raw: str, user: str | None, host: str, port: int | None) -> None:
    target = parse_target(raw)
    assert (target.kind, target.user, target.host, target.port) == ("ssh", user, host, port)


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "ftp://x",
        "http://",
        "a b",
        "host:99999",
        "http://h:notaport",
        "http://a..b:8265",  # an empty part between dots
        f"http://{'h' * 5000}:80",  # a part over 63 characters: no name lookup can take it
        f"{'h' * 5000} x",
    ],
)
def test_bad_targets_are_one_sentence(raw: str) -> None:
    with pytest.raises(TargetError) as info:
        parse_target(raw)
    assert "\n" not in str(info.value)
    assert len(str(info.value)) < 300  # a 5,000-character TARGET is quoted with its middle left out


@pytest.mark.parametrize(
    ("text", "user", "host", "port"),
    [
        ("fe80::1", None, "fe80::1", None),
        ("[fe80::1%eth0]:2222", None, "fe80::1%eth0", 2222),
        ("alice@corp.edu@login", "alice@corp.edu", "login", None),
    ],
)
def test_destinations_split_like_openssh(text: str, user: str | None, host: str, port: int | None) -> None:
    """One parser for TARGET and for ProxyJump hops: the user is what comes before the last `@`."""
    assert parse_destination(text) == (user, host, port)
    assert parse_target(text).host == host


@pytest.mark.parametrize("text", ["@host", "user@", "a:b:c", "[::1]x", "[::1]:abc", "host:0", "a/b"])
def test_malformed_destinations_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_destination(text)


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["connect", "local", "--expect-nodes", "-3"], "argument --expect-nodes: -3 is not 1 or more"),
        (["connect", "local", "--expect-gpus", "x"], "argument --expect-gpus: 'x' is not a whole number"),
        (
            ["status", "local", "--dashboard-port", "99999"],
            "argument --dashboard-port: 99999 is not from 1 to 65535",
        ),
        (["submit", "local", "demo", "--nodes", "0"], "argument --nodes: 0 is not 1 or more"),
        (["demo", "--gpus-per-node", "-1"], "argument --gpus-per-node: -1 is not 0 or more"),
    ],
)
def test_a_count_out_of_range_is_refused_before_anything_runs(argv: list[str], error: str) -> None:
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "cockpit.cli", *argv], capture_output=True, text=True)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines()[-1].endswith(f"error: {error}")
