"""Tests that the Slurm test harness runs a real one-node Slurm that real client commands can use:
holds, releases, the node list inside the job, output files, cancel, failure exit codes, logical GPUs,
and a stop that leaves none of its own processes (and no other cluster's) behind."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.harness.slurm import SlurmCluster, start_slurm

pytestmark = pytest.mark.slurm

WAIT_S = 60.0
"""A bound on each wait, for the failure message only; the steps take about a second."""


def _wait_for_text(path: Path, text: str) -> str:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if path.exists() and text in (content := path.read_text()):
            return content
        time.sleep(0.1)
    raise AssertionError(
        f"{text!r} not in {path} within {WAIT_S:.0f} s: {path.read_text() if path.exists() else '(none)'}"
    )


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_held_job_pends_then_runs_on_the_node_and_is_cancelled(slurm: SlurmCluster, tmp_path: Path) -> None:
    output = tmp_path / "held.out"
    script = 'scontrol show hostnames "$SLURM_JOB_NODELIST"\necho started\nsleep 300\n'
    job = slurm.sbatch(script, "--hold", "--job-name=harness-held", f"--output={output}")

    pending = slurm.wait_state(job, "PENDING", WAIT_S)
    assert pending["Reason"] == "JobHeldUser"

    slurm.release(job)
    running = slurm.wait_state(job, "RUNNING", WAIT_S)
    assert running["NodeList"] == slurm.node
    assert running["NumNodes"] == "1"
    assert running["StdOut"] == str(output)
    assert _wait_for_text(output, "started").splitlines()[0] == slurm.node

    slurm.cancel(job)
    assert slurm.wait_state(job, "CANCELLED", WAIT_S)["JobState"] == "CANCELLED"


def test_script_exiting_3_fails_with_exit_code_3(slurm: SlurmCluster) -> None:
    job = slurm.sbatch("exit 3\n", "--job-name", "harness-exit3")
    record = slurm.wait_state(job, "FAILED", WAIT_S)
    assert record["ExitCode"] == "3:0"


def test_gpus_per_node_are_allocated_and_shown(slurm: SlurmCluster, tmp_path: Path) -> None:
    # Without slurmdbd the TRES field has no gres/gpu: the request is TresPerNode, the allocation -dd's GRES.
    output = tmp_path / "gpus.out"
    job = slurm.sbatch(
        'echo "gpus=$CUDA_VISIBLE_DEVICES"\nsleep 300\n', "--gpus-per-node=2", f"--output={output}"
    )
    try:
        running = slurm.wait_state(job, "RUNNING", WAIT_S)
        assert running["TresPerNode"] == "gres:gpu:2"
        detail = slurm.show(job, detail=True)
        assert detail["JOB_GRES"] == "gpu:2"
        assert detail["GRES"] == "gpu:2(IDX:0-1)"
        assert "gpus=0,1" in _wait_for_text(output, "gpus=")
    finally:
        slurm.cancel(job)


def test_stop_leaves_none_of_its_processes_and_spares_other_clusters(
    slurm: SlurmCluster, tmp_path: Path
) -> None:
    other = start_slurm(tmp_path / "other")
    try:
        assert other.cluster_name != slurm.cluster_name
        assert other.ctld_port not in (slurm.ctld_port, slurm.slurmd_port)
        # A job with a process that leaves the job's process tree, as `ray start` does.
        output = tmp_path / "stray.out"
        job = other.sbatch(
            "setsid sleep 301 </dev/null >/dev/null 2>&1 &\necho stray-started\nsleep 302\n",
            "--output",
            str(output),
        )
        other.wait_state(job, "RUNNING", WAIT_S)
        _wait_for_text(output, "stray-started")
        job_pids = other.job_processes()
        commands = [Path(f"/proc/{pid}/cmdline").read_bytes() for pid in job_pids if _alive(pid)]
        assert b"sleep\x00301\x00" in commands, "the job's stray process was not found"
        daemon_pids = other.daemon_pids
    finally:
        other.stop()

    assert not [pid for pid in daemon_pids.values() if _alive(pid)]
    assert not [pid for pid in job_pids if _alive(pid)]
    assert slurm.running
    assert slurm.run("sinfo", "-h", "-n", slurm.node, "-o", "%T").stdout.strip() in ("idle", "mixed")
