"""Provides a real terminal for tests and benchmarks: a tmux session to type into and read the screen of.

Each `Terminal` is its own tmux server (`tmux -L NAME`), so nothing here touches anyone else's tmux;
`close` kills that server and removes its socket file.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path


class Terminal:
    """A tmux session on its own server socket, running commands in its shell."""

    def __init__(self, name: str, width: int = 100, height: int = 30) -> None:
        self.name = name
        self.base = ["tmux", "-L", name]
        self._tmux("new-session", "-d", "-s", name, "-x", str(width), "-y", str(height))
        self.socket = self._tmux("display-message", "-p", "#{socket_path}").strip()

    def _tmux(self, *args: str) -> str:
        return subprocess.run([*self.base, *args], capture_output=True, text=True, check=True).stdout

    def type(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", self.name, *keys)

    def resize(self, width: int, height: int) -> None:
        """Resize the terminal as a user dragging its window would (the program gets SIGWINCH)."""
        self._tmux("resize-window", "-t", self.name, "-x", str(width), "-y", str(height))

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", self.name)

    def shell_pid(self) -> int:
        return int(self._tmux("display-message", "-p", "-t", self.name, "#{pane_pid}").strip())

    def foreground_pids(self) -> list[int]:
        """Pids of the processes started by the pane's shell (the program being driven)."""
        shell = str(self.shell_pid())
        table = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True).stdout
        return [
            int(pid)
            for pid, parent in (line.split() for line in table.splitlines() if line.strip())
            if parent == shell
        ]

    def wait_for(self, predicate: Callable[[str], bool], timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            text = self.screen()
            if predicate(text):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: screen after {timeout:.0f} s:\n{text}")
            time.sleep(0.5)

    def close(self) -> None:
        """Kill this tmux server and remove its socket file (tmux leaves it behind)."""
        subprocess.run([*self.base, "kill-server"], check=False, capture_output=True)
        if self.socket:
            Path(self.socket).unlink(missing_ok=True)
