"""What feeds the hang watch: a job's policy from the profile its metadata names (a name only, never a
path: metadata is anyone's text), and only the job's own GPUs."""

from __future__ import annotations

from pathlib import Path

import pytest

from cockpit.core.doctor.hang import DEFAULT_HANG_AFTER, ProgressWatch, hang_policy
from cockpit.core.doctor.progress import gpu_readings, job_policy
from cockpit.core.snapshots import NA, GpuSample, JobRow, NodeSnapshot


def job(profile: str) -> JobRow:
    return JobRow(
        submission_id="s",
        job_id="02000000",
        type="SUBMISSION",
        status="RUNNING",
        entrypoint="python x.py",
        message="",
        start_time=None,
        end_time=None,
        metadata={"cockpit_profile": profile} if profile else {},
    )


def test_the_shipped_demo_hang_profile_gives_its_policy() -> None:
    policy, problem = job_policy(job("demo-hang"))
    assert problem == ""
    assert (
        policy.hang_after == 60.0 and policy.progress is not None and policy.progress.pattern == r"^step=\d+"
    )


def test_no_profile_is_the_default() -> None:
    assert job_policy(job("")) == (hang_policy(None), "")


@pytest.mark.parametrize(
    "name", ["/etc/passwd", "../profiles/demo.yaml", "demo.yaml", "x" * 300, "a b", "\x1b[31m"]
)
def test_a_path_or_odd_text_in_metadata_is_never_read(name: str) -> None:
    policy, problem = job_policy(job(name))
    assert policy.hang_after == DEFAULT_HANG_AFTER and policy.progress is None
    assert "is not a profile name" in problem and "root:" not in problem and "\n" not in problem


def test_an_unknown_profile_is_one_line_and_the_default() -> None:
    policy, problem = job_policy(job("no-such-profile-here"))
    assert policy == hang_policy(None)
    assert problem.startswith("profile no-such-profile-here: ") and "\n" not in problem


def test_the_config_s_hang_after_and_profile_dirs_are_what_the_caller_passes(tmp_path: Path) -> None:
    assert job_policy(job(""), hang_after=90.0)[0].hang_after == 90.0  # no profile: the config's
    assert job_policy(job("demo-hang"), hang_after=90.0)[0].hang_after == 60.0  # the profile's wins
    (tmp_path / "mine.yaml").write_text("entrypoint: x\nhang_after: 2m\n")
    assert job_policy(job("mine"), profile_dirs=[tmp_path]) == (hang_policy(None, 120.0), "")
    assert job_policy(job("mine"))[1].startswith("profile mine: no profile named 'mine'")


def node(node_id: str, utils: list[float | None], alive: bool = True) -> NodeSnapshot:
    gpus = tuple(
        GpuSample(index=i, name="H100", uuid=f"{node_id}-{i}", utilization=NA if u is None else u,
                  memory_used_mib=NA, memory_total_mib=NA, power_w=NA, temperature_c=NA, processes=())
        for i, u in enumerate(utils)
    )  # fmt: skip
    return NodeSnapshot(
        node_id=node_id,
        ip="10.0.0.1",
        hostname=node_id,
        is_head=False,
        state="ALIVE" if alive else "DEAD",
        state_message="",
        start_time=None,
        end_time=None,
        logical_cpus=8.0,
        logical_gpus=float(len(gpus)),
        gpus=gpus,
    )


def test_only_the_job_s_nodes_count() -> None:
    nodes = [node("a", [100.0, 100.0]), node("b", [3.0, None]), node("c", [50.0], alive=False)]
    assert gpu_readings(nodes, {"a"}) == [100.0, 100.0]
    assert gpu_readings(nodes, {"b", "c"}) == [3.0, None]
    assert gpu_readings(nodes, set()) == []


def test_time_the_cockpit_could_not_see_is_excused() -> None:
    watch = ProgressWatch(hang_policy(None, override=60.0), now=0.0)
    watch.excuse(50.0, now=70.0)
    assert not watch.verdict(70.0).hung  # 70 s quiet, 50 of them blind
    assert watch.verdict(111.0).hung
