"""The one hang watch (`cockpit.core.doctor.watch.HangWatch`) that `cockpit watch` and the TUI's hang feed
both feed: the driver log as bytes cut anywhere, where the job runs (its nodes, its actors' roles) and the
nodes' GPU readings. The same inputs give the same verdict, the straggler hint included (it no longer
needs the TUI's GPU fleet)."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cockpit.core.doctor.hang import HangPolicy, hang_policy
from cockpit.core.doctor.progress import JobPlace, role_readings
from cockpit.core.doctor.watch import HangWatch
from cockpit.core.snapshots import NA, GpuProcess, GpuSample, JobRow, NodeSnapshot

JOB = JobRow(
    submission_id="raysubmit_1",
    job_id="02000000",
    type="SUBMISSION",
    status="RUNNING",
    entrypoint="python train.py",
    message="",
    start_time=1.0,
    end_time=None,
    driver_node_id="head",
)


def node(
    node_id: str, ip: str, gpus: list[tuple[float | None, tuple[int, ...]]], alive: bool = True
) -> NodeSnapshot:
    """A node whose GPUs have these (utilization, pids on it)."""
    samples = tuple(
        GpuSample(index=i, name="H100", uuid=f"{node_id}-{i}", utilization=NA if u is None else u,
                  memory_used_mib=NA, memory_total_mib=NA, power_w=NA, temperature_c=NA,
                  processes=tuple(GpuProcess(pid=p, memory_mib=NA, utilization=NA) for p in pids))
        for i, (u, pids) in enumerate(gpus)
    )  # fmt: skip
    return NodeSnapshot(
        node_id=node_id,
        ip=ip,
        hostname=node_id,
        is_head=node_id == "head",
        state="ALIVE" if alive else "DEAD",
        state_message="",
        start_time=None,
        end_time=None,
        logical_cpus=8.0,
        logical_gpus=float(len(samples)),
        gpus=samples,
    )


PLACE = JobPlace(
    nodes=frozenset({"head", "w1"}),
    roles={("head", 101): "rollout", ("head", 102): "rollout", ("w1", 201): "policy"},
)


def nodes(rollout: float, policy: float) -> list[NodeSnapshot]:
    return [
        node("head", "10.0.0.1", [(rollout, (101,)), (rollout, (102,))]),
        node("w1", "10.0.0.2", [(policy, (201,))]),
        node("other", "10.0.0.3", [(100.0, (999,))]),  # another job's GPU: never this job's progress
    ]


LOG = b"".join(f"step={i} reward=0.{i}\n".encode() for i in range(40)) + b"waiting for weights\n"


@given(cuts=st.lists(st.integers(min_value=0, max_value=len(LOG)), max_size=30))
def test_the_log_cut_anywhere_gives_the_verdict_of_its_lines(cuts: list[int]) -> None:
    policy = HangPolicy(hang_after=60.0, progress=re.compile(r"^step=\d+"))
    whole, cut = HangWatch(JOB, policy, 0.0), HangWatch(JOB, policy, 0.0)
    whole.feed_log(LOG, 10.0)
    bounds = [0, *sorted(cuts), len(LOG)]
    for low, high in itertools.pairwise(bounds):
        cut.feed_log(LOG[low:high], 10.0)
    assert cut.check([], 30.0) == whole.check([], 30.0)
    assert whole.check([], 30.0).last_progress == "step=39 reward=0.39"


def test_a_line_is_judged_once_it_ends() -> None:
    watch = HangWatch(JOB, HangPolicy(hang_after=60.0, progress=re.compile(r"step=\d+")), 0.0)
    watch.feed_log(b"step=1 half a li", 5.0)
    assert watch.check([], 70.0).hung  # no complete line yet
    watch.feed_log(b"ne\n", 80.0)
    verdict = watch.check([], 80.0)
    assert not verdict.hung and verdict.last_progress == "step=1 half a line"


def test_only_the_job_s_gpus_and_its_roles_count() -> None:
    assert role_readings(nodes(rollout=0.0, policy=90.0), PLACE) == {"rollout": [0.0, 0.0], "policy": [90.0]}
    # Raylets on one host share its GPUs and pids: an actor of `head` found on a sibling's GPU rows.
    head, sibling = node("head", "10.0.0.1", []), node("head-2", "10.0.0.1", [(55.0, (101,))])
    assert role_readings([head, sibling], JobPlace(nodes=frozenset({"head-2"}), roles=PLACE.roles)) == {
        "rollout": [55.0]
    }
    assert role_readings(nodes(0.0, 90.0), JobPlace(nodes=frozenset({"head"}))) == {}


def test_the_straggler_hint_comes_from_the_nodes_and_the_place() -> None:
    """What the CLI has (node readings, the job's actors) is enough: no GPU fleet needed."""
    watch = HangWatch(JOB, hang_policy(None, override=600.0), 0.0)
    watch.placed(PLACE, 0.0)
    for second in range(1, 5):
        watch.feed_log(f"step={second}\n".encode(), float(second))
        verdict = watch.check(nodes(rollout=0.0, policy=90.0), float(second))
    assert not verdict.hung
    assert verdict.straggler == "straggler? rollout GPUs at 0 % while policy's are at 90 %"


def test_unplaced_the_driver_s_node_is_the_job_s() -> None:
    watch = HangWatch(JOB, hang_policy(None, override=60.0), 0.0)
    assert watch.place.nodes == {"head"} and watch.needs_place(0.0)
    watch.placed(PLACE, 1.0)
    assert not watch.needs_place(30.0) and watch.needs_place(61.0)


def test_gpu_movement_is_progress_and_another_job_s_gpus_are_not() -> None:
    watch = HangWatch(JOB, hang_policy(None, override=60.0), 0.0)
    watch.placed(JobPlace(nodes=frozenset({"w1"})), 0.0)
    watch.check(nodes(rollout=0.0, policy=10.0), 10.0)
    watch.check(nodes(rollout=90.0, policy=80.0), 50.0)  # w1 moved: progress at 50
    assert not watch.check(nodes(rollout=0.0, policy=80.0), 100.0).hung
    verdict = watch.check(nodes(rollout=50.0, policy=80.0), 111.0)  # head moved, but it is not w1
    assert verdict.hung and "1 GPU at" in verdict.line


@pytest.mark.parametrize("blind_for", [30.0, 55.0])
def test_time_blind_is_not_silence(blind_for: float) -> None:
    watch = HangWatch(JOB, hang_policy(None, override=60.0), 0.0)
    assert watch.blind(10.0) and not watch.blind(20.0)  # said once
    assert not watch.check([], 10.0 + blind_for).hung  # seeing again: the time blind excused
    assert not watch.seeing(10.0 + blind_for)
    assert watch.check([], 70.0 + blind_for).hung


def test_two_watches_fed_alike_agree() -> None:
    """`cockpit watch` and the TUI feed one HangWatch each with what they read: the same verdict."""
    policy = hang_policy(None, override=20.0)
    cli, tui = HangWatch(JOB, policy, 0.0), HangWatch(JOB, policy, 0.0)
    for watch in (cli, tui):
        watch.placed(PLACE, 0.0)
    script: list[tuple[float, bytes, float, float]] = [
        (5.0, b"step=1\nstep=2\n", 40.0, 0.0),
        (10.0, b"step=3\n", 41.0, 0.0),
        (15.0, b"", 40.0, 0.0),
        (30.0, b"", 40.0, 0.0),
        (45.0, b"", 40.0, 0.0),
    ]
    for now, chunk, policy_util, rollout_util in script:
        verdicts = []
        for watch in (cli, tui):
            watch.feed_log(chunk, now)
            verdicts.append(watch.check(nodes(rollout=rollout_util, policy=policy_util), now))
        assert verdicts[0] == verdicts[1]
    assert verdicts[0].hung and "no progress for 35 s · 3 GPUs at 13 % mean" in verdicts[0].line
