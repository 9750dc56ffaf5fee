from __future__ import annotations

import pytest

from cockpit.core.errors import TargetError
from cockpit.core.targets import parse_target


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


@pytest.mark.parametrize("raw", ["", "ftp://x", "http://", "a b", "host:99999", "http://h:notaport"])
def test_bad_targets_are_one_sentence(raw: str) -> None:
    with pytest.raises(TargetError) as info:
        parse_target(raw)
    assert "\n" not in str(info.value)
