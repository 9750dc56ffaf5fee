"""Provides the cockpit's terminal driver: Textual's Linux driver, made safe for a terminal that goes away.

Closing the terminal under the app (an SSH session dropped, a tmux or a window killed) hangs the tty up:
every write fails with EIO, and the process gets SIGHUP and a SIGCONT, in either order. Textual's driver
takes both badly:

- its writer thread dies on the first failed write, and whoever writes next fills the thread's bounded
  queue (30 writes) and then waits forever on it, the event loop included: the app never ends;
- its SIGCONT handler starts application mode again whether or not the app was suspended, with a second
  writer thread (which dies on its first write, so the 30 writes come sooner) and a second input thread.

Here a write to a terminal that is gone is dropped instead (`_TerminalFile`), and SIGCONT resumes only an
app that the driver itself suspended (Ctrl+Z). The app then ends the way `q` ends it.

The SIGHUP itself goes to the terminal's controlling process (the shell, or the cockpit when it is
one). A session leader that catches it and waits for its child (a wrapper script with a `trap`, some
batch and container launchers) passes nothing on: the cockpit went on running, its cluster with it,
and Textual's input thread, reading end-of-file from the hung-up terminal in a loop, took a whole core.
So the driver watches the terminal for the hangup itself (`poll` reports POLLHUP whatever is asked, and
nothing else is asked: keys do not wake it) and sends the process the SIGHUP nobody else did.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import signal
import threading
from typing import IO, Any

from textual.drivers.linux_driver import LinuxDriver

GONE = frozenset({errno.EIO, errno.EPIPE, errno.ENXIO, errno.EBADF})
"""Write errors that mean the terminal is gone for good (hung up, closed)."""


class _TerminalFile:
    """The driver's output file, whose failed writes are dropped instead of killing the writer thread.

    Once a write says the terminal is gone, nothing more is written (the frames have nobody to show them).
    """

    def __init__(self, file: IO[str]) -> None:
        self._file = file
        self.gone = False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                self._file.write(text)
            except OSError as exc:
                self.gone = exc.errno in GONE
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self._file.flush()
            except OSError as exc:
                self.gone = exc.errno in GONE

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding: the terminal's own
        return getattr(self._file, name)


class TerminalDriver(LinuxDriver):
    """Textual's Linux driver that outlives its terminal long enough for the app to end."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self._file is not None:  # the writer thread only writes, flushes and asks for fileno
            self._file = _TerminalFile(self._file)  # type: ignore[assignment]
        self._suspended_itself = False
        """The driver stopped the process on SIGTSTP (Ctrl+Z) and resumes it on the next SIGCONT."""
        self._hangup_watch: int | None = None
        """The write end of the pipe that ends the hangup watch (`_watch_for_hangup`), while it runs."""

    def start_application_mode(self) -> None:
        super().start_application_mode()  # type: ignore[no-untyped-call]
        self._watch_for_hangup()

    def stop_application_mode(self) -> None:
        self._end_hangup_watch()
        super().stop_application_mode()

    def _watch_for_hangup(self) -> None:
        """Until application mode ends: when the terminal hangs up, SIGHUP to this process (once)."""
        if self._hangup_watch is not None or not os.isatty(self.fileno):
            return
        wake, self._hangup_watch = os.pipe()
        terminal = self.fileno

        def watch() -> None:
            poller = select.poll()
            poller.register(terminal, 0)  # POLLHUP, POLLERR and POLLNVAL come whatever is asked
            poller.register(wake, select.POLLIN)
            try:
                events = dict(poller.poll())
            finally:
                os.close(wake)
            if events.get(terminal, 0) & select.POLLHUP:
                os.kill(os.getpid(), signal.SIGHUP)

        threading.Thread(target=watch, name="cockpit-hangup-watch", daemon=True).start()

    def _end_hangup_watch(self) -> None:
        if self._hangup_watch is not None:
            # The watch may be over already (it saw the hangup and closed its end): then the write fails.
            with contextlib.suppress(OSError):
                os.write(self._hangup_watch, b"x")
            os.close(self._hangup_watch)
            self._hangup_watch = None

    def _sigtstp_application(self, *args: Any) -> None:
        self._suspended_itself = self._auto_restart
        super()._sigtstp_application(*args)

    def _sigcont_application(self, *args: Any) -> None:
        # A hangup sends SIGCONT to a process that was never stopped: nothing to resume, and starting
        # application mode again would start a second writer and a second input thread.
        if not self._suspended_itself:
            return
        self._suspended_itself = False
        super()._sigcont_application(*args)
