"""`cockpit submit`, `jobs`, `logs` and `stop` with a profile, against a head of each Ray version of the
matrix; and the pre-flight that knows the cluster's version: a runtime_env field an older Ray does not
accept is one failed line naming the version that brings it, and nothing is submitted."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.harness.ray_versions import MATRIX, OLDEST, OldHead
from tests.harness.run import run_cockpit

pytestmark = pytest.mark.ray_versions
matrix = pytest.mark.parametrize("ray_head", MATRIX, indirect=True)

# `python` is the head's own (its venv is first on the PATH its jobs get): the job runs that version.
PROFILE = """name: versions-{name}
description: a small job for each Ray version
entrypoint: python {script}
runtime_env:
  env_vars:
    HOLD_SECONDS: "{hold}"
entrypoint_resources:
  num_cpus: 0
metadata:
  purpose: version matrix
"""

SCRIPT = """import os, time
import ray

ray.init()


@ray.remote(num_cpus=0)
def double(x):
    return 2 * x


print("ray", ray.__version__, "doubles", ray.get([double.remote(i) for i in range(3)]), flush=True)
time.sleep(float(os.environ["HOLD_SECONDS"]))
print("done", flush=True)
"""


def profile(head: OldHead, tmp_path: Path, name: str, hold: float) -> Path:
    script = head.temp_dir / "versions_job.py"
    script.write_text(SCRIPT)
    path = tmp_path / f"{name}.yaml"
    path.write_text(PROFILE.format(name=name, script=script, hold=hold))
    return path


def listed(head: OldHead, job: str) -> dict[str, object]:
    answer = run_cockpit("jobs", head.url, "--json")
    assert answer.returncode == 0, answer.stderr
    return next(row for row in json.loads(answer.stdout) if row["submission_id"] == job)


@matrix
def test_submit_a_profile_it_succeeds_and_its_log_reads(ray_head: OldHead, tmp_path: Path) -> None:
    path = profile(ray_head, tmp_path, "quick", hold=0)
    answer = run_cockpit("submit", ray_head.url, str(path), "--follow", timeout=240)
    assert answer.returncode == 0, answer.stderr
    job = answer.stdout.splitlines()[0].removeprefix("submitted ")
    assert job.startswith("versions-quick")
    assert f"ray {ray_head.version} doubles [0, 2, 4]" in answer.stdout
    assert answer.stdout.rstrip().endswith(f"{job}: SUCCEEDED")
    row = listed(ray_head, job)
    assert row["status"] == "SUCCEEDED" and row["metadata"]["cockpit_profile"] == "versions-quick"  # type: ignore[index]
    log = run_cockpit("logs", ray_head.url, job, "--color", "always")  # the bytes as written
    assert log.returncode == 0, log.stderr
    assert log.stdout == (ray_head.logs / f"job-driver-{job}.log").read_text()
    assert "done" in log.stdout and not log.stdout.startswith("1")


@matrix
def test_stop_a_running_job(ray_head: OldHead, tmp_path: Path) -> None:
    path = profile(ray_head, tmp_path, "held", hold=300)
    answer = run_cockpit("submit", ray_head.url, str(path))
    assert answer.returncode == 0, answer.stderr
    job = answer.stdout.strip().removeprefix("submitted ")
    deadline = time.monotonic() + 120
    while listed(ray_head, job)["status"] != "RUNNING" and time.monotonic() < deadline:
        time.sleep(0.5)
    assert listed(ray_head, job)["status"] == "RUNNING"
    stopped = run_cockpit("stop", ray_head.url, job)
    assert stopped.returncode == 0, stopped.stderr
    while listed(ray_head, job)["status"] == "RUNNING" and time.monotonic() < deadline:
        time.sleep(0.5)
    assert listed(ray_head, job)["status"] == "STOPPED"


PIP_OPTIONS = """name: versions-pip-options
entrypoint: python -c "print('never run')"
runtime_env:
  pip:
    packages: [six]
    pip_install_options: ["--no-build-isolation"]
"""


@pytest.mark.parametrize("ray_head", [OLDEST], indirect=True)
def test_a_field_the_cluster_s_version_lacks_fails_the_pre_flight(ray_head: OldHead, tmp_path: Path) -> None:
    """`pip.pip_install_options` came with Ray 2.49: on 2.43 the pre-flight fails in one line naming
    the field and that version, and nothing is submitted (a dry run says the same, submitting nothing)."""
    path = tmp_path / "pip-options.yaml"
    path.write_text(PIP_OPTIONS)
    expected = (
        f"runtime_env.pip.pip_install_options: Ray {ray_head.version} does not accept it "
        "(it came with Ray 2.49)"
    )
    dry = run_cockpit("submit", ray_head.url, str(path), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert expected in dry.stderr
    before = json.loads(run_cockpit("jobs", ray_head.url, "--json").stdout)
    answer = run_cockpit("submit", ray_head.url, str(path))
    assert answer.returncode == 1
    last = answer.stderr.strip().splitlines()[-1]
    assert last.startswith("cockpit: not submitted: ") and last.endswith(
        f"Ray version: {expected} (fix it, or pass --force)"
    )
    assert f"{path}:6:" in last  # the profile line of pip_install_options
    assert "Traceback" not in answer.stderr and answer.stdout == ""
    assert json.loads(run_cockpit("jobs", ray_head.url, "--json").stdout) == before
