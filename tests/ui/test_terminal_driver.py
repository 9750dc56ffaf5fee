"""A terminal closed under the app: Textual's driver made safe for it, and an exit that always ends.

The driver's part runs in this process on a real pty; the exit's part runs the app as a program in a real
terminal (tmux), since it ends the process."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import sys
import threading
import time
from pathlib import Path

import pytest
from textual.app import App
from textual.drivers._writer_thread import WriterThread

from cockpit.core.targets import parse_target
from cockpit.ui.app import CockpitApp
from cockpit.ui.terminal_driver import TerminalDriver, _TerminalFile
from tests.harness.terminal import Terminal

REPO = Path(__file__).resolve().parents[2]


def test_the_app_draws_through_the_cockpit_driver() -> None:
    app = CockpitApp(parse_target("http://127.0.0.1:1"), offline=True)
    assert app.driver_class is TerminalDriver


def test_writes_to_a_closed_terminal_are_dropped_and_the_writer_lives_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Textual's writer thread died on the first write after the terminal closed (EIO); the next 30
    writes then filled its queue and the one after waited forever, the app's event loop with it."""
    died: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: died.append(args.exc_value))
    parent, child = os.openpty()
    terminal = _TerminalFile(open(child, "w", encoding="utf-8"))  # noqa: SIM115 (the writer owns it)
    writer = WriterThread(terminal)  # type: ignore[arg-type]
    writer.start()
    writer.write("drawn while the terminal is open\n")
    os.close(parent)  # the terminal goes away: from now on every write fails with EIO
    for frame in range(20):
        writer.write(f"frame {frame}\n")
    writer.stop()  # the frames were taken off the queue, and the writer ended as asked
    assert died == []
    assert terminal.gone
    terminal.write("nobody sees this\n")
    terminal.flush()
    with contextlib.suppress(OSError):  # what the terminal never took is still buffered
        terminal.close()


async def test_a_sigcont_it_did_not_stop_for_leaves_the_terminal_alone() -> None:
    """A hangup sends SIGCONT to a process that was never stopped. Textual's driver took any SIGCONT
    for the end of a Ctrl+Z and started application mode again: a second writer thread and a second
    input thread on a terminal that is gone (or, outside the app's loop, an error in whatever ran)."""
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTSTP, signal.SIGCONT)}
    try:
        driver = TerminalDriver(App())
        os.kill(os.getpid(), signal.SIGCONT)
        time.sleep(0)  # the handler runs here, in the main thread
        assert driver._writer_thread is None and driver._key_thread is None
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM], ids=["hangup", "kill"])
def test_an_exit_that_never_ends_still_ends_the_process(tmp_path: Path, sig: signal.Signals) -> None:
    """A close that never returns (here: an unmount that waits forever) no longer keeps the process:
    after the grace it stops what its caller asked to be stopped and ends with 128 + the signal."""
    marker = tmp_path / "stopped"
    term = Terminal(f"cockpit-stuck-exit-{os.getpid()}-{sig.name}", 100, 30)
    try:
        term.type(
            f"cd {shlex.quote(str(REPO))} && {shlex.quote(sys.executable)} -m tests.harness.stuck_exit"
            f" {shlex.quote(str(marker))}; echo stuck-exit=$?",
            "Enter",
        )
        term.wait_for(lambda s: "127.0.0.1:1" in s, timeout=60)
        (pid,) = term.foreground_pids()
        os.kill(pid, sig)
        term.wait_for(lambda s: f"stuck-exit={128 + sig}" in s, timeout=60)
        assert marker.read_text() == "stopped"
    finally:
        term.close()


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as fh:
        return [int(child) for child in fh.read().split()]


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(") ", 1)[1].split()[0] != "Z"
    except OSError:
        return False


WRAPPER = (
    "import signal, subprocess, sys; signal.signal(signal.SIGHUP, lambda *a: None); "
    "sys.exit(subprocess.call(sys.argv[1:]))"
)
"""A session leader that catches the hangup and waits for its child, passing nothing on (a wrapper
script's `trap`, some batch and container launchers)."""


def test_a_hangup_the_session_leader_keeps_to_itself_still_ends_the_app(tmp_path: Path) -> None:
    """The kernel tells a hangup to the terminal's controlling process only. Under one that keeps it, the
    app ran on after its terminal closed (its cluster with it, its input thread reading end-of-file in a
    loop on a whole core); the driver now sees the hangup itself and ends the app as SIGHUP does (here an
    exit that never ends: the forced exit writes MARKER)."""
    marker = tmp_path / "stopped"
    term = Terminal(f"cockpit-hangup-kept-{os.getpid()}", 100, 30)
    app: list[int] = []
    try:
        python = shlex.quote(sys.executable)
        term.type(
            f"cd {shlex.quote(str(REPO))} && exec {python} -c {shlex.quote(WRAPPER)} {python} -m "
            f"tests.harness.stuck_exit {shlex.quote(str(marker))}",
            "Enter",
        )
        term.wait_for(lambda s: "127.0.0.1:1" in s, timeout=60)
        app[:] = _children(term.shell_pid())  # the shell became the wrapper; the app is its child
        assert len(app) == 1
        term.close()  # the terminal hangs up under them
        deadline = time.monotonic() + 60
        while _running(app[0]) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _running(app[0])
        assert marker.read_text() == "stopped"
    finally:
        term.close()
        for pid in app:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


async def test_the_hangup_watch_signals_once_and_ends_quietly() -> None:
    """On a real pty: the watch sends SIGHUP when the terminal goes away, and ending it afterwards (the
    app stopping, its end of the pipe already closed by the watch) raises nothing; a watch ended while
    the terminal is fine sends nothing."""
    got: list[int] = []
    before = signal.signal(signal.SIGHUP, lambda number, _frame: got.append(number))
    try:
        parent, child = os.openpty()
        driver = TerminalDriver(App())
        driver.fileno = child
        driver._watch_for_hangup()
        driver._end_hangup_watch()  # ended while the terminal is fine: nothing sent
        time.sleep(0.2)
        assert got == []
        driver._watch_for_hangup()
        os.close(parent)  # the terminal goes away
        deadline = time.monotonic() + 10
        while not got and time.monotonic() < deadline:
            time.sleep(0.05)
        assert got == [signal.SIGHUP]
        time.sleep(0.2)  # the watch has ended, its end of the pipe closed
        driver._end_hangup_watch()
        assert got == [signal.SIGHUP]
        os.close(child)
    finally:
        signal.signal(signal.SIGHUP, before)
