"""Provides the shared ways tests drive the cockpit: its command line in a subprocess, and waiting on a
Pilot-driven app for a condition (a bounded wait, never a timing assertion)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping

from textual.pilot import Pilot


def run_cockpit(
    *args: str, timeout: float = 120, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m cockpit.cli ARGS` with no terminal on stdin (so it never prompts)."""
    return subprocess.run(
        [sys.executable, "-m", "cockpit.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(env if env is not None else os.environ),
        stdin=subprocess.DEVNULL,
    )


async def until(pilot: Pilot[int], condition: Callable[[], object], timeout: float = 60.0) -> None:
    """Let the app run until `condition()` holds; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout:.0f} s")
        await pilot.pause(0.25)
