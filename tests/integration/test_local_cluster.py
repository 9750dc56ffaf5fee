"""`cockpit local up | status | down` on a cluster of its own (the session cluster stays untouched)."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from cockpit.core.connect.connection import open_connection
from cockpit.core.errors import CockpitError
from cockpit.core.local import ownership, processes, record
from cockpit.core.local.record import LocalClusterError
from cockpit.core.targets import parse_target
from tests.harness.cluster import cluster_processes, process_names, processes_named
from tests.harness.loop_io import opened_on_main_thread
from tests.harness.run import run_cockpit

pytestmark = pytest.mark.cluster


def cockpit(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_cockpit(*args, env=env, timeout=180)


def test_up_status_down_leaves_no_ray_process(tmp_path: Path, ray_cluster: object) -> None:
    env = {**os.environ, "COCKPIT_STATE_DIR": str(tmp_path)}
    up = cockpit("local", "up", "--nodes", "2", "--gpus-per-node", "1", "--cpus-per-node", "1", env=env)
    assert up.returncode == 0, up.stderr
    assert "2/2 nodes alive" in up.stderr
    cluster = record.load(tmp_path)
    assert cluster is not None
    try:
        before = process_names(cluster_processes(cluster))
        names = set(before.values())
        # Daemons, and the Python agents that overwrite their environment with their title.
        assert {"raylet", "gcs_server"} <= names and any(n.startswith("ray::Dashboard") for n in names), names
        assert (tmp_path / "token").stat().st_mode & 0o777 == 0o600
        status = cockpit("local", "status", env=env)
        assert status.returncode == 0, status.stderr
        assert f"http://127.0.0.1:{cluster.dashboard_port}" in status.stdout
        assert status.stdout.count("ALIVE") == 2

        again = cockpit("local", "up", env=env)
        assert again.returncode == 1
        assert (
            again.stderr.startswith("cockpit: a local cluster is already running")
            and again.stderr.count("\n") == 1
        )

        as_json = cockpit("status", "local", "--json", env=env)
        doc = json.loads(as_json.stdout)
        assert doc["alive_nodes"] == 2 and doc["gpus"] == 2
    finally:
        down = cockpit("local", "down", env=env)
    assert down.returncode == 0 and "stopped" in down.stdout
    # Checked by the pids seen before `down`, not by the same lookup `down` uses.
    assert process_names(list(before)) == {}
    assert record.load(tmp_path) is None
    assert not Path(cluster.root).exists()
    # The session cluster was not touched by that `down`.
    assert cluster_processes(ray_cluster.cluster)  # type: ignore[attr-defined]
    assert processes_named("raylet", "gcs_server")  # the session cluster's, still running


def test_status_without_cluster_is_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "COCKPIT_STATE_DIR": str(tmp_path)}
    result = cockpit("status", "local", env=env)
    assert result.returncode == 1
    assert result.stderr == "cockpit: no local cluster is running: start one with `cockpit local up`.\n"
    status = cockpit("local", "status", env=env)
    assert status.returncode == 1 and status.stdout == "" and "no local cluster" in status.stderr


def test_kill_node_requires_a_cluster(tmp_path: Path) -> None:
    with pytest.raises(LocalClusterError, match="no local cluster"):
        processes.kill_node(1, directory=tmp_path)


def test_bad_shape_is_one_sentence(tmp_path: Path) -> None:
    """Refused by the command line (exit 2, argparse's usage and one error line), before anything starts;
    `processes.up` itself refuses the same for callers that are not the command line."""
    env = {**os.environ, "COCKPIT_STATE_DIR": str(tmp_path)}
    result = cockpit("local", "up", "--nodes", "1", "--cpus-per-node", "0", env=env)
    assert result.returncode == 2
    error = "cockpit local up: error: argument --cpus-per-node: 0 is not 1 or more"
    assert result.stderr.splitlines()[-1] == error
    with pytest.raises(LocalClusterError, match="--cpus-per-node 1 or more"):
        processes.up(1, 0, cpus_per_node=0, directory=tmp_path)


def test_local_uses_its_own_token_whatever_ray_auth_token_says(ray_cluster: object) -> None:
    """RAY_AUTH_TOKEN is for the user's remote cluster: `local` sends the local cluster's own token."""
    env = {**os.environ, "RAY_AUTH_TOKEN": "token-of-another-cluster"}
    result = cockpit("status", "local", "--json", env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["alive_nodes"] >= 1


class _Listener:
    """Something else on the port the record names (the cluster died and another program, perhaps
    another user's, took it): a real HTTP server that remembers what it was sent."""

    def __init__(self) -> None:
        seen = self.seen = []  # type: list[str]

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                seen.append(str(self.headers))
                body = b'{"ray_version": "2.60.0", "version": "4"}'
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def squatted(tmp_path: Path) -> Iterator[tuple[Path, _Listener]]:
    """A state directory recording a cluster (and its token) whose dashboard port a stranger holds."""
    listener = _Listener()
    state = tmp_path / "state"
    cluster = record.LocalCluster(
        root=str(tmp_path / "rc"),
        cluster_id="f" * 32,
        gcs_port=1,
        dashboard_port=listener.port,
        client_port=2,
        auth_token=True,
    )
    record.save(cluster, state)
    record.save_token("secret-of-the-local-cluster", state)
    try:
        yield state, listener
    finally:
        listener.close()


@pytest.mark.parametrize("target", ["local", "url"])
def test_the_local_token_goes_only_to_a_port_the_cluster_still_holds(
    squatted: tuple[Path, _Listener], target: str
) -> None:
    state, listener = squatted
    env = {**os.environ, "COCKPIT_STATE_DIR": str(state)}
    env.pop("RAY_AUTH_TOKEN", None)
    given = "local" if target == "local" else f"http://127.0.0.1:{listener.port}"
    result = cockpit("status", given, env=env)
    assert all("secret-of-the-local-cluster" not in headers for headers in listener.seen)
    if target == "local":
        assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
        assert f"127.0.0.1:{listener.port}" in result.stderr and "local cluster" in result.stderr


def _start_marked(script: str, cluster_id: str) -> subprocess.Popen[bytes]:
    """A process of the "cluster" (it carries its id, as every Ray process `local up` starts does)."""
    env = {**os.environ, "COCKPIT_CLUSTER_ID": cluster_id, "COCKPIT_NODE_INDEX": "0"}
    proc = subprocess.Popen(["bash", "-c", script], env=env)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not _children_of(proc.pid):  # its loop (and trap) is running
        time.sleep(0.05)
    return proc


def _children_of(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError), open(f"/proc/{entry}/stat") as fh:
                if int(fh.read().rsplit(") ", 1)[1].split()[1]) == pid:
                    found.append(int(entry))
    return found


def _record(state: Path, cluster_id: str, root: Path) -> None:
    record.save(
        record.LocalCluster(
            root=str(root), cluster_id=cluster_id, gcs_port=1, dashboard_port=2, client_port=3
        ),
        state,
    )


def test_down_signals_a_process_only_while_it_is_still_the_clusters(tmp_path: Path) -> None:
    """Between SIGTERM and SIGKILL a pid can change hands. Here the process stays but stops being the
    cluster's (it execs a program without the cluster's id, as a reused pid would be another program):
    `down` must not SIGKILL it."""
    cluster_id = uuid.uuid4().hex
    proc = _start_marked(
        "trap 'exec env -u COCKPIT_CLUSTER_ID sleep 60' TERM; while :; do sleep 0.05; done", cluster_id
    )
    try:
        _record(tmp_path / "state", cluster_id, tmp_path / "rc")
        assert processes.down(directory=tmp_path / "state", grace=2.0)
        assert proc.poll() is None, "down killed a process that was no longer the cluster's"
        with open(f"/proc/{proc.pid}/cmdline", "rb") as fh:
            assert fh.read().split(b"\0")[:2] == [b"sleep", b"60"]
    finally:
        proc.kill()
        proc.wait()


def test_down_still_ends_what_ignores_sigterm(tmp_path: Path) -> None:
    cluster_id = uuid.uuid4().hex
    proc = _start_marked("trap '' TERM; while :; do sleep 0.05; done", cluster_id)
    try:
        _record(tmp_path / "state", cluster_id, tmp_path / "rc")
        assert processes.down(directory=tmp_path / "state", grace=0.5)
        assert proc.wait(timeout=10) == -9
    finally:
        proc.kill()
        proc.wait()


def test_down_removes_only_a_directory_local_up_made(tmp_path: Path) -> None:
    """`root` comes from a state file: `down` must not remove whatever directory it names."""
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    _record(tmp_path / "state", uuid.uuid4().hex, precious)
    assert processes.down(directory=tmp_path / "state")
    assert (precious / "thesis.tex").read_text() == "years of work"
    # Named like one of ours, but a link to it:
    link = Path(tempfile.gettempdir()) / f"rc-{os.getuid()}-{uuid.uuid4().hex[:8]}"
    link.symlink_to(precious)
    try:
        _record(tmp_path / "state", uuid.uuid4().hex, link)
        assert processes.down(directory=tmp_path / "state")
        assert (precious / "thesis.tex").exists()
    finally:
        link.unlink()


def test_a_signal_never_reaches_a_process_that_took_a_members_pid() -> None:
    """What a reused pid looks like to `down`: the same number, another start time."""
    stranger = subprocess.Popen(["sleep", "60"])
    try:
        marks = ownership.needles(uuid.uuid4().hex)
        found_earlier = ownership.Member(stranger.pid, started="1", marked=False)
        assert not ownership.send(found_earlier, marks, signal.SIGKILL)
        assert stranger.poll() is None
        with open(f"/proc/{stranger.pid}/stat") as fh:
            started = fh.read().rsplit(") ", 1)[1].split()[19]
        assert ownership.send(ownership.Member(stranger.pid, started, marked=False), marks, signal.SIGKILL)
        assert stranger.wait(timeout=10) == -signal.SIGKILL
    finally:
        stranger.kill()
        stranger.wait()


async def test_the_port_check_scans_proc_off_the_event_loop(
    squatted: tuple[Path, _Listener], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check reads every process's environment: on a busy login node that is no job for the loop."""
    state, _listener = squatted
    monkeypatch.setenv("COCKPIT_STATE_DIR", str(state))
    with (
        opened_on_main_thread("/proc/", str(state)) as on_loop,
        pytest.raises(CockpitError, match="no longer holds"),
    ):
        async with open_connection(parse_target("local")):
            pass
    assert on_loop == []


@pytest.fixture
def made_roots(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The directories `up` makes for its clusters in this test (other tests, in other processes, make
    and remove their own in /tmp meanwhile: /tmp as a whole is no measure)."""
    made: list[Path] = []
    make = ownership.make_root

    def recorded() -> Path:
        made.append(make())
        return made[-1]

    monkeypatch.setattr(ownership, "make_root", recorded)
    return made


def test_an_interrupted_start_leaves_no_process_and_no_directory(
    tmp_path: Path, made_roots: list[Path]
) -> None:
    """Ctrl+C (or SIGTERM, which the command line turns into the same) while the nodes join: every
    process stopped, nothing recorded, and the cluster's directory in /tmp removed. It was kept, logs and
    stale sockets, for no error to name, and `cockpit local down` could no longer find it."""
    seen: list[processes.LocalCluster] = []

    def say(message: str) -> None:
        if message.startswith("joining"):  # the head is up, the second node started
            cluster = record.load(tmp_path)
            assert cluster is not None
            seen.append(cluster)
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        processes.up(2, 0, cpus_per_node=1, directory=tmp_path, progress=say)
    (cluster,) = seen
    assert cluster_processes(cluster) == []
    assert record.load(tmp_path) is None
    assert [str(root) for root in made_roots] == [cluster.root] and not Path(cluster.root).exists()


def test_a_start_stopped_before_any_node_leaves_no_directory(tmp_path: Path, made_roots: list[Path]) -> None:
    """Interrupted before Ray was started, or refused at once (a state directory open to others): the
    directory `up` had made for the cluster is not left behind, empty, in /tmp."""

    def say(message: str) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        processes.up(1, 0, directory=tmp_path, progress=say)
    assert len(made_roots) == 1 and not made_roots[0].exists() and record.load(tmp_path) is None
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    with pytest.raises(LocalClusterError, match="open to others"):
        processes.up(1, 0, directory=shared)
    assert len(made_roots) == 2 and not made_roots[1].exists()
