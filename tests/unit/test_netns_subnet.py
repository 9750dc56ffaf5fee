"""The multi-host harness's choice of a private subnet (tests/harness/netns.py): the first 10.231.N.0/24
that no route or address of the machine covers, never one a wider route covers."""

from __future__ import annotations

import pytest

from tests.harness import netns

ROUTES = """default via 192.0.2.1 dev eth0
192.0.2.0/24 dev eth0 proto kernel scope link src 192.0.2.2
10.231.7.0/24 dev ckmh123br proto kernel scope link src 10.231.7.1
local 10.231.8.1 dev ckmh456br table local proto kernel scope host src 10.231.8.1
"""


def _machine(monkeypatch: pytest.MonkeyPatch, routes: str) -> None:
    monkeypatch.setattr(netns, "ip", lambda *args, **kw: routes if "route" in args else "")


def test_a_routed_or_addressed_24_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    _machine(monkeypatch, ROUTES)
    assert netns.free_subnet(7) == "10.231.9"
    assert netns.free_subnet(6) == "10.231.6"
    assert netns.free_subnet(255) == "10.231.255"


@pytest.mark.parametrize("wide", ["10.0.0.0/8 via 192.0.2.1 dev eth0", "10.231.0.0/16 dev br0"])
def test_a_route_covering_every_candidate_is_refused(monkeypatch: pytest.MonkeyPatch, wide: str) -> None:
    _machine(monkeypatch, ROUTES + wide + "\n")
    with pytest.raises(RuntimeError, match=r"covers 10\.231\.0\.0/16"):
        netns.free_subnet()
