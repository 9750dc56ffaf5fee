"""`cockpit demo` driven as a person would, in a real terminal (tmux): at 80x24 the Cluster screen and the
`default` layout, then `q`; at 200x50 the `wide` layout, then the terminal closed under it."""

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


def test_the_wide_layout_live_then_a_closed_terminal_stops_the_demo_cluster(tmp_path: Path) -> None:
    """The `wide` layout (`COCKPIT_LAYOUT=wide`) at 200x50 opens on the cockpit screen with every pane
    live: the join, the nodes, the GPU heatmap, the running job, its driver log moving on and its training
    curves. Then the terminal is closed under the app, and it still stops the cluster the demo started:
    nothing of ~1.5 GB is left running on a shared login node. A hangup sends SIGHUP and SIGCONT to the
    program, in an order and at a moment nobody controls; here the SIGCONT lands while the cluster is
    being stopped (Textual's driver kept a SIGCONT handler that then raised and cut the teardown short),
    and then the terminal goes away for real (tmux killed: SIGHUP again, then every write fails with
    EIO). (One demo run for both: each demo costs a 3-node start and a job of 8 actors.)"""
    state = tmp_path / "state"
    term = Terminal(f"cockpit-demo-hup-{os.getpid()}", 200, 50)
    before: list[int] = []
    try:
        python = shlex.quote(sys.executable)
        env = f"COCKPIT_STATE_DIR={shlex.quote(str(state))} COCKPIT_LAYOUT=wide"
        term.type(f"{env} {python} -m cockpit.cli demo", "Enter")

        def live(screen: str) -> bool:
            return (
                "Nodes    3/3" in screen
                and "READY" in screen
                and screen.count("ALIVE") == 3
                and "RUNNING   demo-" in screen
                and re.search(r"step=\d+ reward=", screen) is not None  # the driver log pane
                and re.search(r"┤.*reward", screen) is not None  # the curves pane has its reward line
            )

        screen = term.wait_for(live, timeout=150)
        assert screen.splitlines()[0].startswith(" 0 Cockpit · local (demo) · ● connected")
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
        last = max(int(n) for n in re.findall(r"step=(\d+) reward=", screen))
        term.wait_for(  # live: the driver log moves on
            lambda s: max((int(n) for n in re.findall(r"step=(\d+) reward=", s)), default=0) > last,
            timeout=30,
        )

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
