"""The command-line contract against the real session cluster: status, wait, jobs, submit, exit codes."""

from __future__ import annotations

import json
import os

import pytest

from tests.harness.cluster import ClusterHandle
from tests.harness.run import FinishedRun
from tests.harness.run import run_cockpit as cockpit

pytestmark = pytest.mark.cluster


def test_status_json_reports_alive_nodes_and_gpus(ray_cluster: ClusterHandle) -> None:
    result = cockpit("status", "local", "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    alive = [n for n in doc["nodes"] if n["state"] == "ALIVE"]
    assert len(alive) == doc["alive_nodes"] >= 3
    assert doc["gpus"] == 2 * doc["alive_nodes"]
    assert doc["ray_version"] and doc["dashboard"] == ray_cluster.url


def test_status_over_http_target_matches_local(ray_cluster: ClusterHandle) -> None:
    by_url = json.loads(cockpit("status", ray_cluster.url, "--json").stdout)
    by_name = json.loads(cockpit("status", "local", "--json").stdout)
    assert {n["node_id"] for n in by_url["nodes"]} == {n["node_id"] for n in by_name["nodes"]}


def test_status_text(ray_cluster: ClusterHandle) -> None:
    result = cockpit("status", "local")
    assert result.returncode == 0
    assert "Ray " in result.stdout and "ALIVE" in result.stdout and "GPUs" in result.stdout


def test_wait_ready_exits_0(ray_cluster: ClusterHandle) -> None:
    result = cockpit("wait", "local", "--nodes", "3", "--gpus", "6", "--timeout", "120")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ready:")


def test_wait_timeout_exits_3_and_names_what_is_missing(ray_cluster: ClusterHandle) -> None:
    alive = json.loads(cockpit("status", "local", "--json").stdout)["alive_nodes"]
    result = cockpit("wait", "local", "--nodes", str(alive + 2), "--timeout", "3")
    assert result.returncode == 3
    last = result.stderr.strip().splitlines()
    assert any(
        f"timed out after 3s: 2 nodes missing ({alive}/{alive + 2} nodes joined)" in line for line in last
    )


def test_wait_on_unreachable_dashboard_times_out_with_the_reason() -> None:
    result = cockpit("wait", "http://127.0.0.1:9", "--nodes", "1", "--timeout", "2")
    assert result.returncode == 3
    assert "cannot reach the Ray dashboard at http://127.0.0.1:9" in result.stderr


def test_bad_target_and_usage_errors() -> None:
    bad = cockpit("status", "http://")
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr
    usage = cockpit("wait", "local")
    assert usage.returncode == 2 and "--nodes" in usage.stderr


def test_jobs_lists_the_demo_job(demo_job: str) -> None:
    result = cockpit("jobs", "local", "--json")
    assert result.returncode == 0
    job = next(j for j in json.loads(result.stdout) if j["submission_id"] == demo_job)
    assert job["status"] == "RUNNING"


def test_submit_dry_run_masks_secrets(tmp_path: object) -> None:
    env_profile = os.path.join(str(tmp_path), "secret.yaml")
    with open(env_profile, "w") as fh:
        fh.write(
            "entrypoint: python3 train.py\nruntime_env:\n"
            "  env_vars:\n    WANDB_API_KEY: ${env:WANDB_API_KEY}\n"
        )
    os.environ["WANDB_API_KEY"] = "do-not-print-me"
    try:
        result = cockpit("submit", "local", env_profile, "trainer.total_epochs=1", "--dry-run")
    finally:
        del os.environ["WANDB_API_KEY"]
    assert result.returncode == 0, result.stderr
    assert "do-not-print-me" not in result.stdout
    request = json.loads(result.stdout)
    assert request["entrypoint"].endswith("trainer.total_epochs=1")


def test_submit_follow_runs_a_short_demo_to_success(finished_demo: FinishedRun) -> None:
    result = finished_demo.follow  # `submit local demo steps=6 step_seconds=0.2 --follow`, once a session
    assert result.returncode == 0, result.stderr + result.stdout[-2000:]
    assert result.stdout.startswith("submitted demo-")
    assert "step=3 reward=" in result.stdout and "demo trainer: done" in result.stdout
    assert result.stdout.rstrip().splitlines()[-1].split()[1] == "SUCCEEDED"


def test_stop_from_the_command_line(ray_cluster: ClusterHandle) -> None:
    submitted = cockpit("submit", "local", "demo", "rollout_workers=1")
    assert submitted.returncode == 0, submitted.stderr
    submission_id = submitted.stdout.split()[-1]
    stopped = cockpit("stop", "local", submission_id)
    assert stopped.returncode == 0 and f"{submission_id}: stop requested" in stopped.stdout


def test_submit_dry_run_checks_the_shape_against_the_target_and_submits_nothing(
    ray_cluster: ClusterHandle,
) -> None:
    result = cockpit("submit", "local", "demo", "steps=2", "--dry-run")
    assert result.returncode == 0, result.stderr
    alive = json.loads(cockpit("status", "local", "--json").stdout)["alive_nodes"]
    assert "pre-flight for demo against local:" in result.stderr
    assert f"✔ cluster shape: asks 3 x 2 GPUs; cluster has {alive} alive node(s)" in result.stderr
    assert "not checked" not in result.stderr
    request = json.loads(result.stdout)
    jobs = json.loads(cockpit("jobs", "local", "--json").stdout)
    assert request["submission_id"] not in {j["submission_id"] for j in jobs}


def test_submit_dry_run_on_an_unreachable_target_says_why_and_still_prints_the_request() -> None:
    result = cockpit("submit", "http://127.0.0.1:1", "demo", "steps=2", "--dry-run")
    assert result.returncode == 0, result.stderr
    why = result.stderr.splitlines()[0]
    assert why.startswith("pre-flight for demo: not checked against http://127.0.0.1:1: cannot reach")
    assert "(not checked against a cluster)" in result.stderr
    request = json.loads(result.stdout)
    assert request["entrypoint"].endswith("cockpit.demo.trainer steps=300 step_seconds=1.0 steps=2")
