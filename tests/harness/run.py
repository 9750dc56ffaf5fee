"""Provides the shared ways tests drive the cockpit: its command line (in this process where nothing of a
process is under test, or in a subprocess), and waiting on a Pilot-driven app for a condition (a
bounded wait, never a timing assertion)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from textual.pilot import Pilot


@dataclass(frozen=True)
class FinishedRun:
    """A short run of the demo profile submitted with `cockpit submit local demo ... --follow`, finished
    (the session's `finished_demo`)."""

    submission_id: str
    steps: int
    follow: subprocess.CompletedProcess[str]
    """What `submit --follow` printed, and its exit code."""


def interruptible() -> None:
    """For `preexec_fn`: SIGINT as a shell gives it to the command it starts, even when the suite was
    started in the background (`cmd &` in a non-interactive shell ignores SIGINT in all it starts)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_cockpit(
    *args: str, timeout: float = 120, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`cockpit ARGS` with no terminal on stdin (so it never prompts): what it printed and its exit code.

    It runs in this process (`cockpit.cli.main`, as a fresh process would: its own environment, stdin,
    stdout and stderr, the configuration read again, the signal handlers put back), which spares the
    half second of imports a `python -m cockpit.cli` costs. From a thread other than the main one, or
    under a running event loop (where `main` cannot run its own), it runs as a subprocess instead;
    tests of what only a process shows (signals, a terminal, imports) use `run_cockpit_subprocess`.
    """
    if threading.current_thread() is not threading.main_thread() or _loop_running():
        return run_cockpit_subprocess(*args, timeout=timeout, env=env, cwd=cwd)
    return _run_in_process(list(args), timeout, env, cwd)


def run_cockpit_subprocess(
    *args: str, timeout: float = 120, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m cockpit.cli ARGS` with no terminal on stdin (so it never prompts), run in CWD."""
    return subprocess.run(
        [sys.executable, "-m", "cockpit.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(env if env is not None else os.environ),
        stdin=subprocess.DEVNULL,
        cwd=cwd,
    )


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


@contextlib.contextmanager
def _environment(env: Mapping[str, str] | None) -> Iterator[None]:
    """os.environ is ENV for the duration (a copy of it; nothing when None), then exactly what it was."""
    if env is None:
        yield
        return
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def _directory(cwd: Path | None) -> Iterator[None]:
    """The working directory is CWD for the duration (nothing when None), then what it was."""
    if cwd is None:
        yield
        return
    saved = os.getcwd()
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(saved)


def _decoded(raw: bytes) -> str:
    """Bytes as `subprocess.run(text=True)` gives them: UTF-8, universal newlines."""
    return io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8").read()


def _run_in_process(
    args: list[str], timeout: float, env: Mapping[str, str] | None, cwd: Path | None
) -> subprocess.CompletedProcess[str]:
    from cockpit.cli import main
    from cockpit.cli.common import user_config

    out, errors = io.BytesIO(), io.BytesIO()
    stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    stderr = io.TextIOWrapper(errors, encoding="utf-8", write_through=True)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGALRM)}

    def too_long(_signum: int, _frame: object) -> None:
        raise subprocess.TimeoutExpired(["cockpit", *args], timeout)

    code: int
    with open(os.devnull) as stdin, _environment(env), _directory(cwd):
        saved = sys.stdin, sys.stdout, sys.stderr
        sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr
        user_config.cache_clear()  # read once per process: this "process" reads it afresh
        signal.signal(signal.SIGALRM, too_long)
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            code = main(args)
        except SystemExit as exc:  # argparse: usage errors (2), --help and --version (0)
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if isinstance(exc.code, str):
                print(exc.code, file=sys.stderr)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            raise
        except BaseException:  # what an uncaught exception does to a process: a traceback, exit 1
            traceback.print_exc(file=sys.stderr)
            code = 1
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            for sig, handler in handlers.items():
                signal.signal(sig, handler)
            sys.stdin, sys.stdout, sys.stderr = saved
            user_config.cache_clear()
    return subprocess.CompletedProcess(
        ["cockpit", *args], code, _decoded(out.getvalue()), _decoded(errors.getvalue())
    )


def run_cockpit_in_pty(*args: str, env: Mapping[str, str], timeout: float = 120) -> str:
    """`python -m cockpit.cli ARGS` with stdout and stderr on a terminal (a pty): what it printed there."""
    import pty
    import select

    parent, child = pty.openpty()
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "cockpit.cli", *args],
            stdin=subprocess.DEVNULL,
            stdout=child,
            stderr=child,
            env=dict(env),
        )
        os.close(child)
        child = -1
        output = bytearray()
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([parent], [], [], left)[0]:
                process.kill()
                process.wait()
                raise AssertionError(f"cockpit {' '.join(args)} still running after {timeout:.0f} s")
            try:
                data = os.read(parent, 65536)
            except OSError:  # EIO: the child side is closed
                break
            if not data:
                break
            output += data
        process.wait(timeout=timeout)
    finally:
        os.close(parent)
        if child != -1:
            os.close(child)
    return output.decode(errors="replace")


async def until(pilot: Pilot[int], condition: Callable[[], object], timeout: float = 60.0) -> None:
    """Let the app run until `condition()` holds; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout:.0f} s")
        await pilot.pause(0.25)
