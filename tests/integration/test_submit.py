"""Submitting from profiles against the real cluster: pre-flight, follow, failure, no double submit."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cockpit.core.cluster.dashboard import DashboardClient
from cockpit.core.jobs import submitted
from cockpit.core.jobs.launch import submit_request
from cockpit.core.local import record
from tests.harness.cluster import ClusterHandle
from tests.harness.run import run_cockpit

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]


def cockpit(*args: str, timeout: float = 240, **env: str) -> subprocess.CompletedProcess[str]:
    return run_cockpit(*args, timeout=timeout, env={**os.environ, **env})


def test_failing_job_makes_follow_exit_nonzero_with_its_message(
    ray_cluster: ClusterHandle, tmp_path: Path
) -> None:
    profile = tmp_path / "fails.yaml"
    profile.write_text(
        "name: fails\nentrypoint: ${python} -c \"import sys; print('loading shards'); "
        "sys.exit('CUDA out of memory (demo failure)')\"\n"
    )
    result = cockpit("submit", "local", str(profile), "--follow")
    assert result.returncode == 1
    assert "loading shards" in result.stdout
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("cockpit: job fails-") and " FAILED: " in last and "CUDA out of memory" in last


def test_shape_larger_than_the_cluster_is_blocked_and_nothing_submitted(
    ray_cluster: ClusterHandle, tmp_path: Path
) -> None:
    profile = tmp_path / "big.yaml"
    profile.write_text(
        "name: big\nframework: verl\nentrypoint: python3 -m verl.trainer.main_ppo\n"
        "cluster: {nodes: 16, gpus_per_node: 8}\n"
        "overrides: [trainer.nnodes=16, trainer.n_gpus_per_node=8]\n"
    )
    before = json.loads(cockpit("jobs", "local", "--json").stdout)
    result = cockpit("submit", "local", str(profile))
    assert result.returncode == 1
    assert "✘ cluster shape: asks 16 x 8 GPUs" in result.stderr
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith(f"cockpit: not submitted: {profile}:4: cluster shape")
    )
    after = json.loads(cockpit("jobs", "local", "--json").stdout)
    assert len(after) == len(before)


def test_missing_secret_blocks_submit(ray_cluster: ClusterHandle, tmp_path: Path) -> None:
    profile = tmp_path / "secret.yaml"
    profile.write_text(
        "entrypoint: python3 x.py\nruntime_env: {env_vars: {HF_TOKEN: '${env:HF_TOKEN_FOR_TEST}'}}\n"
    )
    result = cockpit("submit", "local", str(profile))
    assert result.returncode == 1 and "HF_TOKEN_FOR_TEST" in result.stderr and "export" in result.stderr


async def test_a_retried_submit_never_runs_twice(ray_cluster: ClusterHandle) -> None:
    request = {"entrypoint": f"{sys.executable} -c 'print(1)'", "submission_id": "retry-once-1234"}
    async with ray_cluster.client() as client:
        first = await submit_request(client, request)
        # The same request again (what a retry after a lost answer sends): found, not submitted again.
        second = await submit_request(client, request)
        jobs = [j for j in await client.jobs() if j.submission_id == "retry-once-1234"]
    assert first == second == "retry-once-1234" and len(jobs) == 1


async def test_working_dir_is_uploaded_without_git(ray_cluster: ClusterHandle, tmp_path: Path) -> None:
    code = tmp_path / "code"
    (code / ".git").mkdir(parents=True)
    (code / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (code / "data").mkdir()
    (code / "data" / "big.bin").write_bytes(b"x" * 1000)
    (code / "run.log").write_text("old log\n")
    (code / ".gitignore").write_text("*.log\n")
    (code / "train.py").write_text("import os\nprint('files:', sorted(os.listdir('.')))\n")
    profile = tmp_path / "upload.yaml"
    # Setting excludes must not bring .git back; .gitignore is read as Ray reads it.
    profile.write_text(
        f"name: upload\nentrypoint: python3 train.py\nworking_dir: {code}\n"
        "runtime_env: {excludes: [data/]}\n"
    )
    result = cockpit("submit", "local", str(profile), "--follow", timeout=120)
    assert result.returncode == 0, result.stderr
    assert "files: ['.gitignore', 'train.py']" in result.stdout
    assert "2 files, " in result.stderr  # the pre-flight counted what was sent


async def test_an_upload_is_not_held_to_the_clients_request_timeout(ray_cluster: ClusterHandle) -> None:
    """A 100 MiB working_dir through an SSH tunnel takes longer than the 10 s any other request gets: here
    a client whose requests get a millisecond still uploads; the existence check sends no package back."""
    data = os.urandom(8 * 2**20)
    name = f"_ray_pkg_{hashlib.sha1(data).hexdigest()[:16]}.zip"
    token = record.cluster_token(ray_cluster.state_dir)
    async with DashboardClient(ray_cluster.url, token=token, timeout=0.001) as hurried:
        await hurried.upload_package(name, data)
    async with ray_cluster.client() as client:
        assert await client.package_exists(name)
        assert await client._request("GET", f"/api/packages/gcs/{name}", raw=True) == b""


def test_submit_records_the_overrides_so_a_resubmit_keeps_them(
    ray_cluster: ClusterHandle, tmp_path: Path
) -> None:
    profile = tmp_path / "quick.yaml"
    profile.write_text("name: quick\nentrypoint: ${python} -c 'print(1)'\n")
    result = cockpit("submit", "local", str(profile), "k=v", "+trainer.x='a b'")
    assert result.returncode == 0, result.stderr
    submission_id = result.stdout.split()[-1]
    jobs = json.loads(cockpit("jobs", "local", "--json").stdout)
    job = next(j for j in jobs if j["submission_id"] == submission_id)
    # What the Jobs screen's resubmit reads back into the launcher.
    assert json.loads(job["metadata"]["cockpit_overrides"]) == ["k=v", "+trainer.x='a b'"]
    assert job["metadata"]["cockpit_profile"] == "quick"
    # The file it came from, noted here for the hang watch, the curves and alerts (on no search path).
    assert submitted.profile_file(submission_id, ray_cluster.state_dir) == profile.resolve()


class CountingClient(DashboardClient):
    """The real dashboard client, counting the working_dir packages it uploads."""

    uploads: list[str]

    async def upload_package(self, name: str, data: bytes) -> None:
        self.uploads = [*getattr(self, "uploads", []), name]
        await super().upload_package(name, data)


async def test_the_demo_submit_uploads_once_and_never_submits_twice(
    ray_cluster: ClusterHandle, tmp_path: Path
) -> None:
    from cockpit.cli.tui import submit_demo_job
    from cockpit.core.jobs import profiles

    code = tmp_path / "code"
    code.mkdir()
    # Content unique to this run: the package is named by its content, and the session cluster keeps it.
    (code / "train.py").write_text(f"print('run {tmp_path.name} {os.getpid()}')\n")
    path = tmp_path / "wd.yaml"
    path.write_text(f"name: wd\nentrypoint: python3 train.py\nworking_dir: {code}\n")
    profile = profiles.load(path)
    submission_id = profiles.new_submission_id("wd")
    token = record.cluster_token(ray_cluster.state_dir)
    async with CountingClient(ray_cluster.url, token=token) as client:
        first = await submit_demo_job(client, profile, submission_id)
        # The same launch again (a retry after a lost answer): found, neither uploaded nor submitted again.
        second = await submit_demo_job(client, profile, submission_id)
        package = client.uploads[0]
        assert await client.package_exists(package)
        jobs = [j for j in await client.jobs() if j.submission_id == submission_id]
    assert first == second == submission_id
    assert client.uploads == [package] and len(jobs) == 1
    assert jobs[0].metadata["cockpit_profile"] == "wd"


async def test_ray_shows_env_vars_in_clear_so_secret_files_send_a_path(
    ray_cluster: ClusterHandle, tmp_path: Path
) -> None:
    """What profiles/README.md says of secrets, against Ray itself: an env var's value comes back in clear
    to any non-browser client; a secret file's content never leaves this machine, the job reads it."""
    key = tmp_path / "token"
    key.write_text("file-secret-content")
    key.chmod(0o600)
    profile = tmp_path / "secret.yaml"
    profile.write_text(
        'name: secret\nentrypoint: ${python} -c "import os; '
        "print('token length', len(open(os.environ['TOKEN_FILE']).read()))\"\n"
        "runtime_env: {env_vars: {PLAIN: '${env:COCKPIT_TEST_PLAIN}'}}\n"
        f"secret_files: {{TOKEN_FILE: {key}}}\n"
    )
    result = cockpit("submit", "local", str(profile), "--follow", COCKPIT_TEST_PLAIN="env-var-in-clear")
    assert result.returncode == 0, result.stderr
    assert "token length 19" in result.stdout
    submission_id = result.stdout.split()[1]
    async with ray_cluster.client() as client:
        answer = json.dumps(await client._get(f"/api/jobs/{submission_id}"))
    assert "env-var-in-clear" in answer and str(key) in answer
    assert "file-secret-content" not in answer
