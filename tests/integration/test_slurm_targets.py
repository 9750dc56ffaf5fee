"""`slurm:` TARGETs and `cockpit slurm up` against a real one-node Slurm (the `slurm` fixture) whose
node is this machine, its "head" reached over a real sshd on 127.0.0.1 through an SSH config entry
named like the Slurm node (what a login node's `Host gpu*` entry does)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.run import run_cockpit
from tests.harness.slurm import SlurmCluster
from tests.harness.sshd import SshServer, start_sshd
from tests.harness.terminal import Terminal

pytestmark = [pytest.mark.slurm, pytest.mark.ssh]

DEMO = ("demo", "steps=400", "step_seconds=0.5", "rollout_workers=1")
"""The demo profile, long enough to still run while a test looks at it (cancelled at the end)."""


@pytest.fixture(scope="module")
def node_sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    server = start_sshd(tmp_path_factory.mktemp("slurm-node-sshd"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def env(
    slurm: SlurmCluster, node_sshd: SshServer, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str]:
    """The environment of a user on the login node: Slurm's config, and an SSH config that reaches the
    allocation's node by its Slurm name."""
    config = tmp_path_factory.mktemp("slurm-ssh") / "config"
    config.write_text(node_sshd.ssh_config_entry(slurm.node))
    state = tmp_path_factory.mktemp("slurm-state")  # where the jobs' tokens go (shared home, for real)
    state.chmod(0o700)
    return {**slurm.env, "COCKPIT_TEST_SSH_CONFIG": str(config), "COCKPIT_STATE_DIR": str(state)}


def cockpit(
    env: dict[str, str], *args: str, cwd: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """The cockpit with the SSH config (for the commands that take a TARGET), run in CWD."""
    extra = ["--ssh-config", env["COCKPIT_TEST_SSH_CONFIG"]] if args[0] in ("status", "wait", "jobs") else []
    return run_cockpit(*args, *extra, timeout=timeout, env=env, cwd=cwd)


def slurm_up(env: dict[str, str], cwd: Path, *args: str, held: bool = False) -> str:
    done = cockpit(env, "slurm", "up", *args, *(["--hold"] if held else []), cwd=cwd)
    assert done.returncode == 0, done.stderr
    found = re.search(r"submitted Slurm job (\d+)", done.stdout)
    assert found, done.stdout
    job_id = found.group(1)
    assert f"cockpit connect slurm:{job_id}" in done.stdout
    return job_id


def test_slurm_up_runs_the_demo_to_succeeded(
    slurm: SlurmCluster, env: dict[str, str], tmp_path: Path
) -> None:
    job_id = slurm_up(
        env,
        tmp_path,
        "demo",
        "steps=4",
        "step_seconds=0.2",
        "--nodes",
        "1",
        "--gpus-per-node",
        "2",
        "--time",
        "10",
    )
    record = slurm.wait_state(job_id, ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"), timeout=300)
    output = (tmp_path / f"slurm-{job_id}.out").read_text()
    assert record["JobState"] == "COMPLETED", output
    assert "ready: 1/1 nodes, 2/2 GPUs" in output  # the join gate, on the allocation's shape
    assert re.search(r"demo-\S+: SUCCEEDED", output), output
    assert "✔ cluster shape: asks 1 x 2 GPUs" in output  # the launch path's pre-flight, in the job
    assert (tmp_path / f"{job_id}-logs" / "ray-head.log").is_file()
    tokens = Path(env["COCKPIT_STATE_DIR"]) / "slurm" / job_id
    assert not tokens.exists(), "the cluster's token is removed when the job ends"
    assert record["Comment"].startswith("cockpit:dashboard_port=")
    ended = cockpit(env, "status", f"slurm:{job_id}")
    assert ended.returncode == 1
    assert f"slurm job {job_id} (cockpit-demo) ended: COMPLETED" in ended.stderr


def test_a_job_whose_head_never_starts_shows_its_output_and_why(
    slurm: SlurmCluster, env: dict[str, str], tmp_path: Path
) -> None:
    script = (
        'echo "starting the Ray head on $(hostname)"\necho "ray: error: no GPU on this node" >&2\nexit 3\n'
    )
    job_id = slurm.sbatch(script, "--job-name", "broken-head", cwd=tmp_path)
    slurm.wait_state(job_id, "FAILED", timeout=60)
    done = cockpit(env, "status", f"slurm:{job_id}")
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert lines[0] == (
        f"cockpit: slurm job {job_id} (broken-head) ended: FAILED: NonZeroExitCode, exit code 3:0; "
        f"its output: {tmp_path / f'slurm-{job_id}.out'}"
    )
    assert lines[1:] == [
        "  starting the Ray head on " + os.uname().nodename.split(".")[0],
        "  ray: error: no GPU on this node",
    ]


def test_an_unknown_job_is_one_line(env: dict[str, str]) -> None:
    done = cockpit(env, "status", "slurm:999999")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "cockpit: no Slurm job 999999 (unknown id, or it ended longer ago than Slurm remembers)."
    ]
    named = cockpit(env, "status", "slurm:no-such-name")
    assert named.returncode == 1 and "no Slurm job of yours is named 'no-such-name'" in named.stderr


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_a_held_job_is_followed_from_the_queue_to_its_end_in_the_cockpit_and_by_wait(
    slurm: SlurmCluster, env: dict[str, str], tmp_path: Path
) -> None:
    """One held job (each costs a Ray start and a demo job): in a real terminal the cockpit shows the
    held job's reason, then (released) the join and the running demo job with the walltime counting
    down, then (scancel) the end, said once, with no retrying. Beside it, on the command line: `status`
    by the job's name says it is held, `wait` (started while it is held) says so first and returns once
    it joined, `status --json` gives the allocation, and after the cancel `wait` does not wait.

    And one `cockpit alerts` process watches two targets all along: this Slurm job (its walltime under
    the threshold once it runs, its end) and `local`, where no cluster runs here (out of reach, said once
    it lasted 20 s; the Slurm job's own head is out of reach only for the few seconds between its end
    and Slurm's)."""
    job_id = slurm_up(
        env, tmp_path, *DEMO, "--nodes", "1", "--gpus-per-node", "2", "--time", "30",
        "--job-name", "held-grpo", held=True,
    )  # fmt: skip
    term = Terminal(f"cockpit-slurm-{os.getpid()}", 120, 30)
    alerts_out = (tmp_path / "alerts.out").open("w+")
    alerts = subprocess.Popen(
        [
            sys.executable, "-m", "cockpit.cli", "alerts", f"slurm:{job_id}", "local", "--json",
            "--ssh-config", env["COCKPIT_TEST_SSH_CONFIG"],
        ],
        env={
            **env, "COCKPIT_ALERTS_INTERVAL": "1", "COCKPIT_ALERTS_WALLTIME_UNDER": "1h",
            "COCKPIT_ALERTS_UNREACHABLE_AFTER": "20s", "COCKPIT_ALERTS_NOTIFY": "off",
        },
        stdin=subprocess.DEVNULL, stdout=alerts_out, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        exports = " ".join(f"{k}={shlex.quote(env[k])}" for k in ("SLURM_CONF", "COCKPIT_STATE_DIR"))
        config = shlex.quote(env["COCKPIT_TEST_SSH_CONFIG"])
        python = shlex.quote(sys.executable)
        command = f"{exports} {python} -m cockpit.cli connect slurm:{job_id} --ssh-config {config}"
        term.type(f"{command}; echo cockpit-exit=$?", "Enter")
        queued = term.wait_for(lambda s: "queued in Slurm" in s and "PENDING" in s, timeout=60)
        assert "will have 1 node(s) x 2 GPUs" in queued

        # By name: the newest job of that name. Slurm gives the hold as the reason once it looked at
        # the job (`Reason=None` for a moment after the submit).
        deadline = time.monotonic() + 60
        while True:
            pending = cockpit(env, "status", "slurm:held-grpo")
            if "JobHeld" in pending.stderr or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert pending.returncode == 1
        assert re.search(rf"slurm job {job_id} \(held-grpo\) PENDING: JobHeld(User|Admin)", pending.stderr), (
            pending.stderr
        )
        queued = term.wait_for(lambda s: re.search(r"PENDING \(JobHeld", s) is not None, timeout=30)
        assert re.search(r"QUEUED in Slurm: PENDING \(JobHeld(User|Admin)\)", queued), queued
        waiting = subprocess.Popen(
            [
                sys.executable, "-m", "cockpit.cli", "wait", f"slurm:{job_id}", "--timeout", "240",
                "--ssh-config", env["COCKPIT_TEST_SSH_CONFIG"],
            ],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        # `wait` sees the job held first: its first line says so (read before the release).
        first = waiting.stderr.readline() if waiting.stderr is not None else ""
        slurm.release(job_id)
        out, rest = waiting.communicate(timeout=300)
        err = first + rest
        assert waiting.returncode == 0, err
        assert "PENDING: JobHeld" in err.splitlines()[0]
        assert out.strip() == "ready: 1/1 nodes, 2/2 GPUs — ready"

        running = cockpit(env, "status", f"slurm:{job_id}", "--json")
        assert running.returncode == 0, running.stderr
        doc = json.loads(running.stdout)
        assert doc["slurm"]["state"] == "RUNNING" and doc["slurm"]["nodes"] == [slurm.node]
        assert 0 < doc["slurm"]["seconds_left"] <= 30 * 60
        assert doc["alive_nodes"] == 1 and doc["gpus"] == 2

        # `cockpit runs` finds the job (squeue --me, the comment `slurm up` wrote) and looks at it.
        listed = run_cockpit("runs", "--json", "--ssh-config", env["COCKPIT_TEST_SSH_CONFIG"], env=env)
        assert listed.returncode == 0, listed.stderr
        (row,) = [r for r in json.loads(listed.stdout) if r["target"] == f"slurm:{job_id}"]
        assert (row["source"], row["nodes_alive"], row["gpus"]) == ("slurm", 1, 2.0), row
        assert row["state"] in ("running", "idle") and 0 < row["time_left"] <= 30 * 60, row

        running = term.wait_for(lambda s: "READY" in s and "RUNNING" in s and "connected" in s, timeout=240)
        assert "Nodes    1/1" in running and "GPUs     2/2" in running
        first_left = re.search(r"⏱ (\d+)m(\d+)s left \(slurm " + job_id + r"\)", running)
        assert first_left, running
        later = term.wait_for(
            lambda s: (
                (m := re.search(r"⏱ (\d+)m(\d+)s left", s)) is not None and m.groups() != first_left.groups()
            ),
            timeout=30,
        )
        minutes, seconds = re.search(r"⏱ (\d+)m(\d+)s left", later).groups()  # type: ignore[union-attr]
        assert int(minutes) * 60 + int(seconds) < int(first_left.group(1)) * 60 + int(
            first_left.group(2)
        )  # counting down
        slurm.cancel(job_id)
        ended = term.wait_for(lambda s: "Slurm job ended" in s and "CANCELLED" in s, timeout=180)
        assert "reconnecting" not in ended.splitlines()[0]
        time.sleep(6)  # no retry follows: the header stays on the end
        assert "Slurm job ended" in term.screen().splitlines()[0]
        term.type("q")
        term.wait_for(lambda s: "cockpit-exit=0" in s, timeout=30)
        told = _wait_for_alerts(alerts_out, {(f"slurm:{job_id}", "slurm_ended"), ("local", "unreachable")})
        alerts.send_signal(signal.SIGTERM)
        _, said = alerts.communicate(timeout=30)
        assert alerts.returncode == 0, said
        firing = sorted((a["target"], a["rule"]) for a in told if a["state"] == "firing")
        assert firing == sorted(
            [(f"slurm:{job_id}", "walltime"), (f"slurm:{job_id}", "slurm_ended"), ("local", "unreachable")]
        ), told
        ended_alert = next(a for a in told if a["rule"] == "slurm_ended")
        assert ended_alert["message"].startswith(f"slurm job {job_id} (held-grpo) ended: CANCELLED"), told
        assert "no local cluster is running" in next(a for a in told if a["target"] == "local")["message"]
        # The walltime ends with the job: resolved, once.
        assert [a["state"] for a in told if a["rule"] == "walltime"] == ["firing", "resolved"], told
    finally:
        term.close()
        slurm.cancel(job_id)
        if alerts.poll() is None:
            alerts.kill()
            alerts.communicate()
        alerts_out.close()
    slurm.wait_state(job_id, "CANCELLED", timeout=120)
    ended_wait = cockpit(env, "wait", f"slurm:{job_id}", "--timeout", "30")
    assert ended_wait.returncode == 1  # no waiting for a job that is over
    assert f"slurm job {job_id} (held-grpo) ended: CANCELLED" in ended_wait.stderr


def _wait_for_alerts(out, wanted: set[tuple[str, str]], timeout: float = 120) -> list[dict]:  # type: ignore[no-untyped-def,type-arg]
    """The JSON alerts `cockpit alerts` printed, once those of WANTED (target, rule) are all there."""
    deadline = time.monotonic() + timeout
    while True:
        out.seek(0)
        told = [json.loads(line) for line in out.read().splitlines() if line.startswith("{")]
        if wanted <= {(a["target"], a["rule"]) for a in told}:
            time.sleep(2)  # two more looks: nothing is told twice
            out.seek(0)
            return [json.loads(line) for line in out.read().splitlines() if line.startswith("{")]
        assert time.monotonic() < deadline, f"waited {timeout:.0f} s for {sorted(wanted)}; told: {told}"
        time.sleep(0.5)
