"""The one rule for "the newest running job" (`cockpit.core.snapshots`): the driver-log pane, the training
curves, the hang watch and the Logs screen all follow the job it picks."""

from __future__ import annotations

import random

from cockpit.core.snapshots import JobRow, job_to_show, newest_running, running_jobs


def job(
    key: str,
    status: str = "RUNNING",
    start: float | None = 100.0,
    driver: str = "n1",
    submission: bool = True,
) -> JobRow:
    return JobRow(
        submission_id=key if submission else "",
        job_id=f"id-{key}",
        type="SUBMISSION" if submission else "DRIVER",
        status=status,
        entrypoint="python x.py",
        message="",
        start_time=start,
        end_time=None,
        driver_node_id=driver,
    )


def test_the_newest_running_job_with_a_driver_log() -> None:
    jobs = [
        job("old", start=10.0),
        job("new", start=30.0),
        job("pending", status="PENDING", start=50.0),
        job("no-driver-yet", start=60.0, driver=""),
        job("ended", status="SUCCEEDED", start=70.0),
        job("plain-driver", start=80.0, submission=False),  # `ray.init` from a shell: no driver-log file
        job("unknown-start", start=None),
    ]
    assert newest_running(jobs) == jobs[1]
    assert [j.key for j in running_jobs(jobs)] == ["new", "old", "unknown-start"]


def test_nothing_running_is_none_and_the_view_falls_back_to_the_newest_log() -> None:
    jobs = [
        job("a", status="SUCCEEDED", start=10.0),
        job("b", status="FAILED", start=20.0),
        job("c", driver=""),
    ]
    assert newest_running(jobs) is None and running_jobs(jobs) == []
    assert job_to_show(jobs) == jobs[1]  # the newest with a driver log, ended or not
    assert job_to_show([job("c", status="PENDING", driver="")]) is None
    assert job_to_show([]) is None


def test_a_running_job_wins_over_a_newer_ended_one() -> None:
    jobs = [job("running", start=10.0), job("ended", status="STOPPED", start=20.0)]
    assert job_to_show(jobs) == jobs[0]


def test_every_caller_picks_the_same_job_whatever_the_order() -> None:
    """Two jobs started in the same second: the order the dashboard lists them in does not matter."""
    jobs = [job("b", start=5.0), job("a", start=5.0), job("c", start=4.0)]
    for seed in range(20):
        shuffled = jobs[:]
        random.Random(seed).shuffle(shuffled)
        assert newest_running(shuffled) is jobs[0]
        assert [j.key for j in running_jobs(shuffled)] == ["b", "a", "c"]
