"""Provides a cockpit whose exit never ends, as a program: `python -m tests.harness.stuck_exit MARKER`.

It stands for an exit stuck on a close that never returns (or a thread stuck on a terminal that is
gone): the app, offline on an empty state, waits forever as it unmounts. A closed terminal or a kill must
still end the process, after stopping what the caller asked to be stopped (here: MARKER is written), with
128 + the signal's number. The grace is cut to a second: the test waits for the end, not for a time.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import cockpit.ui.app as app_module
from cockpit.core.targets import parse_target
from cockpit.ui.app import CockpitApp


class StuckExit(CockpitApp):
    CSS_PATH = str(Path(app_module.__file__).with_name(str(CockpitApp.CSS_PATH)))
    """The app's own styles (a relative CSS_PATH is read beside the module of the class that names it)."""

    async def on_unmount(self) -> None:
        await asyncio.Event().wait()


def main(marker: Path) -> int:
    app_module.EXIT_GRACE_SECONDS = 1.0
    app = StuckExit(
        parse_target("http://127.0.0.1:1"),
        offline=True,
        before_forced_exit=lambda: marker.write_text("stopped"),
    )
    app.run()
    return app.return_code or 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
