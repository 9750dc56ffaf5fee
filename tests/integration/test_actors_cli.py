"""`cockpit actors` against the real session cluster: the demo's actors with roles and nodes, and
`--pending` naming placement groups and an actor that cannot be placed, with the numbers (exit 4)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.harness.cluster import ClusterHandle
from tests.harness.jobs import DEMO_ROLES, unplaceable_job
from tests.harness.run import run_cockpit as cockpit

pytestmark = pytest.mark.cluster


def test_every_demo_actor_is_listed_with_its_role_and_node(demo_job: str, ray_cluster: ClusterHandle) -> None:
    result = cockpit("actors", "local", "--json", "--state", "ALIVE")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    demo = [a for a in doc["actors"] if a["class_name"] in DEMO_ROLES]
    assert len(demo) >= 8  # 4 rollout workers and one of each other role
    for actor in demo:
        assert actor["role"] == DEMO_ROLES[actor["class_name"]]
        assert actor["host"] and actor["node_id"] and actor["state"] == "ALIVE"
        assert actor["started"] and actor["pid"]
    assert doc["complete"] and doc["by_state"].get("ALIVE", 0) >= len(demo)

    table = cockpit("actors", "local", "--role", "rollout")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split()[:5] == ["ID", "CLASS", "NAME", "ROLE", "STATE"]
    rollouts = [line for line in lines[1:-1] if "RolloutWorker" in line and " rollout " in line]
    assert len(rollouts) >= 4 and lines[-1].endswith("actors")


def test_a_user_role_table_names_the_roles(demo_job: str, tmp_path: Path) -> None:
    """`roles.yaml` (here through COCKPIT_ROLES) adds and overrides roles; a broken one is one line on
    stderr and the built-in roles still apply."""
    table = tmp_path / "roles.yaml"
    table.write_text('Critic: judge\n"Rollout*": sampler\n')
    result = cockpit(
        "actors", "local", "--json", "--job", demo_job, env={**os.environ, "COCKPIT_ROLES": str(table)}
    )
    assert result.returncode == 0, result.stderr
    roles = {a["class_name"]: a["role"] for a in json.loads(result.stdout)["actors"]}
    assert (
        roles["Critic"] == "judge"
        and roles["RolloutWorker"] == "sampler"
        and roles["PolicyTrainer"] == "policy"
    )
    table.write_text("Critic: [judge]\n")
    broken = cockpit(
        "actors", "local", "--json", "--job", demo_job, env={**os.environ, "COCKPIT_ROLES": str(table)}
    )
    assert broken.returncode == 0
    assert f"{table}:1: the role of 'Critic'" in broken.stderr and len(broken.stderr.splitlines()) == 1
    assert {a["class_name"]: a["role"] for a in json.loads(broken.stdout)["actors"]}["Critic"] == "critic"


def test_job_by_submission_id_is_the_demo_jobs_actors(demo_job: str) -> None:
    result = cockpit("actors", "local", "--json", "--job", demo_job)
    doc = json.loads(result.stdout)
    assert result.returncode == 0 and doc["complete"]
    classes = {a["class_name"] for a in doc["actors"]}
    assert classes == set(DEMO_ROLES) and len({a["job_id"] for a in doc["actors"]}) == 1


def test_limit_says_showing_n_of_m(demo_job: str) -> None:
    result = cockpit("actors", "local", "--json", "--limit", "2")
    doc = json.loads(result.stdout)
    assert result.returncode == 0 and doc["shown"] == 2 and not doc["complete"]
    assert doc["summary"].startswith(f"showing 2 of {doc['matching']} actors")


def test_nothing_pending_exits_0(demo_job: str) -> None:
    result = cockpit("actors", "local", "--pending")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("nothing pending")


def test_unplaceable_placement_groups_are_named_with_numbers_and_exit_4(
    ray_cluster: ClusterHandle, tmp_path: Path
) -> None:
    with unplaceable_job(ray_cluster, tmp_path):
        result = cockpit("actors", "local", "--pending")
        doc = json.loads(cockpit("actors", "local", "--pending", "--json").stdout)
    assert result.returncode == 4, result.stdout + result.stderr
    text = result.stdout
    big = next(line for line in text.splitlines() if "`cockpit_test_big`" in line)
    assert "PENDING: 1 bundle of {GPU: 8}" in big and "no node has GPU 8 (the most on one node: 2)" in big
    assert "largest free on any node: GPU" in big
    spread = next(line for line in text.splitlines() if "`cockpit_test_spread`" in line)
    assert "4 bundles of {GPU: 1} (STRICT_SPREAD)" in spread
    assert "STRICT_SPREAD needs 4 different nodes" in spread and "can never be placed" in spread
    huge = next(line for line in text.splitlines() if "HugeLearner" in line)
    assert "`cockpit_test_huge` PENDING_CREATION" in huge and "no node has GPU 8" in huge
    assert "infeasible demand" not in text  # the demands these explain are not said twice
    assert doc["stuck"] and {i["name"] for i in doc["items"] if i["infeasible"]} >= {
        "cockpit_test_big",
        "cockpit_test_spread",
        "cockpit_test_huge",
    }
