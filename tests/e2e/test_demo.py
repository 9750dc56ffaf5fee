"""`cockpit demo` driven as a person would: in a real terminal (tmux, 80x24), then `q`; and the terminal
closed under it."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest

from cockpit.core.local import processes, record
from tests.harness.cluster import cluster_processes, process_names
from tests.harness.terminal import Terminal

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def test_demo_shows_nodes_and_running_job_then_the_default_layout_at_80x24_then_quits_clean(
    tmp_path: Path,
) -> None:
    """In a terminal of 80x24 with no layout chosen, the demo opens on the Cluster screen; key 0 shows the
    cockpit screen in the `default` layout, which keeps the join, every node row, the job and its driver
    log in view, no line wider than the terminal. Then `q`: nothing of the cluster is left. (One demo
    cluster for both screens: each demo costs a 3-node start.)"""
    state = tmp_path / "state"
    term = Terminal(f"cockpit-demo-{os.getpid()}", 80, 24)
    try:
        python = shlex.quote(sys.executable)
        command = f"COCKPIT_STATE_DIR={shlex.quote(str(state))} {python} -m cockpit.cli demo"
        term.type(f"{command}; echo demo-exit=$?", "Enter")
        started = time.monotonic()
        text = term.wait_for(lambda s: "Nodes    3/3" in s and "RUNNING" in s and "demo-" in s, timeout=90)
        took = time.monotonic() - started
        assert "READY" in text and "GPUs     6/6" in text
        assert text.count("ALIVE") == 3
        assert "connected" in text and "Ray " in text
        cluster = record.load(state)
        assert cluster is not None
        before = cluster_processes(cluster)
        assert any(name.startswith("ray::Dashboard") for name in process_names(before).values())

        term.type("0")

        def live(screen: str) -> bool:
            return (
                "Nodes    3/3" in screen
                and "READY" in screen
                and screen.count("ALIVE") == 3  # every node row in view (no line lost to a sideways bar)
                and "RUNNING   demo-" in screen
                and re.search(r"step=\d+", screen) is not None  # the driver log pane
            )

        screen = term.wait_for(live, timeout=150)
        lines = screen.splitlines()
        assert lines[0].startswith(" 0 Cockpit · local (demo) · ● connected")
        assert lines[-1].startswith("1 Cluster 2 GPUs") and lines[-1].rstrip().endswith("q Quit")
        assert all(len(line) <= 80 for line in lines)

        term.type("q")
        term.wait_for(lambda s: "demo-exit=0" in s, timeout=60)
        assert process_names(before) == {}, "quitting the demo leaves no Ray process"
        assert record.load(state) is None
        print(f"demo showed 3 nodes and the running job {took:.0f} s after start")
    finally:
        term.close()
        if record.load(state) is not None:
            processes.down(directory=state)


def test_closing_the_terminal_stops_the_demo_cluster(tmp_path: Path) -> None:
    """A terminal closed under the app still stops the cluster the demo started: nothing of ~1.5 GB is
    left running on a shared login node. A hangup sends SIGHUP and SIGCONT to the program, in an order
    and at a moment nobody controls; here the SIGCONT lands while the cluster is being stopped (Textual's
    driver kept a SIGCONT handler that then raised and cut the teardown short), and then the terminal
    goes away for real (tmux killed: SIGHUP again, then every write fails with EIO)."""
    state = tmp_path / "state"
    term = Terminal(f"cockpit-demo-hup-{os.getpid()}", 100, 30)
    before: list[int] = []
    try:
        python = shlex.quote(sys.executable)
        term.type(f"COCKPIT_STATE_DIR={shlex.quote(str(state))} {python} -m cockpit.cli demo", "Enter")
        term.wait_for(lambda s: "Nodes    3/3" in s and "RUNNING" in s, timeout=90)
        cluster = record.load(state)
        assert cluster is not None
        before = cluster_processes(cluster)
        assert before
        (demo,) = term.foreground_pids()
        os.kill(demo, signal.SIGHUP)
        term.wait_for(lambda s: "stopping the local Ray cluster" in s, timeout=30)
        os.kill(demo, signal.SIGCONT)
    finally:
        term.close()
    deadline = time.monotonic() + 90
    while (process_names(before) or record.load(state) is not None) and time.monotonic() < deadline:
        time.sleep(0.5)
    try:
        assert process_names(before) == {}, "a closed terminal leaves no Ray process"
        assert record.load(state) is None
    finally:
        if record.load(state) is not None:
            processes.down(directory=state)
