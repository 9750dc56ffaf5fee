"""The `wide` layout on the real demo cluster, in a real terminal at 200x50: every pane live (the join,
the nodes, the GPU heatmap, the running job, its driver log and its training curves), then `q`. (The
`default` layout at 80x24 is checked in test_demo.py, on the same demo run as the Cluster screen.)"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
from pathlib import Path

import pytest

from cockpit.core.local import processes, record
from tests.harness.terminal import Terminal

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def demo(term: Terminal, state: Path, layout: str) -> None:
    python = shlex.quote(sys.executable)
    env = f"COCKPIT_STATE_DIR={shlex.quote(str(state))} COCKPIT_LAYOUT={layout}"
    term.type(f"{env} {python} -m cockpit.cli demo; echo demo-exit=$?", "Enter")


def test_the_wide_layout_shows_every_pane_live(tmp_path: Path) -> None:
    state = tmp_path / "state"
    term = Terminal(f"cockpit-wide-{os.getpid()}", 200, 50)
    try:
        demo(term, state, "wide")

        def live(screen: str) -> bool:
            return (
                "Nodes    3/3" in screen
                and "READY" in screen
                and screen.count("ALIVE") == 3
                and "RUNNING   demo-" in screen
                and re.search(r"step=\d+ reward=", screen) is not None  # the driver log pane
                and "reward" in screen
                and re.search(r"┤.*reward", screen) is not None  # the curves pane has its reward line
            )

        screen = term.wait_for(live, timeout=150)
        lines = screen.splitlines()
        assert lines[0].startswith(" 0 Cockpit · local (demo) · ● connected")
        for title in (
            "Join progress",
            "Nodes",
            "GPUs",
            "Jobs",
            "Driver log",
            "Training curves",
            "Paused workers",
        ):
            assert f"─ {title} ─" in screen, title
        assert "▀▀" in screen  # the heatmap's cells (logical GPUs: no readings, still drawn)
        # Live: the driver log moves on.
        last = max(int(n) for n in re.findall(r"step=(\d+) reward=", screen))
        term.wait_for(
            lambda s: max((int(n) for n in re.findall(r"step=(\d+) reward=", s)), default=0) > last,
            timeout=30,
        )
        term.type("q")
        term.wait_for(lambda s: "demo-exit=0" in s, timeout=90)
        assert record.load(state) is None
    finally:
        term.close()
        if record.load(state) is not None:
            processes.down(directory=state)
