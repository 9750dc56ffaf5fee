"""Provides the first-screen benchmark: from Enter in a terminal to `cockpit connect local` showing the
cluster's nodes on its Cluster screen, against a minimal Textual app's first frame in the same terminal.

Both run in one real terminal (tmux, 100x30, a server socket of its own), one after the other, rounds
alternating which goes first. The clock starts when the command's Enter is sent to tmux and stops at the
first capture of the pane that shows the sign: the minimal app's text (`bench/minimal_app.py`), and for
the cockpit each of its three moments: its first frame (the footer's `? Help`), the cluster reached
(`connected` on the status bar) and the live screen (every node's row `ALIVE`). The pane is captured every
10 ms (one `tmux capture-pane` is 3-5 ms of CPU, paid alike by both). Each app is quit with `q` before the
next starts. The issue's target: the live screen within 1.5x of the minimal app's first frame.
"""

from __future__ import annotations

import os
import shlex
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import BIN, PYTHON, REPO, Row, ratio
from terminal import EXIT, Terminal

NAME = "first_screen"
POLL_S = 0.01
TIMEOUT_S = 60.0


def _times_to(term: Terminal, command: str, signs: dict[str, Callable[[str], bool]]) -> dict[str, float]:
    """Seconds from Enter to the first capture showing each sign; then `q`, and the shell's `$?` seen."""
    term.type(f"clear; {command}; echo bench-exit=$?")
    time.sleep(0.3)  # the line typed and echoed before the clock starts
    seen: dict[str, float] = {}
    started = time.monotonic()
    term.type("Enter")
    while len(seen) < len(signs):
        screen = term.screen()
        now = time.monotonic() - started
        for name, sign in signs.items():
            if name not in seen and sign(screen):
                seen[name] = now
        if now > TIMEOUT_S:
            raise RuntimeError(
                f"{command!r}: not seen within {TIMEOUT_S:.0f} s: {set(signs) - set(seen)}\n{screen}"
            )
        time.sleep(POLL_S)
    term.type("q")
    text = term.wait_for(lambda s: EXIT.search(s) is not None, 30)
    code = EXIT.search(text)
    if code is None or code.group(1) != "0":
        raise RuntimeError(f"{command!r} did not quit cleanly after q:\n{text}")
    return seen


def run(state_dir: Path, nodes: int, quick: bool) -> tuple[dict[str, Any], list[Row]]:
    rounds = 4 if quick else 10
    minimal = f"{shlex.quote(PYTHON)} {shlex.quote(str(REPO / 'bench' / 'minimal_app.py'))}"
    env = f"COCKPIT_STATE_DIR={shlex.quote(str(state_dir))} PYTHONPATH={shlex.quote(str(REPO))}"
    cockpit = f"{env} {shlex.quote(str(BIN / 'cockpit'))} connect local"

    def live(screen: str) -> bool:
        return screen.count("ALIVE") >= nodes

    apps: dict[str, tuple[str, dict[str, Callable[[str], bool]]]] = {
        "minimal": (minimal, {"first_frame": lambda s: "minimal textual app" in s}),
        "cockpit": (
            cockpit,
            {
                "first_frame": lambda s: "? Help" in s,  # the footer: drawn with the first frame
                "connected": lambda s: "connected" in s,
                "live": live,
            },
        ),
    }
    samples: dict[str, dict[str, list[float]]] = {
        app: {sign: [] for sign in signs} for app, (_, signs) in apps.items()
    }
    term = Terminal(f"cockpit-bench-first-{os.getpid()}", width=100, height=30)
    try:
        for command, signs in apps.values():  # one warm-up each: the file cache, bytecode
            _times_to(term, command, signs)
        for index in range(rounds):
            order = list(apps) if index % 2 == 0 else list(reversed(apps))
            for name in order:
                command, signs = apps[name]
                for sign, seconds in _times_to(term, command, signs).items():
                    samples[name][sign].append(seconds)
    finally:
        term.close()
    median = {
        app: {sign: statistics.median(v) for sign, v in signs.items()} for app, signs in samples.items()
    }
    base = median["minimal"]["first_frame"]
    result = {"rounds": rounds, "nodes": nodes, "samples": samples, "median_s": median}
    rows = [Row(NAME, "minimal Textual app, first frame", f"{base * 1000:.0f} ms", f"median of {rounds}")]
    for sign, what in (
        ("first_frame", "first frame"),
        ("connected", "connected"),
        ("live", f"live screen ({nodes} nodes ALIVE)"),
    ):
        took = median["cockpit"][sign]
        target = " (target 1.5x)" if sign == "live" else ""
        detail = f"{ratio(took, base):.2f}x the minimal app's first frame{target}"
        rows.append(Row(NAME, f"cockpit connect local, {what}", f"{took * 1000:.0f} ms", detail))
    return result, rows
