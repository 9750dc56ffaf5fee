"""Provides a real terminal for the idle benchmark: tmux on its own server socket, 100x30 by default.

Each `Terminal` is its own tmux server (`tmux -L NAME`), so nothing here touches anyone else's tmux;
`close` kills that server. The app runs as a child of the pane's shell, which prints its exit status.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

EXIT = re.compile(r"bench-exit=(\d+)")


class Terminal:
    """A tmux session on its own server socket, running one command in its shell."""

    def __init__(self, name: str, width: int = 100, height: int = 30) -> None:
        self.name = name
        self.base = ["tmux", "-L", name]
        self._tmux("new-session", "-d", "-s", name, "-x", str(width), "-y", str(height))
        self.socket = self._tmux("display-message", "-p", "#{socket_path}").strip()

    def _tmux(self, *args: str) -> str:
        return subprocess.run([*self.base, *args], capture_output=True, text=True, check=True).stdout

    def type(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", self.name, *keys)

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", self.name)

    def shell_pid(self) -> int:
        return int(self._tmux("display-message", "-p", "-t", self.name, "#{pane_pid}").strip())

    def wait_for(self, predicate: Callable[[str], bool], timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            text = self.screen()
            if predicate(text):
                return text
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name}: screen after {timeout:.0f} s:\n{text}")
            time.sleep(0.5)

    def close(self) -> None:
        """Kill this tmux server and remove its socket file (tmux leaves it behind)."""
        subprocess.run([*self.base, "kill-server"], check=False, capture_output=True)
        if self.socket:
            Path(self.socket).unlink(missing_ok=True)


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
