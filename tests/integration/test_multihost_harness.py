"""The multi-host harness itself (tests/harness/multihost.py): whatever way its process ends (SIGTERM while
Ray starts, SIGTERM or Ctrl-C once up, SIGKILL and the next run's cleanup) it leaves no namespace, no link
and no process behind; its faults do what they say on the shared cluster, which is whole again after."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.harness import netns
from tests.harness.multihost import SSH_PORT, MultiHost, NetemUnavailable, leftovers

pytestmark = [pytest.mark.multihost]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def can_make_namespaces() -> None:
    reason = netns.unavailable()
    if reason is not None:
        pytest.skip(reason)


def _others() -> tuple[set[str], set[str]]:
    """The namespaces and links of the machine that no harness run made (runs of other sessions may come
    and go meanwhile: they all carry the prefix)."""
    return (
        {n for n in netns.namespaces() if not n.startswith(netns.PREFIX)},
        {n for n in netns.links() if not n.startswith(netns.PREFIX)},
    )


def _spawn(root: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.harness.multihost", str(root), *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def _line(process: subprocess.Popen[str], timeout: float = 120.0) -> str:
    """The next line the harness prints (bounded wait; its stderr if it ended instead)."""
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            process.kill()
            raise AssertionError(f"the harness printed nothing within {timeout:.0f} s")
    line = process.stdout.readline()
    if not line:
        raise AssertionError(
            f"the harness ended ({process.wait()}): {process.stderr.read() if process.stderr else ''}"
        )
    return line


def _ended_clean(process: subprocess.Popen[str], prefix: str, before: tuple[set[str], set[str]]) -> None:
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:  # it did not end: end it, and what it made, then fail
        process.kill()
        process.wait()
        netns.remove_stale()
        raise AssertionError("the harness did not end within 60 s of the signal") from None
    assert leftovers(prefix) == []
    assert _others() == before


@pytest.mark.usefixtures("can_make_namespaces")
def test_sigterm_while_ray_starts_leaves_nothing(tmp_path: Path) -> None:
    before = _others()
    process = _spawn(tmp_path / "mh", "--workers", "1")
    prefix = _line(process).split()[1]
    # Wait until the head's Ray processes run (daemons of their own, not the harness's children).
    deadline = time.monotonic() + 120
    while not any(name in item for item in leftovers(prefix) for name in ("gcs_server", "raylet")):
        assert process.poll() is None and time.monotonic() < deadline, "Ray never started on the head"
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    _ended_clean(process, prefix, before)
    assert process.returncode == -signal.SIGTERM


@pytest.mark.usefixtures("can_make_namespaces")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_started_harness_ended_by_a_signal_leaves_nothing(tmp_path: Path, signum: int) -> None:
    before = _others()
    process = _spawn(tmp_path / "mh", "--no-ray")
    prefix = _line(process).split()[1]
    ready = json.loads(_line(process))
    assert ready["ready"] == prefix and len(ready["hosts"]) == 5
    assert all(host["pids"] for host in ready["hosts"].values())  # each host runs its sshd
    process.send_signal(signum)
    _ended_clean(process, prefix, before)


@pytest.mark.usefixtures("can_make_namespaces")
def test_a_run_killed_with_sigkill_is_removed_by_the_next(tmp_path: Path) -> None:
    before = _others()
    process = _spawn(tmp_path / "mh", "--no-ray", "--workers", "1")
    prefix = _line(process).split()[1]
    _line(process)
    process.kill()
    process.wait()
    assert leftovers(prefix), "a SIGKILLed run leaves its namespaces (nothing ran to remove them)"
    assert prefix in netns.remove_stale()
    assert leftovers(prefix) == [] and _others() == before


def test_the_faults_cut_a_link_stop_sshd_and_change_a_host_key(multihost: MultiHost) -> None:
    """Each fault seen from the head (by TCP and by SSH's own handshake), then undone."""
    cluster = multihost
    worker = cluster.workers[-1]

    def reaches() -> bool:
        try:
            cluster.connect(cluster.head, worker.ip, SSH_PORT, timeout=1.0).close()
        except OSError:
            return False
        return True

    def reached(within: float = 10.0) -> bool:  # a connect timed out on a busy machine is tried again
        deadline = time.monotonic() + within
        while not reaches():
            if time.monotonic() > deadline:
                return False
        return True

    assert reached()
    with cluster.link_cut(worker):
        assert not reaches()
    assert reached()
    cluster.stop_sshd(worker)
    assert not reaches() and worker.sshd is None
    cluster.start_sshd(worker)
    assert reached()
    old = worker.host_public_key
    new = cluster.change_host_key(worker)
    try:
        assert new != old and old in cluster.known_hosts.read_text()
        scan = cluster.run(cluster.head, "ssh-keyscan", "-t", "ed25519", worker.ip).stdout
        assert new.split()[1] in scan
    finally:
        cluster.trust_host_keys()
    assert new in cluster.known_hosts.read_text() and old not in cluster.known_hosts.read_text()
    if not cluster.netem_available:
        with pytest.raises(NetemUnavailable):
            cluster.slow_link(worker, delay_ms=200, loss_percent=1)
    if cluster.loss_available:  # every packet of the worker's dropped: nothing reaches it, then all does
        cluster.drop_packets(worker, 100.0)
        try:
            assert not reaches()
            assert cluster.dropped(worker) > 0
        finally:
            cluster.clear_drops(worker)
        assert reached() and cluster.dropped(worker) == 0
