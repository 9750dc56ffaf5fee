"""Unit tests of what the cockpit reads of a Slurm job (`scontrol show job -o` lines captured from the real
Slurm 22.05 the integration tests run), the `slurm:` TARGET, and the sbatch script of `cockpit slurm up`."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cockpit.core.errors import CockpitError
from cockpit.core.logs.sources import LocalFileTail
from cockpit.core.slurm import queue as slurm
from cockpit.core.slurm.script import SlurmRequest, job_token, ray_has_token_auth, render
from cockpit.core.targets import TargetError, parse_target

LINES = Path(__file__).parents[1] / "fixtures" / "slurm-lines"


def line(job_id: int) -> str:
    return (LINES / f"job-{job_id}.txt").read_text()


def test_a_failed_job_says_why_and_where_its_output_is() -> None:
    job = slurm.parse_job(line(3))
    assert (job.job_id, job.name, job.state, job.reason) == ("3", "early", "FAILED", "NonZeroExitCode")
    assert job.ended and not job.waiting and not job.running
    assert job.exit_code == "3:0" and job.stdout == "/tmp/slurmtry/slurm-3.out"
    assert job.describe() == "slurm job 3 (early) ended: FAILED: NonZeroExitCode, exit code 3:0"
    error = slurm.SlurmNotRunning(job)
    assert error.ended and str(error).endswith("; its output: /tmp/slurmtry/slurm-3.out")


def test_a_job_on_its_way_out_is_ending_not_running() -> None:
    job = slurm.parse_job(line(4))
    assert job.state == "COMPLETING" and job.ending and not job.ended and not job.running
    assert slurm.SlurmNotRunning(job).ended  # nothing to wait for
    assert job.describe() == "slurm job 4 (held2) is ending (COMPLETING)"
    assert job.dashboard_port == 59763  # what `cockpit slurm up`'s script wrote in the comment
    assert job.gpus == 2 and job.gpus_per_node == 2.0  # from TresPerNode=gres:gpu:2 (TRES lacks gres/gpu)
    assert job.time_limit == 30 * 60 and job.node_list == "vm" and job.num_nodes == 1


def test_a_pending_job_with_spaces_in_its_name_and_comment() -> None:
    job = slurm.parse_job(line(5))
    assert job.name == "my run x" and job.comment == "note cockpit:dashboard_port=8300"
    assert job.dashboard_port == 8300
    assert job.waiting and job.reason == "Resources" and job.start_time is None and job.node_list == ""
    assert job.time_limit == (24 + 2) * 3600
    assert job.describe() == "slurm job 5 (my run x) PENDING: Resources"
    assert job.queue_line() == "PENDING (Resources)"
    assert job.seconds_left(0) is None


CAPTURED = Path(__file__).parents[1] / "fixtures" / "slurm"


@pytest.mark.parametrize(
    ("name", "state", "ended", "waiting"),
    [
        ("job_pending_held", "PENDING", False, True),
        ("job_pending_priority", "PENDING", False, True),
        ("job_pending_resources", "PENDING", False, True),
        ("job_running", "RUNNING", False, False),
        ("job_running_detail", "RUNNING", False, False),
        ("job_completed", "COMPLETED", True, False),
        ("job_failed", "FAILED", True, False),
        ("job_cancelled", "CANCELLED", True, False),
        ("job_cancelled_pending", "CANCELLED", True, False),
        ("job_timeout", "TIMEOUT", True, False),
    ],
)
def test_every_captured_state_reads_right(name: str, state: str, ended: bool, waiting: bool) -> None:
    text = (CAPTURED / f"{name}.txt").read_text()
    job = slurm.parse_job(next(ln for ln in text.splitlines() if ln.startswith("JobId=")))
    assert (job.state, job.ended, job.waiting) == (state, ended, waiting)
    assert job.describe().startswith(f"slurm job {job.job_id} ")
    if job.running:
        assert job.node_list and job.end_time and job.time_limit == 600 and job.gpus == 2
        assert job.seconds_left(job.end_time - 60) == 60


def test_walltime_left_counts_down_to_the_end_time() -> None:
    job = slurm.SlurmJob(job_id="9", state="RUNNING", time_limit=3600, start_time=1000.0, end_time=4600.0)
    assert job.seconds_left(1000.0) == 3600 and job.seconds_left(4000.0) == 600
    assert job.seconds_left(9999.0) == 0.0


@pytest.mark.parametrize(
    ("comment", "port"),
    [
        ("cockpit:dashboard_port=8265", 8265),
        ("x cockpit:dashboard_port=70000", None),  # not a port
        ("mycockpit:dashboard_port=8265", None),  # not our key
        ("cockpit:dashboard_port=8265x", None),
        ("", None),
    ],
)
def test_the_dashboard_port_comes_only_from_our_own_note(comment: str, port: int | None) -> None:
    assert slurm.SlurmJob(job_id="1", comment=comment).dashboard_port == port


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("UNLIMITED", None),
        ("", None),
        ("00:10:00", 600),
        ("10:00", 600),  # MM:SS
        ("5", 300),  # minutes
        ("1-00:00:00", 86400),
        ("2-03", 2 * 86400 + 3 * 3600),  # D-HH
        ("1-02:03", 86400 + 2 * 3600 + 180),  # D-HH:MM
        ("garbage", None),
    ],
)
def test_time_limits_in_every_form_sbatch_takes(text: str, seconds: float | None) -> None:
    assert slurm.parse_duration(text) == seconds


@given(st.integers(0, 30), st.integers(0, 23), st.integers(0, 59), st.integers(0, 59))
def test_a_printed_time_limit_reads_back(days: int, hours: int, minutes: int, seconds: int) -> None:
    printed = (
        f"{days}-{hours:02d}:{minutes:02d}:{seconds:02d}"
        if days
        else f"{hours:02d}:{minutes:02d}:{seconds:02d}"
    )
    assert slurm.parse_duration(printed) == ((days * 24 + hours) * 60 + minutes) * 60 + seconds


@given(st.text(max_size=300))
def test_any_text_parses_or_is_one_clear_error(text: str) -> None:
    try:
        job = slurm.parse_job(text)
    except slurm.SlurmError as exc:
        assert "no job description" in str(exc)
    else:
        assert job.job_id and job.describe().startswith("slurm job ")


def test_job_ids_and_names() -> None:
    assert slurm.is_job_id("123") and slurm.is_job_id("123_4") and slurm.is_job_id("7+1")
    assert not slurm.is_job_id("grpo-math") and not slurm.is_job_id("12a")


def test_slurm_targets() -> None:
    target = parse_target("slurm:123456")
    assert (target.kind, target.slurm_job, target.raw) == ("slurm", "123456", "slurm:123456")
    assert parse_target("slurm:grpo-qwen").slurm_job == "grpo-qwen"
    for bad in ("slurm:", "slurm:a b", "slurm:../x", "slurm:'x'"):
        with pytest.raises(TargetError, match="slurm:JOBID"):
            parse_target(bad)
    assert parse_target("ssh:slurm:22").kind == "ssh"  # a host named slurm, on port 22


def test_bootstrap_logs_are_the_output_file_and_ray_sub_logs(tmp_path: Path) -> None:
    (tmp_path / "77-logs").mkdir()
    for name in ("ray-driver.log", "ray-worker-1.log", "notes.txt"):
        (tmp_path / "77-logs" / name).write_text("x\n")
    job = slurm.SlurmJob(
        job_id="77",
        stdout=str(tmp_path / "slurm-77.out"),
        stderr=str(tmp_path / "slurm-77.out"),
        work_dir=str(tmp_path),
    )
    assert [p.name for p in job.bootstrap_logs()] == ["slurm-77.out", "ray-driver.log", "ray-worker-1.log"]


def test_output_tail_is_bounded(tmp_path: Path) -> None:
    out = tmp_path / "slurm-1.out"
    out.write_text("".join(f"line {i}\n" for i in range(100_000)))
    job = slurm.SlurmJob(job_id="1", stdout=str(out), state="FAILED")
    assert slurm.output_tail(job, lines=3) == ["line 99997", "line 99998", "line 99999"]
    assert slurm.output_tail(slurm.SlurmJob(job_id="1", stdout=str(tmp_path / "none")), lines=3) == []


# -- the sbatch script ---------------------------------------------------------------------------


def request(**changes: object) -> SlurmRequest:
    base: dict[str, object] = {
        "profile": Path("/shared/profiles/my grpo.yaml"),
        "profile_name": "grpo",
        "nodes": 4,
        "gpus_per_node": 8,
    }
    base.update(changes)
    return SlurmRequest(**base)  # type: ignore[arg-type]


def test_the_script_asks_slurm_for_the_shape_and_is_valid_bash(tmp_path: Path) -> None:
    script = render(request(partition="gpu", account="proj", time="4:00:00"), tokens=tmp_path)
    directives = [ln for ln in script.splitlines() if ln.startswith("#SBATCH")]
    assert directives == [
        "#SBATCH --job-name=cockpit-grpo",
        "#SBATCH --nodes=4",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --comment=cockpit:dashboard_port=pending",
        "#SBATCH --gpus-per-node=8",
        "#SBATCH --partition=gpu",
        "#SBATCH --account=proj",
        "#SBATCH --time=4:00:00",
    ]
    assert not re.search(r"@[A-Z_]+@", script)  # every placeholder filled
    assert "PROFILE='/shared/profiles/my grpo.yaml'" in script
    assert "--dashboard-host=127.0.0.1" in script and "RAY_AUTH_MODE=token" in script
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)


def test_without_token_auth_no_token_is_made() -> None:
    script = render(request(gpus_per_node=0), tokens=None)
    assert "TOKENS=''" in script and "#SBATCH --gpus-per-node" not in script
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)


@given(
    st.lists(
        st.text(
            alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=20
        ),
        max_size=4,
    )
)
def test_overrides_reach_the_job_exactly_as_typed(overrides: list[str]) -> None:
    """Quotes, `$(...)`, spaces and newlines in an override are data in the script, never code."""
    script = render(request(overrides=tuple(overrides)), tokens=None)
    array = next(ln for ln in script.splitlines(keepends=False) if ln.startswith("OVERRIDES=("))
    start = script.index(array)
    end = script.index("\nGPUS_PER_NODE=", start)
    printed = subprocess.run(
        ["bash", "-c", script[start:end] + '\nfor o in "${OVERRIDES[@]}"; do printf "%s\\0" "$o"; done'],
        capture_output=True,
        check=True,
    ).stdout
    assert printed.split(b"\0")[:-1] == [o.encode() for o in overrides]


def test_a_newline_in_a_directive_is_refused() -> None:
    """A job name with a newline would end its #SBATCH line inside the quotes: bash would run the rest."""
    with pytest.raises(CockpitError, match="job-name: control characters are not allowed"):
        render(request(job_name="x\ntouch /tmp/PWNED #"), tokens=None)
    with pytest.raises(CockpitError, match="control characters"):
        render(request(profile_name="grpo\rx"), tokens=None)


def test_a_name_or_comment_posing_as_fields_is_seen() -> None:
    real = line(5)
    assert not slurm.repeated_keys(real)
    forged = real.replace("JobName=my run x ", "JobName=x JobState=RUNNING NodeList=evil.example.org ")
    assert slurm.repeated_keys(forged)
    assert slurm.repeated_keys(real.replace("Comment=note", "Comment=x StdOut=/etc/shadow"))


def test_the_port_is_pending_until_the_script_writes_it() -> None:
    starting = slurm.SlurmJob(job_id="1", state="RUNNING", comment="cockpit:dashboard_port=pending")
    assert starting.port_pending and starting.dashboard_port is None
    assert not slurm.SlurmJob(job_id="1", comment="cockpit:dashboard_port=8301").port_pending


def test_token_auth_since_ray_2_52(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert ray_has_token_auth("2.52.0") and ray_has_token_auth("2.60.1") and ray_has_token_auth("3.0.0")
    assert not ray_has_token_auth("2.47.1") and not ray_has_token_auth("2.43.0")
    monkeypatch.setenv("COCKPIT_STATE_DIR", str(tmp_path))
    (tmp_path / "slurm" / "42").mkdir(parents=True)
    (tmp_path / "slurm" / "42" / "token").write_text("tok\n")
    assert job_token("42") == "tok" and job_token("43") is None and job_token("../42") is None


async def test_a_local_file_is_followed_from_its_last_lines(tmp_path: Path) -> None:
    path = tmp_path / "slurm-1.out"
    path.write_bytes(b"one\ntwo\nthree\n")
    events: list[str] = []
    tail = LocalFileTail(str(path), lines=2, on_event=events.append, interval=0.01)
    chunks = tail.chunks()
    assert await anext(chunks) == b"two\nthree\n"
    with path.open("ab") as handle:
        handle.write(b"four\n")
    assert await anext(chunks) == b"four\n"
    path.write_bytes(b"new\n")  # replaced by a shorter file
    assert await anext(chunks) == b"new\n"
    assert any("replaced" in e for e in events)
    await chunks.aclose()
