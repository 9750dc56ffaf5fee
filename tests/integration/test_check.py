"""`cockpit check` on the real local cluster: green where it is healthy (locally, over a real sshd), and
each broken piece one failed line with its fix: a wrong token, an unknown host key (never accepted
silently; --accept-new records it), a program the kernel refuses ptrace to (a real refusal: py-spy
without CAP_SYS_PTRACE against Ray's processes, which hold more capabilities)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import asyncssh
import pytest

from cockpit.core.check.node_program import node_program, parse_facts
from cockpit.core.check.verdicts import MachineRun, machine_findings
from cockpit.core.connect.programs import LocalProgram
from tests.harness.cluster import GPUS_PER_NODE, NODES, ClusterHandle
from tests.harness.run import run_cockpit
from tests.harness.sshd import SshServer, start_sshd

pytestmark = [pytest.mark.cluster]

MACHINE_CHECKS = ["python", "py-spy", "ptrace", "debugpy", "gpus", "clock"]
RAY_GPUS = NODES * GPUS_PER_NODE
"""The session cluster's GPUs: logical (ray start --num-gpus), on one machine."""


def by_check(doc: dict) -> dict[str, list[dict[str, str]]]:
    out: dict[str, list[dict[str, str]]] = {}
    for c in doc["checks"]:
        out.setdefault(c["check"], []).append(c)
    return out


def _assert_machine_green(doc: dict) -> None:
    found = by_check(doc)
    for name in MACHINE_CHECKS:
        assert len(found[name]) == 1, found.get(name)  # the local cluster's 3 raylets are one machine
    assert found["python"][0]["status"] == "pass"
    assert found["py-spy"][0]["status"] == "pass"
    ptrace = found["ptrace"][0]
    # A real attach, to one of this cluster's own Ray processes.
    assert ptrace["status"] == "pass" and "py-spy attached to Ray's" in ptrace["detail"], ptrace
    assert found["debugpy"][0]["status"] == "pass"
    # The session cluster's GPUs are logical: Ray schedules them, no vendor library sees one.
    gpus = found["gpus"][0]
    assert gpus["status"] == "warn", gpus
    assert f"Ray schedules {RAY_GPUS} GPUs but neither NVML nor amdsmi" in gpus["detail"]
    assert found["clock"][0]["status"] == "pass"


def test_the_local_cluster_is_green(ray_cluster: ClusterHandle) -> None:
    done = run_cockpit("check", "local", "--json")
    assert done.returncode == 0, done.stderr + done.stdout
    doc = json.loads(done.stdout)
    assert doc["ok"] is True and doc["counts"]["fail"] == 0, doc
    found = by_check(doc)
    assert found["token"][0]["status"] == "pass" and "accepts the token" in found["token"][0]["detail"]
    assert found["dashboard"][0]["detail"].startswith("Ray 2.") and found["dashboard"][0]["status"] == "pass"
    assert found["job fields"][0]["status"] == "pass"
    assert "ssh" not in found and "ssh from head" not in found
    _assert_machine_green(doc)

    text = run_cockpit("check", "local")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert len(lines) == len(doc["checks"])
    assert all(line.split()[0] in ("PASS", "WARN") for line in lines), lines
    gpus = next(line for line in lines if "  gpus  " in line)
    assert gpus.startswith("WARN ") and " — fix: " in gpus
    assert text.stderr.startswith("everything checked works: ")


def test_a_wrong_token_is_one_failed_line_with_its_fix(ray_cluster: ClusterHandle, tmp_path: Path) -> None:
    wrong = tmp_path / "token"
    wrong.write_text("not-the-token\n")
    done = run_cockpit("check", ray_cluster.url, "--token-file", str(wrong))
    assert done.returncode == 1, done.stderr + done.stdout
    failed = [line for line in done.stdout.splitlines() if line.startswith("FAIL")]
    assert len(failed) == 1, done.stdout
    assert re.search(r" token +the dashboard rejected the token — fix: check --token-file", failed[0])
    assert ray_cluster.url in failed[0]
    assert done.stderr.startswith("some checks failed: ")
    skipped = [line for line in done.stdout.splitlines() if line.startswith("SKIP")]
    assert any("dashboard" in line for line in skipped) and any("nodes" in line for line in skipped)

    right = run_cockpit("check", ray_cluster.url, "--token-file", str(ray_cluster.token_file), "--json")
    assert right.returncode == 0, right.stderr
    nodes = by_check(json.loads(right.stdout))["nodes"][0]
    # An http:// target has no way onto the machines, and says so.
    assert nodes["status"] == "skip" and "give the head's SSH host as TARGET" in nodes["detail"]


@pytest.fixture(scope="module")
def head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    server = start_sshd(tmp_path_factory.mktemp("check-sshd"))
    try:
        yield server
    finally:
        server.stop()


def _over_ssh(ray_cluster: ClusterHandle, config: Path, *more: str) -> list[str]:
    port = str(ray_cluster.cluster.dashboard_port)
    return [
        "--ssh-config",
        str(config),
        "--dashboard-port",
        port,
        "--token-file",
        str(ray_cluster.token_file),
        *more,
    ]


@pytest.mark.ssh
def test_over_ssh_green_and_an_unknown_host_key_never_accepted_silently(
    ray_cluster: ClusterHandle, head: SshServer, tmp_path: Path
) -> None:
    config = tmp_path / "ssh_config"
    config.write_text(head.ssh_config_entry("head-node"))
    done = run_cockpit("check", "head-node", *_over_ssh(ray_cluster, config, "--json"))
    assert done.returncode == 0, done.stderr + done.stdout
    doc = json.loads(done.stdout)
    found = by_check(doc)
    assert found["host key"][0]["status"] == "pass" and found["ssh"][0]["status"] == "pass"
    assert found["token"][0]["status"] == "pass"
    _assert_machine_green(doc)  # the node program ran in the head's SSH session

    # The same server, with a known_hosts that does not know it.
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    unknown = tmp_path / "unknown_config"
    unknown.write_text(head.ssh_config_entry("head-node").replace(str(head.known_hosts), str(empty)))
    refused = run_cockpit("check", "head-node", *_over_ssh(ray_cluster, unknown))
    assert refused.returncode == 1, refused.stderr + refused.stdout
    fingerprint = asyncssh.import_public_key(head.host_public_key).get_fingerprint("sha256")
    (line,) = [ln for ln in refused.stdout.splitlines() if ln.startswith("FAIL")]
    assert "host key" in line and fingerprint in line and f"--accept-new to add it to {empty}" in line
    assert empty.read_text() == ""  # never accepted silently
    assert all(ln.startswith(("FAIL", "SKIP")) for ln in refused.stdout.splitlines())

    accepted = run_cockpit("check", "head-node", *_over_ssh(ray_cluster, unknown, "--accept-new", "--json"))
    assert accepted.returncode == 0, accepted.stderr + accepted.stdout
    assert head.host_public_key.split()[1] in empty.read_text()


def test_a_real_ptrace_refusal_is_one_failed_line(ray_cluster: ClusterHandle, tmp_path: Path) -> None:
    """The node program under a Python without CAP_SYS_PTRACE (its bounding set dropped with setpriv):
    the kernel refuses py-spy on Ray's processes, which hold every capability. The line names the fix."""
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("needs root and setpriv (util-linux) to drop CAP_SYS_PTRACE")
    python = tmp_path / "python-without-ptrace"
    python.write_text(f'#!/bin/sh\nexec {setpriv} --bounding-set -sys_ptrace {sys.executable} "$@"\n')
    python.chmod(0o755)

    async def run() -> MachineRun:
        async with ray_cluster.client() as client:
            session = (await client.cluster_info()).session_name
        program = await LocalProgram.start(node_program(session), str(python))
        lines = [line async for line in program.lines()]
        facts = parse_facts(lines[-1])
        assert facts is not None, lines
        return MachineRun("here", "local", 6.0, facts=facts)

    run_ = asyncio.run(run())
    assert run_.facts is not None and run_.facts.cap_sys_ptrace is False
    ptrace = next(f for f in machine_findings(run_) if f.check == "ptrace")
    assert ptrace.status == "fail", ptrace
    assert "Permission denied" in ptrace.detail and "CAP_SYS_PTRACE" in ptrace.fix
