"""`cockpit alerts` on the real session cluster: a failing job, a job whose loss goes NaN, and a job that
hangs, each told exactly once (on stdout as JSON and to a real command with the same JSON), and SIGTERM
while that command still runs leaves no process behind. Beside it, the TUI in a pseudo-terminal writes
the desktop notification (OSC 9) of the same failed job.

Three small jobs of a few lines of Python (no actors: about 5 CPU-s each), one `cockpit alerts` process
looking every second (`COCKPIT_ALERTS_INTERVAL`), the hang after 6 s (`--hang-after`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cockpit.core.errors import CockpitError
from tests.harness.cluster import ClusterHandle
from tests.harness.run import run_cockpit
from tests.harness.sshd import _descendants, process_table

pytestmark = pytest.mark.cluster

FAIL = "import sys; print('step=1 loss=0.9', flush=True); sys.exit(3)"
NAN = (
    "import time\n"
    "for step, loss in enumerate([0.9, 0.8, 0.7, float('nan'), 0.6], 1):\n"
    "    print(f'step={step} loss={loss}', flush=True); time.sleep(0.5)\n"
)
HANG = "import time\nprint('step=1 loss=0.9', flush=True)\ntime.sleep(3600)\n"

TAKE = """\
import json, os, sys, time
data = sys.stdin.read()
with open(sys.argv[1], "a") as out:
    out.write(data)
if json.loads(data)["rule"] == "hang":  # a slow pager: still running when SIGTERM comes
    with open(sys.argv[2], "w") as pid:
        pid.write(str(os.getpid()))
    time.sleep(300)
"""


def _alerts(stdout: str) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def test_three_jobs_give_one_alert_each_on_stdout_and_to_the_command_and_sigterm_leaves_nothing(
    ray_cluster: ClusterHandle, tmp_path: Path
) -> None:
    got, pid_file, script = tmp_path / "got.jsonl", tmp_path / "pager.pid", tmp_path / "take.py"
    script.write_text(TAKE)
    command = f"{sys.executable} {script} {got} {pid_file}"
    env = {**os.environ, "COCKPIT_ALERTS_INTERVAL": "1", "COCKPIT_ALERTS_NOTIFY": "off"}
    stdout, stderr = tmp_path / "stdout", tmp_path / "stderr"
    with stdout.open("w") as out, stderr.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cockpit.cli", "alerts", "local", "--json", "--hang-after", "6s",
             "--command", command],
            stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env,
        )  # fmt: skip
    ids: dict[str, str] = {}
    tui = PtyApp(["connect", "local"], env={**os.environ, "COCKPIT_ALERTS_NOTIFY": "osc9"})
    try:
        _wait(lambda: "local: watching" in stderr.read_text(), 60, "the watch to start", stderr)
        _wait(lambda: b"connected" in tui.output(), 60, "the TUI to connect")
        ids = asyncio.run(_submit(ray_cluster))
        wanted = {("job_failed", ids["fail"]), ("nan", ids["nan"]), ("hang", ids["hang"])}

        def told() -> set[tuple[str, str]]:
            return {(a["rule"], a["job"]) for a in _alerts(stdout.read_text())}

        _wait(lambda: wanted <= told() and pid_file.exists(), 180, f"alerts {sorted(wanted)}", stderr)
        time.sleep(2.5)  # two more looks: nothing is told again
        mine = [a for a in _alerts(stdout.read_text()) if a["job"] in ids.values()]
        by_kind = sorted((a["rule"], a["job"], a["state"]) for a in mine)
        assert by_kind == sorted(
            [
                ("job_failed", ids["fail"], "firing"),
                ("nan", ids["nan"], "firing"),
                ("job_succeeded", ids["nan"], "firing"),
                ("hang", ids["hang"], "firing"),
            ]
        ), by_kind
        nan = next(a for a in mine if a["rule"] == "nan")
        assert nan["step"] == 4 and nan["message"] == f"{ids['nan']}: loss went nan at step 4"
        assert "exit code 3" in next(a["message"] for a in mine if a["rule"] == "job_failed")
        assert next(a for a in mine if a["rule"] == "hang")["message"].startswith(
            f"{ids['hang']}: no progress"
        )
        # The command got the very same JSON, once per alert (the hang's run is still going).
        _wait(lambda: len(_alerts(got.read_text())) >= len(_alerts(stdout.read_text())), 30, "the command")
        assert sorted(map(json.dumps, _alerts(got.read_text()))) == sorted(
            map(json.dumps, _alerts(stdout.read_text()))
        )

        # `cockpit runs` lists the local cluster with a job running (the hung one, or another test's).
        listed = run_cockpit("runs", "--json")
        assert listed.returncode == 0, listed.stderr
        local = next(r for r in json.loads(listed.stdout) if r["target"] == "local")
        assert (local["source"], local["state"], local["nodes_alive"]) == ("local", "running", 3), local
        assert local["job"] and local["running_jobs"] >= 1, local

        family = [proc.pid, *_descendants(proc.pid)]
        pager = int(pid_file.read_text())
        assert pager in family
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, stderr.read_text()
        _wait(lambda: not any(_alive(pid) for pid in family), 10, f"its processes to end: {_named(family)}")
        assert "stopped" in stderr.read_text()

        # The TUI told the same failure to the desktop, through the terminal: OSC 9, text only.
        osc9 = f"\x1b]9;ray-cockpit: ✖ local: job {ids['fail']} FAILED: ".encode()
        _wait(lambda: osc9 in tui.output(), 30, "the TUI's OSC 9 notification")
        assert tui.output().count(osc9) == 1
        tui.write(b"q")
        assert tui.wait(30) == 0
    finally:
        tui.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        asyncio.run(_stop(ray_cluster, ids.values()))


class PtyApp:
    """`python -m cockpit.cli ARGS` on a pseudo-terminal of 120x40 (no tmux between: its raw bytes are
    read as a terminal emulator would get them)."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        import fcntl
        import pty
        import struct
        import termios
        import threading

        self.parent, child = pty.openpty()
        fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        env = {k: v for k, v in env.items() if k not in ("COLUMNS", "LINES", "TMUX")}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "cockpit.cli", *args],
            stdin=child, stdout=child, stderr=child, env={**env, "TERM": "xterm-256color"},
            start_new_session=True,
        )  # fmt: skip
        os.close(child)
        self._bytes = bytearray()
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.parent, 65536)
            except OSError:  # EIO: the app ended and closed its side
                return
            if not data:
                return
            with self._lock:
                self._bytes += data

    def output(self) -> bytes:
        with self._lock:
            return bytes(self._bytes)

    def write(self, data: bytes) -> None:
        os.write(self.parent, data)

    def wait(self, timeout: float) -> int:
        return self.process.wait(timeout=timeout)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._reader.join(timeout=5)
        with contextlib.suppress(OSError):
            os.close(self.parent)


def _named(pids: list[int]) -> dict[int, str]:
    out = {}
    for pid in pids:
        try:
            out[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
        except OSError:
            out[pid] = "(gone)"
    return out


def _alive(pid: int) -> bool:
    found = process_table().get(pid)
    return found is not None and found[1] not in ("Z", "X")


def _wait(done, timeout: float, what: str, stderr: Path | None = None) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            said = stderr.read_text()[-2000:] if stderr is not None else ""
            raise AssertionError(f"waited {timeout:.0f} s for {what}; cockpit alerts said:\n{said}")
        time.sleep(0.3)


async def _submit(cluster: ClusterHandle) -> dict[str, str]:
    stamp = int(time.time())
    async with cluster.client() as client:
        return {
            name: await client.submit_job(
                {"entrypoint": f"python -u -c {_quote(code)}", "submission_id": f"alerts-{name}-{stamp}"}
            )
            for name, code in (("fail", FAIL), ("nan", NAN), ("hang", HANG))
        }


async def _stop(cluster: ClusterHandle, ids) -> None:  # type: ignore[no-untyped-def]
    async with cluster.client() as client:
        for job_id in ids:
            with contextlib.suppress(CockpitError):  # ended already
                await client.stop_job(job_id)


def _quote(code: str) -> str:
    import shlex

    return shlex.quote(code)
