"""`cockpit demo` driven as a person would, in a real terminal (tmux): at 80x24 the Cluster screen and the
`default` layout, the terminal then resized to 200x50, then closed under the app.

One demo run for all of it: each `cockpit demo` costs a 3-node start and a job of 8 actors (about 85
CPU-s here, docs/testing.md). The other exit, `q`, and the `wide` layout are the installed wheel's
test (tests/e2e/test_installed_wheel.py: the installed `cockpit demo` at 200x50 in the `wide` layout,
every pane and the heatmap's cells, then `q`, no Ray process left); the `wide` layout's driver log,
curves and hang watch following one job live are tests/ui/test_cockpit_one_job.py's.
"""

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

DEFAULT_PANES = ("Join progress", "Nodes", "Jobs", "Paused workers", "Driver log")


def newest_step(screen: str) -> int:
    return max((int(n) for n in re.findall(r"step=(\d+)", screen)), default=0)


def live(screen: str) -> bool:
    """The cockpit screen with the join, every node row, the running job and its driver log in view."""
    return (
        "Nodes    3/3" in screen
        and "READY" in screen
        and screen.count("ALIVE") == 3  # every node row in view (no line lost to a sideways bar)
        and "RUNNING   demo-" in screen
        and re.search(r"step=\d+", screen) is not None  # the driver log pane
    )


def test_demo_at_80x24_then_resized_to_200x50_then_a_closed_terminal_stops_the_cluster(
    tmp_path: Path,
) -> None:
    """In a terminal of 80x24 with no layout chosen, the demo opens on the Cluster screen; key 0 shows the
    cockpit screen in the `default` layout, which keeps the join, every node row, the job and its driver
    log in view, no line wider than the terminal. The terminal resized to 200x50 (with COLUMNS=80 and
    LINES=24 in the app's environment, which Textual would take over the real size): the same panes fill
    it, the driver log moving on. Then the terminal is closed under the app, and it still stops the
    cluster the demo started: nothing of ~1.5 GB is left running on a shared login node. A hangup sends
    SIGHUP and SIGCONT to the program, in an order and at a moment nobody controls; here the SIGCONT lands
    while the cluster is being stopped (Textual's driver kept a SIGCONT handler that then raised and cut
    the teardown short), and then the terminal goes away for real (tmux killed: SIGHUP again, then every
    write fails with EIO)."""
    state = tmp_path / "state"
    term = Terminal(f"cockpit-demo-{os.getpid()}", 80, 24)
    before: list[int] = []
    try:
        python = shlex.quote(sys.executable)
        # COLUMNS and LINES exported, as a shell or GNU readline may leave them: the app must follow the
        # terminal's real size all the same when it is resized.
        env = f"COCKPIT_STATE_DIR={shlex.quote(str(state))} COLUMNS=80 LINES=24"
        term.type(f"{env} {python} -m cockpit.cli demo", "Enter")
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
        screen = term.wait_for(live, timeout=150)
        lines = screen.splitlines()
        assert lines[0].startswith(" 0 Cockpit · local (demo) · ● connected")
        assert lines[-1].startswith("1 Cluster 2 GPUs") and lines[-1].rstrip().endswith("q Quit")
        assert all(len(line) <= 80 for line in lines)

        term.resize(200, 50)

        def filled(screen: str) -> bool:
            lines = screen.splitlines()
            return (
                live(screen)
                and len(lines) == 50
                and any(len(line.rstrip()) > 80 for line in lines)
                and all(f"─ {title} ─" in screen for title in DEFAULT_PANES)
            )

        screen = term.wait_for(filled, timeout=60)
        assert all(len(line) <= 200 for line in screen.splitlines())
        assert screen.splitlines()[0].startswith(" 0 Cockpit · local (demo) · ● connected")
        last = newest_step(screen)
        term.wait_for(lambda s: newest_step(s) > last, timeout=30)  # live: the driver log moves on

        (demo,) = term.foreground_pids()
        os.kill(demo, signal.SIGHUP)
        term.wait_for(lambda s: "stopping the local Ray cluster" in s, timeout=30)
        os.kill(demo, signal.SIGCONT)
        print(f"demo showed 3 nodes and the running job {took:.0f} s after start")
    finally:
        term.close()
    deadline = time.monotonic() + 90
    while (process_names(before) or record.load(state) is not None) and time.monotonic() < deadline:
        time.sleep(0.5)
    try:
        assert before, "the demo's Ray processes were listed"
        assert process_names(before) == {}, "a closed terminal leaves no Ray process"
        assert record.load(state) is None
    finally:
        if record.load(state) is not None:
            processes.down(directory=state)
