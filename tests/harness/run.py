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


def run_cockpit_in_pty(*args: str, env: Mapping[str, str], timeout: float = 120) -> str:
    """`python -m cockpit.cli ARGS` with stdout and stderr on a terminal (a pty): what it printed there."""
    import pty
    import select

    parent, child = pty.openpty()
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "cockpit.cli", *args],
            stdin=subprocess.DEVNULL,
            stdout=child,
            stderr=child,
            env=dict(env),
        )
        os.close(child)
        child = -1
        output = bytearray()
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([parent], [], [], left)[0]:
                process.kill()
                process.wait()
                raise AssertionError(f"cockpit {' '.join(args)} still running after {timeout:.0f} s")
            try:
                data = os.read(parent, 65536)
            except OSError:  # EIO: the child side is closed
                break
            if not data:
                break
            output += data
        process.wait(timeout=timeout)
    finally:
        os.close(parent)
        if child != -1:
            os.close(child)
    return output.decode(errors="replace")


async def until(pilot: Pilot[int], condition: Callable[[], object], timeout: float = 60.0) -> None:
    """Let the app run until `condition()` holds; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout:.0f} s")
        await pilot.pause(0.25)
