"""What feeds the hang watch: a job's policy from the profile its metadata names (a name only, never a
path: metadata is anyone's text; or the file this cockpit noted when it submitted the job), and only the
job's own GPUs."""

from __future__ import annotations

from pathlib import Path

import pytest

from cockpit.core.doctor.hang import DEFAULT_HANG_AFTER, ProgressWatch, hang_policy
from cockpit.core.doctor.progress import gpu_readings, job_metrics_format, job_policy
from cockpit.core.jobs.submitted import MAX_KEPT, profile_file, remember_profile
from cockpit.core.snapshots import NA, GpuSample, JobRow, NodeSnapshot


def job(profile: str, submission_id: str = "s") -> JobRow:
    return JobRow(
        submission_id=submission_id,
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


def test_a_profile_submitted_by_path_gives_its_policy_from_the_file_noted_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`cockpit submit TARGET ./runs/grpo.yaml`: that file is on no search path; the submitting cockpit
    noted it for the job's submission id, in the user's own state directory."""
    monkeypatch.setenv("COCKPIT_STATE_DIR", str(tmp_path / "state"))
    mine = tmp_path / "runs" / "grpo.yaml"
    mine.parent.mkdir()
    mine.write_text("entrypoint: x\nprogress: '^it=\\d+'\nhang_after: 2m\nmetrics: verl\n")
    assert job_policy(job("grpo", "raysubmit_a"))[1].startswith("profile grpo: no profile named 'grpo'")

    remember_profile("raysubmit_a", mine)
    policy, problem = job_policy(job("grpo", "raysubmit_a"))
    assert problem == "" and policy.hang_after == 120.0
    assert policy.progress is not None and policy.progress.pattern == r"^it=\d+"
    assert job_metrics_format(job("grpo", "raysubmit_a")) == ("verl", "")
    assert (tmp_path / "state" / "submitted-profiles.json").stat().st_mode & 0o777 == 0o600
    # Another job of the same name, or a file that no longer holds that profile: the search path.
    assert job_policy(job("grpo", "raysubmit_b"))[0] == hang_policy(None)
    mine.write_text("name: other\nentrypoint: x\nhang_after: 5m\n")
    assert job_policy(job("grpo", "raysubmit_a"))[0] == hang_policy(None)
    mine.unlink()
    assert profile_file("raysubmit_a") is None


def test_the_record_keeps_the_newest_and_survives_a_bad_file(tmp_path: Path) -> None:
    (tmp_path / "submitted-profiles.json").write_text("[not, a, mapping")
    assert profile_file("x", tmp_path) is None
    some = tmp_path / "p.yaml"
    some.write_text("entrypoint: x\n")
    for i in range(MAX_KEPT + 5):
        remember_profile(f"j{i}", some, tmp_path)
    assert profile_file("j0", tmp_path) is None and profile_file(f"j{MAX_KEPT + 4}", tmp_path) == some
    assert profile_file("j5", tmp_path) == some


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
