"""A real Ray head started with `--include-dashboard=false`, reached over a real sshd on 127.0.0.1: the
join gate and `cockpit status` show its nodes and join progress from the head's own Ray; the commands
that need the dashboard say so in one line (exit 1); nothing the cockpit ran stays on the head.

The head uses token auth and the cockpit is given no token: the program on the head takes the cluster's
token from the environment of Ray's own process there, and it never travels.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cockpit.core.connect.without_dashboard import sentence
from tests.harness.headless import GPUS_PER_NODE, HeadlessHead, none_left_on_head
from tests.harness.run import run_cockpit

pytestmark = [pytest.mark.ssh, pytest.mark.cluster]


def over_ssh(head: HeadlessHead, config: Path) -> list[str]:
    return ["head-node", "--ssh-config", str(config), "--dashboard-port", str(head.dashboard_port)]


@pytest.mark.parametrize(
    "command",
    [["jobs"], ["actors"], ["logs", "raysubmit_x"], ["stop", "raysubmit_x"]],
    ids=lambda c: c[0],
)
def test_what_needs_the_dashboard_says_why_in_one_line(
    command: list[str], headless_head: HeadlessHead, headless_ssh_config: Path
) -> None:
    target, *flags = over_ssh(headless_head, headless_ssh_config)
    done = run_cockpit(command[0], target, *command[1:], *flags)
    assert done.returncode == 1
    assert done.stderr == f"cockpit: {sentence('head-node')}\n"
    none_left_on_head()


# Last in the file: the node joining the head meanwhile (started with it) is what `cockpit wait` waits for.
def test_wait_then_status_show_the_nodes_and_say_why_once(
    headless_head: HeadlessHead, headless_ssh_config: Path
) -> None:
    target = over_ssh(headless_head, headless_ssh_config)
    gpus = 2 * GPUS_PER_NODE
    waited = run_cockpit("wait", *target, "--nodes", "2", "--gpus", str(gpus), "--timeout", "120")
    assert waited.returncode == 0, waited.stderr
    assert waited.stdout.startswith("ready: 2/2 nodes, 4/4 GPUs") and "Traceback" not in waited.stderr

    shown = run_cockpit("status", *target)
    assert shown.returncode == 0, shown.stderr
    assert shown.stderr == f"cockpit: note: {sentence('head-node')}\n"  # one line, nothing else
    lines = shown.stdout.splitlines()
    assert lines[0] == "head-node  no dashboard: nodes from the head's Ray over SSH"
    assert lines[1].startswith("2 nodes")
    table = [line for line in lines if " ALIVE " in line]
    assert len(table) == 2 and sum("*" in line.split()[0] for line in table) == 1  # the head marked

    as_json = run_cockpit("status", *target, "--json")
    assert as_json.returncode == 0, as_json.stderr
    doc = json.loads(as_json.stdout)
    assert doc["dashboard"] is None and doc["without_dashboard"] == sentence("head-node")
    assert doc["alive_nodes"] == 2 and doc["gpus"] == gpus and doc["jobs"] is None
    assert sorted(n["is_head"] for n in doc["nodes"]) == [False, True]
    assert all(n["state"] == "ALIVE" and n["gpus"] == GPUS_PER_NODE for n in doc["nodes"])
    none_left_on_head()
