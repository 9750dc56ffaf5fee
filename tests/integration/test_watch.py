"""The hang detector headless: `cockpit watch` on the real local cluster, with a profile whose
`hang_after` is a few seconds, exits 5 and leaves the grouped stacks in a file; a job that ends before
any hang ends the watch with the job's status."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.harness.cluster import ClusterHandle
from tests.harness.hang_jobs import HungJob
from tests.harness.run import FinishedRun, run_cockpit

pytestmark = [pytest.mark.cluster]


def _submitted(done) -> str:  # type: ignore[no-untyped-def]
    assert done.returncode == 0, done.stderr
    found = re.search(r"^submitted (\S+)$", done.stdout, re.MULTILINE)
    assert found, done.stdout
    return found.group(1)


def test_watch_exits_5_on_a_hang_and_saves_the_stacks(hung_demo: HungJob, tmp_path: Path) -> None:
    # The session's demo-hang-fast job, submitted with `cockpit submit` and found hung: the watch starts
    # once the job hangs, so the 4 s cannot pass while its actors start.
    env = {**os.environ, **hung_demo.env}
    job = hung_demo.submission_id
    out = tmp_path / "evidence.json"
    done = run_cockpit("watch", "local", job, "--out", str(out), "--interval", "1", env=env, timeout=240)
    assert done.returncode == 5, done.stderr
    # The profile's policy was used: its regex and its 4 s.
    assert "progress is lines matching ^step=\\d+; a hang after 4s" in done.stderr
    assert re.search(r"hang: .*no progress for \d+ s", done.stderr), done.stderr
    doc = json.loads(out.read_text())
    assert doc["hang"].startswith(job) and "no progress for" in doc["hang"]
    stuck = [g for g in doc["groups"] if "wait_for_weights_sync" in g["label"]]
    assert len(stuck) == 1 and [m["actor_name"] for m in stuck[0]["members"]] == ["RolloutWorker_0"]
    waiting = next(g for g in doc["groups"] if g["label"] == "in ray.get in all_gather_weights")
    assert waiting["count"] == 3

    # The evidence is never overwritten: a second watch refuses the same file at once.
    again = run_cockpit("watch", "local", job, "--out", str(out), env=env)
    assert again.returncode == 1 and "exists already" in again.stderr


def test_watch_ends_with_the_job(finished_demo: FinishedRun, tmp_path: Path) -> None:
    job = _submitted(finished_demo.follow)
    watched = run_cockpit("watch", "local", job, "--hang-after", "1m", "--out", str(tmp_path / "x.txt"))
    assert watched.returncode == 1 and "has ended (SUCCEEDED)" in watched.stderr
    assert not (tmp_path / "x.txt").exists()


def test_watch_refuses_bad_flags_in_one_line(ray_cluster: ClusterHandle) -> None:
    bad = run_cockpit("watch", "local", "whatever", "--hang-after", "soon")
    assert bad.returncode == 1
    assert bad.stderr.strip().splitlines() == [
        "cockpit: --hang-after: 'soon' is not a duration (e.g. 90s, 10m, 1.5m, 1h30m, or 45 for seconds)."
    ]
