"""Provides a real terminal for tests: a tmux session to type into and read the screen of."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path


class Terminal:
    """A tmux session on its own server socket, so it never touches the user's tmux."""

    def __init__(self, name: str, width: int, height: int) -> None:
        self.base = ["tmux", "-L", name]
        size = ["-x", str(width), "-y", str(height)]
        subprocess.run([*self.base, "new-session", "-d", "-s", name, *size], check=True)
        self.name = name

    def type(self, *keys: str) -> None:
        subprocess.run([*self.base, "send-keys", "-t", self.name, *keys], check=True)

    def screen(self) -> str:
        return subprocess.run(
            [*self.base, "capture-pane", "-p", "-t", self.name], capture_output=True, text=True, check=True
        ).stdout

    def wait_for(self, predicate: Callable[[str], bool], timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            text = self.screen()
            if predicate(text):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"screen after {timeout:.0f} s:\n{text}")
            time.sleep(0.5)

    def close(self) -> None:
        subprocess.run([*self.base, "kill-server"], check=False, capture_output=True)
        # kill-server leaves the server's socket file behind.
        socket_dir = Path(os.environ.get("TMUX_TMPDIR", "/tmp")) / f"tmux-{os.getuid()}"
        (socket_dir / self.name).unlink(missing_ok=True)

    def foreground_pids(self) -> list[int]:
        """Pids of the processes started by the pane's shell (the program being driven)."""
        shell = subprocess.run(
            [*self.base, "display-message", "-p", "-t", self.name, "#{pane_pid}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        children = []
        for entry in subprocess.run(
            ["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True
        ).stdout.split("\n"):
            parts = entry.split()
            if len(parts) == 2 and parts[1] == shell:
                children.append(int(parts[0]))
        return children
