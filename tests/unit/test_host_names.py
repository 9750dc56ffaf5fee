"""A host name no lookup can take (a part between dots over 63 characters) is one permanent sentence, on
the SSH way and the HTTP way alike, never a traceback: the name lookup's IDNA encoding raises
UnicodeError, which neither the SSH link nor the dashboard client caught (a 5,000-character TARGET
crashed `cockpit status`). Nothing is sent anywhere: the lookup fails first."""

from __future__ import annotations

from pathlib import Path

import pytest

from cockpit.core.cluster.dashboard import DashboardClient
from cockpit.core.cluster.errors import DashboardUnreachable
from cockpit.core.errors import is_permanent
from cockpit.core.ssh.errors import SshError
from cockpit.core.ssh.link import SshLink, SshOptions
from cockpit.core.targets import parse_target

LONG = "h" * 300


async def test_an_ssh_host_no_lookup_can_take_is_one_permanent_sentence(tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text("")
    link = SshLink(parse_target(f"user@{LONG}"), SshOptions(config=str(config)))
    try:
        with pytest.raises(SshError) as info:
            await link.start()
    finally:
        await link.close()
    message = str(info.value)
    assert is_permanent(info.value) and "63 characters" in message
    assert "\n" not in message and len(message) < 300


async def test_a_dashboard_host_no_lookup_can_take_is_one_permanent_sentence() -> None:
    """`parse_target` refuses such an http:// TARGET; a client given the address another way (a config's
    dashboard URL, a hop's forward) says the same in one sentence."""
    async with DashboardClient(f"http://{LONG}.example:8265", timeout=5) as client:
        with pytest.raises(DashboardUnreachable) as info:
            await client.version()
    message = str(info.value)
    assert is_permanent(info.value) and "63 characters" in message
    assert "\n" not in message and len(message) < 300
