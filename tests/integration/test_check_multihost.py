"""`cockpit check` on the multi-host cluster (tests/harness/multihost.py): all green on the healthy
cluster, each worker host reached through the head by its own address; then one host broken per check,
for real, each one line naming that host and the fix, the other hosts unaffected:

- a worker's sshd stopped, another's host key changed (`ssh from head`);
- py-spy and debugpy gone for the SSH user on a worker (its sshd in a private mount namespace where
  py-spy's file is /dev/null and debugpy's directory is empty: Ray's own processes there are untouched);
- ptrace refused on a worker (its sshd without CAP_SYS_PTRACE in its bounding set, so the kernel refuses
  py-spy on Ray's processes, which hold every capability).

Not broken here, for want of a way to break them for one host alone: the clock (CLOCK_REALTIME is not
namespaced) and the GPUs (the harness's are logical): the unit tests give their rules constructed
readings."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tests.harness import netns
from tests.harness.multihost import SSH_PORT, Host, MultiHost
from tests.harness.run import run_cockpit
from tests.harness.sshd import ensure_openssh

pytestmark = [pytest.mark.multihost]


def _check(cluster: MultiHost) -> tuple[int, dict[str, dict[str, dict[str, str]]], str]:
    """`cockpit check` of the cluster: its exit code, the findings by host and check, its text."""
    done = run_cockpit("check", cluster.target, *cluster.cli_args(), "--json", timeout=180)
    doc = json.loads(done.stdout)
    by_host: dict[str, dict[str, dict[str, str]]] = {}
    for finding in doc["checks"]:
        by_host.setdefault(finding["host"], {})[finding["check"]] = finding
    return done.returncode, by_host, done.stderr


def _label(host: Host) -> str:
    return f"{host.hostname} [{host.ip}]"


@contextlib.contextmanager
def _sshd_under(cluster: MultiHost, host: Host, prefix: Sequence[str]) -> Iterator[None]:
    """HOST's sshd restarted under PREFIX (a command that ends by exec'ing the rest); its usual sshd back
    afterwards, on every way out."""
    cluster.stop_sshd(host)
    try:
        argv = [ensure_openssh(), "-D", "-e", "-E", str(host.sshd_log), "-f", str(host.root / "sshd_config")]
        host.sshd = cluster.popen(
            host, [*prefix, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 30
        while not netns.listening(host.sshd.pid, host.ip, SSH_PORT):
            assert host.sshd.poll() is None and time.monotonic() < deadline, host.sshd_log.read_text()[-2000:]
            time.sleep(0.02)
        yield
    finally:
        cluster.stop_sshd(host)
        cluster.start_sshd(host)


def _without_py_spy_and_debugpy(empty: Path) -> list[str]:
    """A private mount namespace where the venv's py-spy is /dev/null and debugpy's directory is EMPTY."""
    import sys

    py_spy = Path(sys.executable).parent / "py-spy"
    spec = importlib.util.find_spec("debugpy")
    assert spec is not None and spec.submodule_search_locations
    debugpy = next(iter(spec.submodule_search_locations))
    setup = f'mount --bind /dev/null {py_spy} && mount --bind {empty} {debugpy} && exec "$@"'
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", setup, "sh"]


WITHOUT_PTRACE = ["setpriv", "--bounding-set", "-sys_ptrace"]


def test_check_is_green_on_the_healthy_cluster(multihost: MultiHost) -> None:
    cluster = multihost
    code, by_host, stderr = _check(cluster)
    failed = [f for checks in by_host.values() for f in checks.values() if f["status"] == "fail"]
    assert code == 0 and not failed, failed or stderr
    for host in cluster.ray_hosts:
        checks = by_host[_label(host)]
        for name in ("python", "py-spy", "ptrace", "debugpy", "clock"):
            assert checks[name]["status"] == "pass", checks[name]
        assert ("ssh from head" in checks) == (not host.is_head)
        if not host.is_head:
            assert checks["ssh from head"]["status"] == "pass"
    # Each worker host was logged in to from the head's address (one session per host).
    for worker in cluster.workers:
        assert cluster.head.ip in cluster.logins(worker)


def test_one_broken_host_per_check_is_one_line_naming_it_and_the_fix(
    multihost: MultiHost, tmp_path: Path
) -> None:
    cluster = multihost
    no_sshd, no_tools, no_ptrace = cluster.workers[:3]
    cluster.stop_sshd(no_sshd)
    try:
        with (
            _sshd_under(cluster, no_tools, _without_py_spy_and_debugpy(tmp_path)),
            _sshd_under(cluster, no_ptrace, WITHOUT_PTRACE),
        ):
            code, by_host, _ = _check(cluster)
    finally:
        cluster.start_sshd(no_sshd)
    assert code == 1
    problems = {
        (host, name): f
        for host, checks in by_host.items()
        for name, f in checks.items()
        if f["status"] in ("fail", "warn")
    }
    expected = {
        (_label(no_sshd), "ssh from head"),
        (_label(no_tools), "py-spy"),
        (_label(no_tools), "debugpy"),
        (_label(no_ptrace), "ptrace"),
    }
    # The harness's GPUs are logical (Ray schedules one per worker, no vendor library sees it): a warning on
    # every worker, broken or not.
    gpus = {(_label(w), "gpus") for w in cluster.workers}
    assert set(problems) - gpus == expected, problems
    assert "sshd" in problems[(_label(no_sshd), "ssh from head")]["fix"]
    assert [f["status"] for n, f in by_host[_label(no_sshd)].items() if n != "ssh from head"] == ["skip"] * 6
    assert "pip install py-spy" in problems[(_label(no_tools), "py-spy")]["fix"]
    assert problems[(_label(no_tools), "debugpy")]["status"] == "warn"
    ptrace = problems[(_label(no_ptrace), "ptrace")]
    assert ptrace["status"] == "fail" and "Permission denied" in ptrace["detail"]
    assert "CAP_SYS_PTRACE" in ptrace["fix"]
    # The head is untouched by its workers' troubles.
    assert all(f["status"] == "pass" for f in by_host[_label(cluster.head)].values())


def test_a_changed_worker_host_key_is_refused_and_named(multihost: MultiHost) -> None:
    cluster = multihost
    worker = cluster.workers[0]
    cluster.change_host_key(worker)
    try:
        code, by_host, _ = _check(cluster)
    finally:
        cluster.trust_host_keys()
    assert code == 1
    line = by_host[_label(worker)]["ssh from head"]
    assert line["status"] == "fail" and "CHANGED" in line["detail"] and "ssh-keygen -R" in line["fix"]
    for other in cluster.workers[1:]:
        assert by_host[_label(other)]["ssh from head"]["status"] == "pass"
