"""`cockpit metrics` on the real local cluster: the demo job's CSV equals the `step=` lines its driver
printed (read independently from `cockpit logs`), `--json` has the demo's keys (both on the session's
finished demo run), `--follow` gives the steps of a running job as they are printed and ends when the
job does, and `--phases` gives a real job's step anatomy as its driver printed it.

The follow test uses the demo-hang job: it prints its first steps, then hangs for good, so the steps
seen came while the job was still running, whatever the machine's speed; stopping it must end the
command.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import queue
import re
import shlex
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

from tests.harness.cluster import ClusterHandle
from tests.harness.debug_jobs import _stop, wait_status
from tests.harness.hang_jobs import demo_hang_job
from tests.harness.run import FinishedRun, run_cockpit
from tests.unit.test_metrics_phases import verl_step

pytestmark = [pytest.mark.cluster]

DEMO_LINE = re.compile(r"^step=(\d+) reward=(\S+) kl=(\S+) throughput=(\S+) tok/s$", re.MULTILINE)
"""The demo driver's own line (cockpit/demo/trainer.py), read here without the cockpit's parser."""
COLUMNS = ["reward", "kl", "throughput"]


def printed(job: str) -> dict[int, list[float]]:
    """Step -> [reward, kl, throughput] as the demo's driver printed them (its log via `cockpit logs`)."""
    done = run_cockpit("logs", "local", job, "--lines", "100000")
    assert done.returncode == 0, done.stderr
    return {int(m.group(1)): [float(v) for v in m.groups()[1:]] for m in DEMO_LINE.finditer(done.stdout)}


def csv_rows(text: str) -> tuple[list[str], dict[int, list[float]]]:
    rows = list(csv.reader(io.StringIO(text)))
    return rows[0], {int(row[0]): [float(v) for v in row[1:]] for row in rows[1:]}


def test_csv_equals_what_the_demo_printed(finished_demo: FinishedRun) -> None:
    job = finished_demo.submission_id
    expected = printed(job)
    assert finished_demo.steps == 6 and sorted(expected) == [1, 2, 3, 4, 5, 6]
    done = run_cockpit("metrics", "local", job, "--csv")
    assert done.returncode == 0, done.stderr
    header, rows = csv_rows(done.stdout)
    assert header == ["step", *COLUMNS]
    assert rows == expected


def test_json_has_the_demos_keys_and_every_step(finished_demo: FinishedRun) -> None:
    job = finished_demo.submission_id
    done = run_cockpit("metrics", "local", job, "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert list(doc) == COLUMNS
    expected = printed(job)
    for index, key in enumerate(COLUMNS):
        assert doc[key] == [[step, values[index]] for step, values in sorted(expected.items())]
    table = run_cockpit("metrics", "local", job, "--keys", "kl")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split()[0] == "KEY" and [line.split()[0] for line in lines[1:]] == ["kl"]
    assert lines[1].split()[1:3] == ["1-6", "6"]  # steps, count


def test_unknown_job_and_bad_flags_are_one_line(ray_cluster: ClusterHandle) -> None:
    missing = run_cockpit("metrics", "local", "no-such-job")
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines() == [
        "cockpit: no job no-such-job on the cluster (`cockpit jobs TARGET` lists them)."
    ]
    bad = run_cockpit("metrics", "local", "whatever", "--format", "step=(\\d+)")
    assert bad.returncode == 1 and len(bad.stderr.strip().splitlines()) == 1
    assert bad.stderr.startswith(
        "cockpit: --format: not a format (auto, verl, nemo_rl, rlinf, demo, generic)"
    )


def test_follow_gives_steps_while_the_job_runs_and_ends_with_it(ray_cluster: ClusterHandle) -> None:
    hang_at = 4
    with demo_hang_job(ray_cluster, hang_at_step=hang_at) as job:
        command = [sys.executable, "-m", "cockpit.cli", "metrics", "local", job.submission_id, "--csv", "-f"]
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines: queue.Queue[str] = queue.Queue()
        reader = threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout or ()], daemon=True)
        reader.start()
        try:
            got: list[str] = []
            try:
                while len(got) < hang_at:  # the header and steps 1..3
                    got.append(lines.get(timeout=120))
            except queue.Empty:
                proc.kill()
                said = proc.stderr.read() if proc.stderr else ""
                raise AssertionError(
                    f"120 s after {got!r}, nothing more; its stderr: {said[-3000:]!r}"
                ) from None
            header, rows = csv_rows("".join(got))
            assert header == ["step", *COLUMNS] and sorted(rows) == [1, 2, 3]

            async def status() -> str:
                async with ray_cluster.client() as client:
                    return (await client.job(job.submission_id)).status

            # The job hangs at step 4 for good: those steps came while it ran, and it runs still.
            assert asyncio.run(status()) == "RUNNING"
            assert proc.poll() is None
            _stop(ray_cluster, job.submission_id)
            code = proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        reader.join(timeout=10)
        assert proc.stderr is not None
        stderr = proc.stderr.read()
        assert code == 1, stderr
        assert f"cockpit: job {job.submission_id} STOPPED" in stderr
        rest = []
        while not lines.empty():
            rest.append(lines.get())
        assert rest == []  # nothing after the hang
        assert rows == printed(job.submission_id)


def test_phases_of_a_real_job_are_the_seconds_it_printed(ray_cluster: ClusterHandle, tmp_path: Path) -> None:
    """A job on the local cluster whose driver prints verl's step lines (`timing_s/*`, as verl's
    TaskRunner writes them: tests/unit/test_metrics_phases.py), read back by `cockpit metrics local JOB
    --phases --json` from its real driver log: each step's phases are the seconds printed, to the digit."""
    steps = {step: 20.0 + step for step in range(1, 7)}
    text = "".join(verl_step(step, gen, save=4.0 if step == 5 else None) for step, gen in steps.items())
    lines = tmp_path / "verl.log"
    lines.write_text(text)
    program = f"import sys; sys.stdout.write(open({str(lines)!r}).read()); sys.stdout.flush()"
    submission_id = f"cockpit-test-phases-{uuid.uuid4().hex[:8]}"
    request = {
        "entrypoint": f"{sys.executable} -c {shlex.quote(program)}",
        "submission_id": submission_id,
        "entrypoint_num_cpus": 0,
    }

    async def finished() -> str:  # (a driver that never calls ray.init has no Ray job id: not waited for)
        async with ray_cluster.client() as client:
            await client.submit_job(request)
            return str((await wait_status(client, submission_id)).status)

    assert asyncio.run(finished()) == "SUCCEEDED"
    done = run_cockpit("metrics", "local", submission_id, "--phases", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["framework"] == "verl" and [s["step"] for s in doc["steps"]] == list(steps)
    for step in doc["steps"]:
        printed = {
            key.removeprefix("timing_s/"): float(value.removeprefix("np.float64(").rstrip(")"))
            for key, value in (
                part.split(":", 1) for part in text.splitlines()[step["step"] - 1].split(" - ")[1:]
            )
            if key.startswith("timing_s/") and key not in ("timing_s/step", "timing_s/start_profile")
        }
        assert step["phases"] == printed and step["total_printed"] is True
    assert doc["checkpoints"]["last_step"] == 5 and doc["steps"][4]["phases"]["save_checkpoint"] == 4.0
