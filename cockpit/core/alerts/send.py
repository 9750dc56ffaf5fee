"""Provides where alerts go besides the screen: a JSON line, a desktop notification written to the
terminal, and the user's own command (`alerts.command`).

- `json_line`: one alert as one line of JSON (`cockpit alerts --json`, and the command's standard input).
- `notification`: the escape sequence that makes the user's terminal show a desktop notification, over
  SSH and through tmux: OSC 9 (iTerm2, WezTerm, kitty, Ghostty, Windows Terminal) or OSC 777 (foot,
  urxvt, Ghostty), wrapped in tmux's DCS passthrough when tmux lets it through (`allow-passthrough`),
  else the bell (which tmux and screen pass on as a window alert). The text is cleaned: no escape, no
  control character and no `;` of cluster text can end the sequence early or start another.
- `CommandSink`: runs the user's command (an argv list from the config or `--command`, never a shell
  string built from cluster text) once per alert, with the alert's JSON on its standard input, one at a
  time, each within `timeout` seconds; a failure, a timeout or a missing program is reported in one line
  and never retried (an alert is never sent twice); `close` ends a command still running, its whole
  process group, so nothing of it outlives the cockpit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal

from cockpit.core.text import clean

if TYPE_CHECKING:
    from cockpit.core.alerts.book import Alert

Style = Literal["osc9", "osc777", "bell", "off"]
NOTIFY_CHARS = 200
"""A notification's text is cut here (desktop notifications show a line or two)."""
SENT_REMEMBERED = 10_000
"""Alerts remembered as sent (the oldest forgotten first)."""
QUEUE_LIMIT = 1000
"""Alerts waiting for the command at most; past it the oldest are dropped (and that is reported)."""


def json_line(alert: Alert) -> str:
    """ASCII only: no character of cluster text (an 8-bit CSI, a bidi override) reaches a terminal raw."""
    return json.dumps(alert.as_json(), ensure_ascii=True)


def tmux_passthrough() -> bool | None:
    """None outside tmux; inside it, whether tmux passes escape sequences through (`allow-passthrough`
    on, tmux 3.3 and later; older tmux lets them through unasked)."""
    if not os.environ.get("TMUX"):
        return None
    try:
        done = subprocess.run(
            ["tmux", "show-options", "-gqv", "allow-passthrough"],
            capture_output=True,
            text=True,
            timeout=2,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    if done.returncode != 0:  # "invalid option": a tmux older than 3.3 passes DCS through by default
        return "invalid option" in done.stderr
    return done.stdout.strip() in ("on", "all")


def notification(alert: Alert, style: Style = "osc9", tmux: bool | None = None, bell: bool = True) -> str:
    """The characters that make the terminal notify ALERT (empty for `off`). TMUX: inside tmux, whether
    it passes sequences through (`tmux_passthrough`); when it does not, the bell is all that goes. BELL:
    the bell after the sequence too (the TUI rings its own)."""
    if style == "off":
        return ""
    if style == "bell" or tmux is False:
        return "\a"
    title = "ray-cockpit"
    body = _plain(alert.line)
    # OSC 9's text never starts with a digit: `9;4;...` is ConEmu's progress bar, not a notification.
    osc9 = f"\x1b]9;{title}: {body}\x07"
    sequence = f"\x1b]777;notify;{title};{body}\x1b\\" if style == "osc777" else osc9
    if tmux:
        sequence = "\x1bPtmux;" + sequence.replace("\x1b", "\x1b\x1b") + "\x1b\\"
    return sequence + ("\a" if bell else "")


def _plain(text: str) -> str:
    text = clean(text).replace(";", ",")
    return text if len(text) <= NOTIFY_CHARS else text[: NOTIFY_CHARS - 1] + "…"


class CommandSink:
    """The user's alert command (see the module's docstring)."""

    def __init__(
        self,
        argv: Sequence[str],
        report: Callable[[str], None],
        timeout: float = 30.0,
        grace: float = 2.0,
    ) -> None:
        if not argv:
            raise ValueError("an alert command needs at least its program")
        self.argv = tuple(argv)
        self.report = report
        """Told, in one line, each run that failed (the cockpit prints it or shows it)."""
        self.timeout = timeout
        self.grace = grace
        self.ran = 0
        self.failed = 0
        self._queue: deque[Alert] = deque()
        self._wake = asyncio.Event()
        self._sent: dict[tuple[str, str, float], None] = {}
        self._running: asyncio.subprocess.Process | None = None
        self._task: asyncio.Task[None] | None = None
        self._dropped = 0
        self._unfinished = 0
        """Alerts queued or running: `idle` waits for none."""

    def send(self, alert: Alert) -> None:
        """Queue ALERT for the command (once: the same alert in the same state is never run again)."""
        key = (alert.id, alert.state, alert.at)  # each reminder is its own
        if key in self._sent:
            return
        self._sent[key] = None
        if len(self._sent) > SENT_REMEMBERED:
            self._sent.pop(next(iter(self._sent)))
        if len(self._queue) >= QUEUE_LIMIT:
            self._queue.popleft()
            self._dropped += 1
            self._unfinished -= 1
        self._queue.append(alert)
        self._unfinished += 1
        self._wake.set()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._drain(), name="alert-command")

    async def idle(self) -> None:
        """Until every queued alert has been run (for tests and a clean exit)."""
        while self._unfinished > 0:
            await asyncio.sleep(0.05)

    async def close(self) -> None:
        """Stop: a command still running is ended (its process group: SIGTERM, then SIGKILL)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if self._running is not None:
            await self._end(self._running)
            self._running = None

    async def _drain(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self._dropped:
                self.report(f"alerts.command could not keep up: {self._dropped} alerts dropped")
                self._dropped = 0
            while self._queue:
                try:
                    await self._run(self._queue.popleft())
                finally:
                    self._unfinished -= 1

    async def _run(self, alert: Alert) -> None:
        program = os.path.basename(self.argv[0])
        data = (json_line(alert) + "\n").encode()
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,  # its own process group: ended whole on timeout or exit
            )
        except OSError as exc:
            self.failed += 1
            self.report(f"alerts.command {program} could not start: {exc.strerror or exc}")
            return
        self._running = proc
        self.ran += 1
        try:
            _, stderr = await asyncio.wait_for(proc.communicate(data), self.timeout)
        except asyncio.TimeoutError:
            await self._end(proc)
            self.failed += 1
            self.report(f"alerts.command {program} took more than {self.timeout:g} s for {alert.id}: ended")
            return
        except asyncio.CancelledError:
            await self._end(proc)  # the cockpit is stopping: the command goes with it
            raise
        finally:
            self._running = None
        if proc.returncode != 0:
            self.failed += 1
            last = (
                clean(stderr.decode("utf-8", "replace").strip().splitlines()[-1][:200])
                if stderr.strip()
                else ""
            )
            self.report(
                f"alerts.command {program} exited {proc.returncode} for {alert.id}"
                + (f": {last}" if last else "")
            )

    async def _end(self, proc: asyncio.subprocess.Process) -> None:
        """PROC's whole process group ended: SIGTERM, then SIGKILL after `grace` seconds (what it left
        running in its group goes too, even once PROC itself is gone)."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(proc.wait(), self.grace)
            if proc.returncode is not None and sig == signal.SIGTERM:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)  # a child it left behind in its group
                break
