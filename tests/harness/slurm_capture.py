"""Provides the captured Slurm outputs in tests/fixtures/slurm/: runs jobs in every state on a real
one-node Slurm (`tests.harness.slurm`) and writes what ``scontrol`` and ``squeue`` print for them, with a
README.md naming the exact command behind each file.

Run as root (about two minutes: the TIMEOUT job runs into its one-minute limit)::

    .venv/bin/python -m tests.harness.slurm_capture [OUTPUT_DIR]
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tests.harness.slurm import SlurmCluster, start_slurm

OUTPUT = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"
SQUEUE_FORMAT = "%i|%T|%r|%S|%e|%L|%N|%D"
TIMEOUT_WAIT_S = 180.0


class Capture:
    """Writes one output file per command and remembers its line for the README."""

    def __init__(self, cluster: SlurmCluster, output: Path) -> None:
        self.cluster = cluster
        self.output = output
        self.entries: list[str] = []

    def save(self, name: str, argv: list[str], what: str) -> str:
        result = self.cluster.run(*argv, check=False)
        text = result.stdout if result.returncode == 0 else result.stderr
        (self.output / name).write_text(text)
        shown = " ".join(f"'{arg}'" if any(c in arg for c in " |%") else arg for arg in argv)
        exit_note = "" if result.returncode == 0 else f" (exit {result.returncode}; the file is its stderr)"
        self.entries.append(f"| `{name}` | `{shown}`{exit_note} | {what} |")
        return text


def _wait_until(
    cluster: SlurmCluster, job_id: str, ready: Callable[[dict[str, str]], bool], timeout: float = 30.0
) -> None:
    """Poll the job's record until ``ready(record)``, for at most ``timeout`` seconds (then go on)."""
    deadline = time.monotonic() + timeout
    while not ready(cluster.show(job_id)) and time.monotonic() < deadline:
        time.sleep(0.1)


def capture(cluster: SlurmCluster, output: Path) -> list[str]:
    """Run the jobs and write the files; return the README's table rows."""
    out = cluster.jobs_dir
    c = Capture(cluster, output)
    sleeper = "sleep 600\n"

    timeout_job = cluster.sbatch(sleeper, "--time=1", "--job-name", "cockpit-timeout", "-o", f"{out}/%j.out")
    held = cluster.sbatch(sleeper, "--hold", "--time=30", "--job-name", "cockpit-held", "-o", f"{out}/%j.out")
    running = cluster.sbatch(
        'scontrol show hostnames "$SLURM_JOB_NODELIST"\n' + sleeper,
        "--gpus-per-node",
        "2",
        "--time",
        "10",
        "--job-name",
        "cockpit-run",
        "--comment",
        "ray head vm:8265",
        "--output",
        f"{out}/cockpit-run-%j.out",
    )
    cluster.wait_state(running, "RUNNING")
    completed = cluster.sbatch("echo done\n", "--job-name", "cockpit-done", "-o", f"{out}/%j.out")
    failing = "echo failing >&2\nexit 3\n"
    failed = cluster.sbatch(failing, "--job-name", "cockpit-exit3", "-o", f"{out}/%j.out")
    cluster.wait_state(completed, "COMPLETED")
    cluster.wait_state(failed, "FAILED")
    big = ["--gpus-per-node", "4", "--time", "5", "--job-name", "cockpit-big", "-o", f"{out}/%j.out"]
    resources = cluster.sbatch(sleeper, *big)
    priority = cluster.sbatch(sleeper, *big)
    # Backfill (every 2 s) plans the jobs: StartTime becomes its estimate. Right after, a job's reason
    # can read None until the main scheduler runs again.
    for job in (resources, priority):
        _wait_until(cluster, job, lambda record: record.get("StartTime", "Unknown")[:1].isdigit())
    _wait_until(cluster, resources, lambda record: record.get("Reason") == "Resources")

    show = ["scontrol", "show", "job", "-o"]
    c.save(
        "job_pending_resources.txt",
        [*show, resources],
        "PENDING, Reason=Resources (4 GPUs, 2 in use); StartTime/EndTime are backfill's plan, "
        "SchedNodeList its nodes",
    )
    c.save("job_pending_held.txt", [*show, held], "PENDING, held at submission (`sbatch --hold`)")
    c.save("job_pending_priority.txt", [*show, priority], "PENDING, Reason=Priority (behind the one above)")
    c.save(
        "job_running.txt",
        [*show, running],
        "RUNNING, `--gpus-per-node 2 --time 10 --job-name cockpit-run --comment 'ray head vm:8265'`",
    )
    c.save("job_running_detail.txt", ["scontrol", "-dd", "show", "job", "-o", running], "the same, `-dd`")
    c.save("job_completed.txt", [*show, completed], "COMPLETED (`echo done`)")
    c.save("job_failed.txt", [*show, failed], "FAILED, ExitCode=3:0 (`exit 3`)")
    pending_ids = f"{held},{resources},{priority}"
    start = ["squeue", "--start", "-h", "-o", SQUEUE_FORMAT]
    c.save("squeue_start_pending.txt", [*start, "-j", pending_ids], "the three pending jobs")
    c.save("squeue_start_running.txt", [*start, "-j", running], "a running job: `--start` lists nothing")
    c.save(
        "squeue_running.txt", ["squeue", "-h", "-o", SQUEUE_FORMAT, "-j", running], "the same without --start"
    )
    c.save(
        "squeue_name.txt",
        ["squeue", "-h", "-u", "root", "-n", "cockpit-big", "-o", "%i|%T|%V"],
        "two pending jobs of one name (squeue's default order, by priority; `%V` is the submit time)",
    )
    c.save(
        "squeue_running.json",
        ["squeue", "--json", "-j", running],
        "`squeue --json` works on 22.05 but ignores `-j`: every job the controller knows, ended ones too",
    )
    c.save("scontrol_json.txt", ["scontrol", "--json", "show", "job", running], "`scontrol --json` does not")

    cluster.cancel(held)
    cluster.cancel(running)
    cluster.wait_state(held, "CANCELLED")
    cluster.wait_state(running, "CANCELLED")
    c.save("job_cancelled.txt", [*show, running], "CANCELLED while RUNNING (`scancel`; the job above)")
    c.save("job_cancelled_pending.txt", [*show, held], "CANCELLED while held")
    c.save(
        "squeue_name_all_states.txt",
        ["squeue", "-h", "-t", "all", "-u", "root", "-n", "cockpit-run", "-o", "%i|%T|%V"],
        "`-t all` also lists ended jobs (without it, squeue shows pending and running ones only)",
    )
    c.save("job_unknown.txt", [*show, "999999"], "a job id the controller does not know")

    cluster.wait_state(timeout_job, "TIMEOUT", TIMEOUT_WAIT_S)
    c.save("job_timeout.txt", [*show, timeout_job], "TIMEOUT, Reason=TimeLimit (`--time=1`)")
    return c.entries


README_HEAD = """\
# Captured Slurm output

Real output of {version} (Debian 12), one node `{node}` (16 CPUs, `Gres=gpu:4`), no slurmdbd.
Written by `.venv/bin/python -m tests.harness.slurm_capture` as root; the jobs run as root in
`tests.harness.slurm`'s cluster. Each file is exactly the command's stdout (its stderr where it failed).
Job ids, times and temporary paths are the capture's own.

Where things are in `scontrol show job -o` (space-separated `Key=value`, values unquoted: `Comment=`
and `JobName=` may hold spaces, so a value runs to the next ` Key=`):

- node list: `NodeList=vm` (empty while pending; `SchedNodeList=` is backfill's plan); `BatchHost=`
  the first node, where the batch script runs
- node count: `NumNodes=1` (the request while pending)
- GPUs: `TresPerNode=gres:gpu:2` (from `--gpus-per-node 2` or `--gres=gpu:2`); the allocation only
  with `-dd`: `JOB_GRES=gpu:2` and, per node, `Nodes=vm CPU_IDs=1 Mem=0 GRES=gpu:2(IDX:0-1)`.
  `TRES=` has no `gres/gpu` here: that needs `AccountingStorageTRES=gres/gpu`, which slurmctld
  refuses without slurmdbd (sites with accounting show `gres/gpu=2` in `TRES=`)
- time limit: `TimeLimit=00:10:00` (`UNLIMITED` without `--time`; `D-HH:MM:SS` past a day)
- end time: `EndTime=` (the limit's end while running, backfill's estimate while planned, `Unknown`
  while held, the real end once ended); `RunTime=` so far
- reason: `Reason=` (`JobHeldUser`, `Resources`, `Priority`, `TimeLimit`, `NonZeroExitCode`, `None`;
  a pending job's can read `None` for a moment right after backfill plans it); the state in
  `JobState=`, the exit in `ExitCode=3:0` (code:signal)
- stdout path: `StdOut=` (`%j` expanded; `StdErr=` is the same file unless `--error` was given)
- comment: `Comment=ray head vm:8265` (absent when none was given)

`squeue --json` has them as `nodes`, `node_count`, `tres_per_node`, `gres_detail`, `time_limit`
(minutes), `end_time` (epoch seconds), `state_reason`, `standard_output` (`%j` not expanded) and
`comment`. `scontrol show job` of an unknown id, or of one that ended more than `MinJobAge` (here 600)
seconds ago, prints `slurm_load_jobs error: Invalid job id specified` on stderr and exits 1.

| File | Command | Shows |
|---|---|---|
"""


def write_readme(output: Path, cluster: SlurmCluster, rows: list[str]) -> None:
    version = cluster.run("sinfo", "--version").stdout.strip()
    head = README_HEAD.format(version=version, node=cluster.node)
    (output / "README.md").write_text(head + "\n".join(rows) + "\n")


def main() -> None:
    output = Path(sys.argv[1]) if len(sys.argv) > 1 else OUTPUT
    output.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="slurm-capture-"))
    with start_slurm(workdir) as cluster:
        rows = capture(cluster, output)
        write_readme(output, cluster, rows)
    shutil.rmtree(workdir)
    print(f"wrote {len(rows)} files and README.md to {output}")


if __name__ == "__main__":
    main()
