"""Provides the GPU errors: no GPU a backend can read, and an agent on a node that stopped.

Both end what asked (a node's agent, high-resolution mode); nothing retries them on its own (`h` asks
again). This module ships to the nodes with the backends (`agents.MODULES`): it imports only
`cockpit.core.errors`.
"""

from __future__ import annotations

from cockpit.core.errors import CockpitError


class NoGpuFound(CockpitError):
    """No usable NVIDIA or AMD GPU on this machine."""


class AgentFailed(CockpitError):
    """The agent on one node stopped or never started; `str()` is the one line to show."""
