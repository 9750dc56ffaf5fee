"""Provides a real debugpy debuggee for the DAP client tests: a Python process that waits for a debugger and
then stops on an uncaught exception, post-mortem, the way a Ray worker does with `RAY_DEBUG_POST_MORTEM=1`
(`ray/util/debugpy.py` `_debugpy_excepthook`). Nothing here imports Ray.

Run as a script, it listens on 127.0.0.1 (random port), prints `PORT <n>` on stdout, waits for a client,
then raises in `crash()`. Once a client lets it go, it prints `RELEASED` and exits with `EXIT_CODE`, so a
test sees the release happen; with `--linger` it stays up for `LINGER_S` seconds instead, as a reused
Ray worker does (its adapter goes on listening).

`start_debuggee` runs it for a test; `Debuggee.kill` ends it and its adapter, which debugpy spawns as a
detached process (double fork, parent 1) that owns the public socket.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

EXIT_CODE = 7
LINGER_S = 30
SCRIPT = Path(__file__).resolve()


class Payload:
    def __init__(self) -> None:
        self.label = "payload"
        self.size = 3


def crash() -> None:
    x = 41
    nested = {"a": [1, {"b": 2}], "t": (3, 4)}
    obj = Payload()
    assert obj.size == 3
    assert nested["t"] == (3, 4)
    raise ValueError(f"boom {x}")


def stop_post_mortem() -> None:
    """Ray's `_debugpy_excepthook`: pydevd stops on the exception being handled."""
    import pydevd

    py_db = pydevd.get_global_debugger()
    thread = threading.current_thread()
    additional_info = py_db.set_additional_thread_info(thread)
    additional_info.is_tracing += 1
    try:
        py_db.stop_on_unhandled_exception(py_db, thread, additional_info, sys.exc_info())
    finally:
        additional_info.is_tracing -= 1


def main() -> None:
    import debugpy

    _host, port = debugpy.listen(("127.0.0.1", 0))
    print(f"PORT {port}", flush=True)
    debugpy.wait_for_client()
    try:
        crash()
    except ValueError:
        stop_post_mortem()
    print("RELEASED", flush=True)
    if "--linger" in sys.argv:
        time.sleep(LINGER_S)
    # os._exit: a SystemExit would be one more uncaught exception for debugpy to stop on.
    os._exit(EXIT_CODE)


# The test side


@dataclass
class Debuggee:
    process: subprocess.Popen[bytes]
    port: int
    adapter_pid: int | None
    """The debugpy adapter process listening on `port` (found through /proc)."""

    def output(self, timeout: float = 10.0) -> tuple[int, str]:
        """Wait for the exit; (exit code, stdout after the PORT line).

        Not `communicate()`: the adapter inherits the debuggee's stdout, so the pipe has no end while the
        adapter lives; what the debuggee wrote is in the pipe when it has exited."""
        code = self.process.wait(timeout=timeout)
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        os.set_blocking(fd, False)
        out = b""
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(fd, 65536):
                out += chunk
        return code, out.decode(errors="replace")

    def kill(self) -> None:
        """Kill the debuggee and its adapter (whatever state they are in; again is harmless)."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)
        if self.process.stdout is not None:
            self.process.stdout.close()
        kill_adapter(self.adapter_pid)
        # Whatever still listens on the port is a leak of this harness: say so rather than leave it.
        still = listener_pid(self.port)
        if still is not None and _is_adapter(still):
            kill_adapter(still)
            raise AssertionError(
                f"process {still}, not the adapter {self.adapter_pid}, listened on {self.port}"
            )


def kill_adapter(pid: int | None, timeout: float = 15.0) -> None:
    """SIGKILL the adapter and wait until it is dead (its sockets closed), not only signalled. A pid that
    is no longer the adapter is a pid reused by another process after the adapter ended: nothing to
    wait for (the suite starts hundreds of processes; a run waited 5 s on such a one and failed)."""
    if pid is None or not _is_adapter(pid):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while _alive(pid) and _is_adapter(pid):
        if time.monotonic() > deadline:
            raise AssertionError(f"the debugpy adapter {pid} is still alive {timeout:.0f} s after SIGKILL")
        time.sleep(0.02)


def _is_adapter(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"debugpy" in cmdline and b"--for-server" in cmdline


def _alive(pid: int) -> bool:
    """Running, not a zombie (the adapter's parent is init, which may be slow to reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def listener_pid(port: int) -> int | None:
    """The process holding the TCP socket that listens on `port` (Linux /proc)."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                inodes.add(f"socket:[{fields[9]}]")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{entry}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{entry}/fd/{fd}") in inodes:
                    return int(entry)
            except OSError:
                continue
    return None


def start_debuggee(*args: str, stderr_path: Path, timeout: float = 20.0) -> Debuggee:
    """Start the debuggee and wait for its port; it is killed if it does not print one in time."""
    env = dict(os.environ, PYDEVD_DISABLE_FILE_VALIDATION="1")
    with stderr_path.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-Xfrozen_modules=off", str(SCRIPT), *args],
            stdout=subprocess.PIPE,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            env=env,
        )
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    line = b""
    try:
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([process.stdout], [], [], left)[0]:
                raise AssertionError(f"the debuggee printed no port within {timeout:.0f} s")
            chunk = os.read(process.stdout.fileno(), 1)
            if not chunk:
                raise AssertionError(
                    f"the debuggee exited: {stderr_path.read_text(errors='replace')[-2000:]}"
                )
            line += chunk
        port = int(line.split()[1])
    except BaseException:
        process.kill()
        process.wait()
        process.stdout.close()
        raise
    return Debuggee(process, port, listener_pid(port))


if __name__ == "__main__":
    main()
