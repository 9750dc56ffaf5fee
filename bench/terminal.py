"""Provides the idle benchmark's terminal helpers around the tests' tmux `Terminal`.

The app runs as a child of the pane's shell, which prints its exit status.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable

from common import REPO

if str(REPO) not in sys.path:  # the runner starts as `python bench/run.py`
    sys.path.insert(0, str(REPO))

from tests.harness.terminal import Terminal  # after the sys.path line above

EXIT = re.compile(r"bench-exit=(\d+)")


def child_pid(shell_pid: int, pattern: str, timeout: float = 30.0) -> int:
    """The app's process: the pane shell's child whose command line matches (pgrep -f, this pane only)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = subprocess.run(["pgrep", "-P", str(shell_pid), "-f", pattern], capture_output=True, text=True)
        pids = [int(p) for p in out.stdout.split()]
        if len(pids) == 1:
            return pids[0]
        time.sleep(0.2)
    raise RuntimeError(f"no single process matching {pattern!r} under the tmux pane {shell_pid}")


def start(name: str, command: str, ready: Callable[[str], bool], pattern: str) -> tuple[Terminal, int]:
    term = Terminal(name)
    term.type(f"{command}; echo bench-exit=$?", "Enter")
    term.wait_for(ready, timeout=90)
    return term, child_pid(term.shell_pid(), pattern)


def quit_app(term: Terminal, pid: int, timeout: float = 20.0) -> float:
    """Press q; seconds until the shell printed the app's exit status (which must be 0)."""
    started = time.monotonic()
    term.type("q")
    text = term.wait_for(lambda s: EXIT.search(s) is not None, timeout)
    took = time.monotonic() - started
    code = EXIT.search(text)
    if code is None or code.group(1) != "0" or os.path.exists(f"/proc/{pid}"):
        raise RuntimeError(f"{term.name}: pid {pid} did not quit cleanly after q:\n{text}")
    return took
