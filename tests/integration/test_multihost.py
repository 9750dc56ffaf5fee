"""The paths that differ per machine, on a real multi-host cluster (tests/harness/multihost.py: a jump
host, a head and three worker hosts, each a network namespace with its own IP, host name, sshd and Ray
node): the cockpit reaches the head through the jump host, sees each node's own IP and host name, reaches
each worker host over SSH through the head by that host's own address (one session per host) for stacks
and GPU agents, and reads an actor's log from its worker host's own log directory. The login side reaches
nothing but the jump host's and the head's sshd."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable

import pytest

from cockpit.core.targets import parse_target
from tests.harness.gpus import gpu_present
from tests.harness.multihost import DASHBOARD_PORT, GCS_PORT, SSH_PORT, MultiHost
from tests.harness.multihost_job import GREETING
from tests.harness.run import run_cockpit, until

pytestmark = [pytest.mark.multihost]


def _reaches(connect: Callable[[], socket.socket]) -> bool:
    try:
        connect().close()
    except OSError:
        return False
    return True


def test_the_login_side_reaches_only_the_jump_hosts_and_the_heads_sshd(multihost: MultiHost) -> None:
    cluster = multihost
    head, worker = cluster.head, cluster.workers[0]
    assert _reaches(lambda: cluster.connect(None, cluster.jump.ip, SSH_PORT))
    assert _reaches(lambda: cluster.connect(None, head.ip, SSH_PORT))
    # The same ports answer a host of the cluster (so they listen), never the login side.
    for port in (DASHBOARD_PORT, GCS_PORT):
        assert _reaches(lambda port=port: cluster.connect(worker, head.ip, port))
        assert not _reaches(lambda port=port: cluster.connect(None, head.ip, port, timeout=1.0))
    assert _reaches(lambda: cluster.connect(head, worker.ip, SSH_PORT))
    assert not _reaches(lambda: cluster.connect(None, worker.ip, SSH_PORT, timeout=1.0))


def test_status_through_the_jump_host_shows_each_node_with_its_own_ip_and_host_name(
    multihost: MultiHost,
) -> None:
    cluster = multihost
    jump_logins, head_logins = len(cluster.logins(cluster.jump)), len(cluster.logins(cluster.head))
    done = run_cockpit("status", cluster.target, *cluster.cli_args(), "--json")
    assert done.returncode == 0, done.stderr
    nodes = {n["ip"]: n for n in json.loads(done.stdout)["nodes"] if n["state"] == "ALIVE"}
    assert set(nodes) == {h.ip for h in cluster.ray_hosts}
    for host in cluster.ray_hosts:
        assert nodes[host.ip]["hostname"] == host.hostname
        assert nodes[host.ip]["is_head"] == host.is_head
    # One login to the jump host from the login side, one to the head from the jump host.
    assert cluster.logins(cluster.jump)[jump_logins:] == [cluster.login_ip]
    assert cluster.logins(cluster.head)[head_logins:] == [cluster.jump.ip]


def test_stacks_reach_each_worker_host_through_the_head_by_its_own_address(
    multihost: MultiHost, multihost_job: str
) -> None:
    cluster = multihost
    before = {w.name: len(cluster.logins(w)) for w in cluster.workers}
    head_before = len(cluster.logins(cluster.head))
    done = run_cockpit(
        "stacks", cluster.target, *cluster.cli_args(), "--job", multihost_job, "--via", "ssh", "--json"
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["source"] == "ssh" and not doc["failures"] and not doc["missing_nodes"], doc
    spinning = [g for g in doc["groups"] if "spin_on_worker_host" in json.dumps(g["threads"])]
    assert len(spinning) == 1, [g["label"] for g in doc["groups"]]
    members = spinning[0]["members"]
    assert sorted((m["node_ip"], m["hostname"]) for m in members) == sorted(
        (w.ip, w.hostname) for w in cluster.workers
    )
    # Exactly one SSH session per worker host, each opened from the head's address to the worker's own.
    for worker in cluster.workers:
        assert cluster.logins(worker)[before[worker.name] :] == [cluster.head.ip], worker.name
    # The driver's stack on the head comes through the cockpit's own connection there (from the jump host).
    assert any(
        m["kind"] == "driver" and m["node_ip"] == cluster.head.ip for g in doc["groups"] for m in g["members"]
    )
    assert cluster.logins(cluster.head)[head_before:] == [cluster.jump.ip]


def test_an_actors_log_is_read_from_its_worker_hosts_own_log_directory(
    multihost: MultiHost, multihost_job: str
) -> None:
    cluster = multihost
    worker = cluster.workers[1]
    rows = cluster.dashboard(
        "/api/v0/actors?detail=true&limit=100&filter_keys=class_name&filter_predicates=%3D"
        "&filter_values=HostActor"
    )["data"]["result"]["result"]
    ips = {n["node_id"]: n["node_ip"] for n in cluster.alive_nodes()}
    actor = next(r for r in rows if ips.get(r["node_id"]) == worker.ip)
    line = f"{GREETING} {worker.hostname} {worker.ip}"
    done = run_cockpit("logs", cluster.target, *cluster.cli_args(), "--actor", actor["actor_id"])
    assert done.returncode == 0, done.stderr
    assert line in done.stdout.splitlines()
    # The line is in that worker's own log directory, and in no other host's.
    holders = [
        h.name
        for h in cluster.ray_hosts
        if any(line in p.read_text(errors="replace") for p in h.ray_logs.glob("worker-*.out"))
    ]
    assert holders == [worker.name]


@pytest.mark.skipif(gpu_present(), reason="this machine has a GPU: the agents start instead of failing")
async def test_gpu_agents_run_once_per_worker_host_through_the_head(multihost: MultiHost) -> None:
    """High-resolution mode starts one agent per host with GPUs (the workers' logical GPU each; the head
    has none) over SSH through the head by the host's own address; here each finds no GPU and says so."""
    from cockpit.ui.app import CockpitApp

    def notice(app: CockpitApp) -> str:
        return str(app.screen.query_one("#gpu-notice").render())

    cluster = multihost
    before = {w.name: len(cluster.logins(w)) for w in cluster.workers}
    head_before = len(cluster.logins(cluster.head))
    app = CockpitApp(parse_target(cluster.target), cluster.connect_options())
    async with app.run_test(size=(140, 30)) as pilot:
        await pilot.press("2")
        await until(pilot, lambda: app.state.gpu_fleet is not None and len(app.state.gpu_fleet.rows) >= 3, 60)
        await pilot.press("h")
        await until(pilot, lambda: "high-resolution mode off" in notice(app), timeout=60)
        shown = notice(app)
    assert "no NVIDIA or AMD GPU found" in shown and "(and 2 more)" in shown, shown
    assert any(f"{w.hostname} [{w.ip}]" in shown for w in cluster.workers), shown
    for worker in cluster.workers:
        assert cluster.logins(worker)[before[worker.name] :] == [cluster.head.ip], worker.name
    # The app's own connection to the head is the only login there (the agents ride on it).
    assert cluster.logins(cluster.head)[head_before:] == [cluster.jump.ip]
