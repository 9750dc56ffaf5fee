"""Provides real Ray heads of the versions the cockpit supports: a virtualenv per version, created once
and cached between runs (`$COCKPIT_RAY_VENVS`, default `~/.cache/ray-cockpit/ray-venvs`), and a head
started from it with `ray start --head --block` in a session of its own, so stopping it kills exactly its
processes (never `ray stop`, which would stop every Ray on the machine, the test session's included).
The cockpit's own Ray (`NEWEST`) needs no virtualenv of its own: its head runs from the cockpit's.

`MATRIX` is the tested matrix. `build_in_background` builds the missing virtualenvs while other tests
run (a fresh machine has none: about 20 s of `pip install` each here); `ray_venv` waits for a build
under way instead of starting a second.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import version as installed_version
from pathlib import Path

from cockpit.core.cluster.versions import TESTED
from tests.harness.sshd import find_free_port

VENVS = Path(os.environ.get("COCKPIT_RAY_VENVS", Path.home() / ".cache" / "ray-cockpit" / "ray-venvs"))


NEWEST = installed_version("ray")
"""The cockpit's own Ray: the newest of the matrix."""
OLD = TESTED[:-1]
"""The older versions of the matrix, from the cockpit's own list (`versions.TESTED`, whose last is the
newest): 2.43.0, the oldest supported (what NeMo RL pins), 2.44.1 for its log framing (a leading `1` on
every streamed chunk unless asked for text), 2.47.1 in the middle (verl's pins)."""
OLDEST = OLD[0]
MATRIX = (*OLD, NEWEST)
"""Every version the contract suite runs against."""

_builds: dict[str, threading.Lock] = {}
_builds_lock = threading.Lock()


def _lock(version: str) -> threading.Lock:
    with _builds_lock:
        return _builds.setdefault(version, threading.Lock())


def ray_venv(version: str) -> Path:
    """The virtualenv holding `ray[default]==VERSION` (created on first use: a minute or two at most).

    The cockpit's own Ray is its own virtualenv. Another is built in place (a venv's scripts name their
    interpreter by path, so it cannot be moved) and marked complete only when pip succeeded: a build
    that was cut short is built again.
    """
    if version == NEWEST:
        return Path(sys.prefix)
    venv = VENVS / f"ray-{version}"
    done = venv / ".cockpit-complete"
    packages = [f"ray[default]=={version}", "debugpy>=1.8"]
    with _lock(version):
        if done.exists() and done.read_text() == " ".join(packages):
            return venv
        shutil.rmtree(venv, ignore_errors=True)
        VENVS.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
        # debugpy: for the post-mortem debugger on that version (the workers need it, as the cockpit's do).
        pip = [str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", *packages]
        built = subprocess.run(pip, capture_output=True, text=True, timeout=1200)
        if built.returncode != 0:
            raise AssertionError(f"pip install {' '.join(packages)} failed: {built.stderr[-2000:]}")
        done.write_text(" ".join(packages))
        return venv


def build_in_background(versions: Iterable[str]) -> threading.Thread:
    """Build the virtualenvs of VERSIONS one after another in a daemon thread (a failure is left for
    `ray_venv` to raise again when a test asks for that version)."""

    def build() -> None:
        for version in versions:
            with contextlib.suppress(Exception):
                ray_venv(version)

    thread = threading.Thread(target=build, name="ray-venvs", daemon=True)
    thread.start()
    return thread


@dataclass
class OldHead:
    version: str
    url: str
    temp_dir: Path
    venv: Path

    @property
    def logs(self) -> Path:
        return self.temp_dir / "session_latest" / "logs"


def _answers(url: str) -> bool:
    """The dashboard answers, and so does the head's agent (log reads fail with "Agent for node id ...
    doesn't exist" for a few seconds after the dashboard is up)."""
    try:
        with urllib.request.urlopen(f"{url}/api/v0/nodes", timeout=2) as answer:
            nodes = json.load(answer)["data"]["result"]["result"]
        node = nodes[0]["node_id"]
        with urllib.request.urlopen(f"{url}/api/v0/logs?node_id={node}", timeout=2) as answer:
            return bool(answer.status == 200)
    except (OSError, ValueError, LookupError, TypeError):
        return False


def _processes_under(temp_dir: Path) -> list[int]:
    """Pids whose command line names TEMP_DIR (the head's processes, wherever they were reparented)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if str(temp_dir).encode() in command:
            found.append(int(entry.name))
    return found


START_TRIES = 3
"""Starts of an old head before giving up. A head that ended during its start is started again with
fresh ports: a port found free can be taken by the other pytest process's clusters before Ray binds it,
and `ray start --block` then ends with 1 (seen twice in whole runs, on 2.47.1)."""


@contextmanager
def old_head(version: str) -> Iterator[OldHead]:
    """A one-node Ray VERSION head on 127.0.0.1 (2 CPUs, no GPU, no token auth), stopped with all its
    processes on exit.

    Its job entrypoints find that version's `python` first on PATH.
    """
    venv = ray_venv(version)
    env = {
        **os.environ,
        "PATH": f"{venv / 'bin'}:{os.environ.get('PATH', '')}",
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    for name in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        env.pop(name, None)
    env["RAY_AUTH_MODE"] = "disabled"  # the newest would take a token from this shell; the older know none
    failures: list[str] = []
    for _try in range(START_TRIES):
        temp_dir = Path(tempfile.mkdtemp(prefix="rcv-", dir="/tmp"))  # short: Ray's socket paths have a limit
        dashboard = find_free_port()
        command = [
            str(venv / "bin" / "ray"),
            "start",
            "--head",
            "--block",
            f"--temp-dir={temp_dir}",
            f"--port={find_free_port()}",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={dashboard}",
            f"--dashboard-agent-listen-port={find_free_port()}",
            "--num-cpus=2",
            "--num-gpus=0",
            "--include-dashboard=true",
            "--disable-usage-stats",
        ]
        log = (temp_dir / "start.log").open("wb")
        process = subprocess.Popen(
            command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        url = f"http://127.0.0.1:{dashboard}"
        try:
            # A bound only: 20-45 s here, but a whole run's load once kept a 2.47.1 head from answering
            # within 120 s while its dashboard was still loading its modules.
            deadline = time.monotonic() + 300
            while not _answers(url):
                if process.poll() is not None:
                    failures.append(f"ended ({process.returncode}): {_why_ended(temp_dir)}")
                    break
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"Ray {version} head did not answer in 300 s: "
                        f"{(temp_dir / 'start.log').read_text()[-2000:]}"
                    )
                time.sleep(0.5)
            else:
                yield OldHead(version=version, url=url, temp_dir=temp_dir, venv=venv)
                return
        finally:
            _stop_head(process, temp_dir)
            log.close()
            shutil.rmtree(temp_dir, ignore_errors=True)
    raise AssertionError(
        f"Ray {version} head did not come up in {START_TRIES} starts: " + " | ".join(failures)
    )


def _why_ended(temp_dir: Path) -> str:
    """The last lines of what the head's processes said when it ended: `ray start`'s own output, then
    the error files of Ray's processes (a port already taken shows there)."""
    said = [(temp_dir / "start.log").read_text(errors="replace")[-1000:]]
    for err in sorted(temp_dir.glob("session_*/logs/*.err")):
        text = err.read_text(errors="replace").strip()
        if text:
            said.append(f"{err.name}: {text[-500:]}")
    return " ... ".join(said)[-3000:]


def _stop_head(process: subprocess.Popen[bytes], temp_dir: Path) -> None:
    """Every process of a test head, at once: it holds nothing worth a graceful stop (5 s, then SIGKILL;
    the newest's `ray start --block` takes over 20 s to stop its children on SIGTERM)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)
    for pid in [*_processes_under(temp_dir), process.pid]:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    process.wait()
