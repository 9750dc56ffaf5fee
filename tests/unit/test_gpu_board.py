"""The GPU board on captured dashboard JSON (AMD without temperature, logical GPUs) and synthetic cases."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from cockpit.core.actors.roles import role_of
from cockpit.core.cluster import parse
from cockpit.core.gpu.board import FORGET_EVERY, GpuBoard, GpuFleet, is_stale
from cockpit.core.gpu.history import HISTORY_SECONDS, HOLD_SECONDS, UtilHistory
from cockpit.core.snapshots import NA, ActorRow, GpuSample, Metric, NodeSnapshot
from tests.harness.synthetic import T0, synthetic_actors, synthetic_nodes

SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "ray-2.60-samples"


def summary_nodes() -> tuple[NodeSnapshot, ...]:
    doc = json.loads((SAMPLES / "nodes_summary_fakeamd.json").read_text())
    return tuple(parse.node_from_summary(entry) for entry in doc["data"]["summary"])


def amd_trainer(node: NodeSnapshot) -> ActorRow:
    """The actor of `logical_actor_amd.json` (pid 11500 on the fake AMD node), as /api/v0/actors gives it."""
    return ActorRow(
        actor_id="79ef4f962a2b75b8163b4e6405000000",
        class_name="AmdTrainer",
        name="amd_trainer",
        state="ALIVE",
        job_id="05000000",
        node_id=node.node_id,
        pid=11500,
        num_restarts=0,
        required_resources={"GPU": 1.0, "CPU": 0.1},
    )


def fleet_of(nodes: tuple[NodeSnapshot, ...], actors: list[ActorRow] = (), job: bool = True) -> GpuFleet:  # type: ignore[assignment]
    board = GpuBoard()
    board.ingest_actors(actors)
    board.ingest_nodes(nodes, job_running=job, local_time=T0)
    return board.fleet()


def test_captured_amd_node_logical_nodes_and_actor_by_pid() -> None:
    nodes = summary_nodes()
    amd = next(n for n in nodes if n.gpus)
    fleet = fleet_of(nodes, [amd_trainer(amd)])
    amd_rows = [r for r in fleet.rows if r.node is amd]
    assert [r.gpu_index for r in amd_rows] == [0, 1]
    first = amd_rows[0]
    assert first.gpu is not None and first.source == "dashboard"
    assert first.gpu.temperature_c is NA  # AMD reports none: N/A, never 0 °C
    assert first.gpu.utilization == 37.0 and first.gpu.power_w == 412.0
    (actor,) = fleet.actors_on(first)
    assert actor.class_name == "AmdTrainer" and actor.label == "AmdTrainer amd_trainer (policy)"
    assert fleet.actors_on(amd_rows[1]) == ()  # no process on GPU 1
    # The other nodes have logical GPUs only: rows without telemetry, never zeros.
    logical = [r for r in fleet.rows if r.node is not amd]
    assert logical and all(r.gpu is None and r.source == "none" for r in logical)
    assert len(logical) == sum(int(n.logical_gpus) for n in nodes if n is not amd and n.alive)
    assert fleet.totals.no_telemetry == len(logical)
    assert fleet.totals.with_telemetry == 2
    assert fleet.totals.mean_utilization == pytest.approx((37 + 0) / 2)
    assert fleet.totals.idle == 1  # GPU 1 at 0 %
    # The actor holds a GPU on its node: listed as a holder there.
    assert [a.name for a in fleet.gpu_actors[amd.node_id]] == ["amd_trainer"]


def test_null_and_minus_one_utilization_are_na() -> None:
    entry = {"index": 0, "name": "x", "uuid": "u", "utilizationGpu": -1, "memoryUsed": 1, "memoryTotal": 2}
    assert parse.gpu_sample(entry).utilization is NA
    entry["utilizationGpu"] = None
    assert parse.gpu_sample(entry).utilization is NA
    node = NodeSnapshot(
        node_id="n1", ip="10.0.0.1", hostname="h", is_head=True, state="ALIVE", state_message="",
        start_time=T0, end_time=None, logical_cpus=1, logical_gpus=1,
        gpus=(parse.gpu_sample(entry),), sample_time=T0,
    )  # fmt: skip
    fleet = fleet_of((node,))
    assert fleet.totals.mean_utilization is NA and fleet.totals.idle == 0
    assert not fleet.idle(fleet.rows[0])


def test_mig_slices_are_rows_of_their_own() -> None:
    slices = tuple(
        GpuSample(index=i, name=f"NVIDIA A100 MIG {i % 1000}", uuid=f"MIG-{i}", utilization=10.0 * (i % 1000),
                  memory_used_mib=1.0, memory_total_mib=10.0, power_w=NA, temperature_c=NA)
        for i in (0, 1, 1000, 1001)
    )  # fmt: skip
    node = NodeSnapshot(
        node_id="n1", ip="10.0.0.1", hostname="h", is_head=True, state="ALIVE", state_message="",
        start_time=T0, end_time=None, logical_cpus=1, logical_gpus=2, gpus=slices, sample_time=T0,
    )  # fmt: skip
    fleet = fleet_of((node,))
    assert [r.key for r in fleet.rows] == ["n1:0", "n1:1", "n1:1000", "n1:1001"]
    assert len({r.key for r in fleet.rows}) == 4


def test_synthetic_cluster_totals_sort_and_filter() -> None:
    nodes = synthetic_nodes(64, 8)
    fleet = fleet_of(nodes, synthetic_actors(nodes))
    alive_rows = [r for r in fleet.rows if r.node.alive]
    assert fleet.totals.gpus == len(alive_rows)
    with_util = [
        float(r.gpu.utilization) for r in alive_rows if r.gpu is not None and r.gpu.utilization is not NA
    ]
    assert fleet.totals.mean_utilization == pytest.approx(sum(with_util) / len(with_util))
    assert fleet.totals.idle == sum(1 for u in with_util if u < 5)
    assert fleet.totals.stale == sum(
        1 for r in alive_rows if r.gpu is not None and is_stale(r, fleet.built_at)
    )
    assert fleet.totals.stale > 0 and fleet.totals.idle > 0
    by_util = fleet.ordered("util")
    utils = [float(r.gpu.utilization) for r in by_util if r.gpu is not None and r.gpu.utilization is not NA
             and r.node.alive]  # fmt: skip
    assert utils == sorted(utils) and utils[0] == 0.0
    by_memory = fleet.ordered("memory")
    assert by_memory[0].gpu is not None and by_memory[0].gpu.memory_used_mib == max(
        float(r.gpu.memory_used_mib) for r in alive_rows if r.gpu is not None
    )
    only = fleet.ordered("node", "gpu-0003")
    assert only and {r.node.hostname for r in only} == {"gpu-0003"}
    rollout = fleet.ordered("node", "rollout")
    assert rollout and all(a.role == "rollout" for r in rollout for a in fleet.actors_on(r))
    assert fleet.ordered("node", "no-such-node") == []


def test_dead_nodes_do_not_count_and_are_never_stale() -> None:
    nodes = synthetic_nodes(100, 8)
    fleet = fleet_of(nodes)
    dead = [r for r in fleet.rows if not r.node.alive]
    assert dead
    assert not any(is_stale(r, fleet.built_at + 3600) for r in dead)
    assert fleet.totals.gpus == len(fleet.rows) - len(dead)


def test_ages_use_the_cluster_clock_not_the_login_node_clock() -> None:
    nodes = synthetic_nodes(4, 2)
    board = GpuBoard()
    board.ingest_nodes(nodes, job_running=False, local_time=T0 + 7200)  # login node two hours ahead
    fleet = board.fleet()
    now = fleet.built_at
    ages = [fleet.age(r, now) for r in fleet.rows if r.gpu is not None]
    assert all(a is not None and a < 60 for a in ages)


def test_agent_readings_replace_the_dashboards_and_fall_back() -> None:
    nodes = synthetic_nodes(2, 2)
    board = GpuBoard()
    board.ingest_nodes(nodes, job_running=False, local_time=T0)
    node = nodes[0]
    reading = (GpuSample(index=0, name="agent GPU", uuid="u", utilization=99.0, memory_used_mib=1.0,
                         memory_total_mib=2.0, power_w=1.0, temperature_c=40.0),)  # fmt: skip
    assert node.sample_time is not None
    board.ingest_agent([node.node_id], node.sample_time + 1, reading)
    rows = [r for r in board.fleet().rows if r.node.node_id == node.node_id]
    assert [(r.source, r.gpu.name if r.gpu else "") for r in rows] == [("agent", "agent GPU")]
    board.forget_agent([node.node_id])
    rows = [r for r in board.fleet().rows if r.node.node_id == node.node_id]
    assert {r.source for r in rows} == {"dashboard"} and len(rows) == 2


def test_history_holds_readings_and_leaves_long_gaps_empty() -> None:
    history = UtilHistory()
    for second in range(0, 100, 5):
        history.record("g", T0 + second, 10.0 * (second % 10 == 0) + 40.0)  # 50, 40, 50, 40 ...
    series = history.series("g", T0 + 95, HISTORY_SECONDS)
    # Each reading holds until the next: 50 for seconds 0-4, 40 for 5-9, ...
    assert series[-96:-86] == [50] * 5 + [40] * 5
    assert series[:-96] == [None] * (HISTORY_SECONDS - 96)
    history.record("g", T0 + 95 + HOLD_SECONDS + 50, 80.0)
    after = history.series("g", T0 + 95 + HOLD_SECONDS + 50, HISTORY_SECONDS)
    assert after[-1] == 80 and after[-2] is None  # a gap longer than HOLD_SECONDS is not drawn
    coarse = history.series("g", T0 + 95 + HOLD_SECONDS + 50, 10)
    assert len(coarse) == 10 and max(v for v in coarse if v is not None) == 80
    history.record("g", T0, 100.0)  # older than the newest: ignored
    assert history.series("g", T0 + 95 + HOLD_SECONDS + 50, HISTORY_SECONDS) == after
    history.forget_unless(lambda key: key != "g")
    assert len(history) == 0 and history.series("g", T0, 3) == [None, None, None]


def test_history_of_na_readings_is_empty() -> None:
    history = UtilHistory()
    history.record("g", T0, NA)
    assert history.series("g", T0, 5) == [None] * 5


@pytest.mark.parametrize(
    ("class_name", "name", "role"),
    [
        ("ActorRolloutRefWorker", "", "hybrid"),
        ("VllmGenerationWorker", "", "rollout"),
        ("DTensorPolicyWorker", "", "policy"),
        ("ReferencePolicy", "", "reference"),
        ("CriticWorker", "", "critic"),
        ("RewardModel", "", "reward"),
        ("EnvWorker", "", "env"),
        ("WorkerDict", "", "colocated"),
        ("WorkerDict", "critic_0", "critic"),
        ("JobSupervisor", "", "driver"),
    ],
)
def test_roles_from_framework_names(class_name: str, name: str, role: str) -> None:
    assert role_of(class_name, name) == role


def test_a_cluster_whose_readings_all_stop_turns_stale() -> None:
    """Ages run on the login node's clock minus the smallest lag seen, so frozen readings age."""
    nodes = synthetic_nodes(3, 2)
    fresh = tuple(n for n in nodes if n.alive and n.sample_time is not None and n.sample_time > T0 - 10)
    board = GpuBoard()
    board.ingest_nodes(fresh, job_running=False, local_time=T0 + 100)  # login clock 100 s ahead
    assert board.fleet().totals.stale == 0
    board.ingest_nodes(fresh, job_running=False, local_time=T0 + 160)  # same readings, a minute later
    fleet = board.fleet()
    assert fleet.totals.stale == fleet.totals.with_telemetry > 0


def test_a_poll_older_than_the_last_is_ignored() -> None:
    board = GpuBoard()
    board.ingest_nodes(synthetic_nodes(2, 2), job_running=False, local_time=T0 + 10, poll=2)
    generation = board.generation
    board.ingest_nodes(synthetic_nodes(5, 2), job_running=False, local_time=T0 + 12, poll=1)
    assert len(board.fleet().nodes) == 2 and board.generation == generation
    board.ingest_nodes(
        synthetic_nodes(5, 2), job_running=False, local_time=T0 + 5, poll=3
    )  # clock stepped back
    fleet = board.fleet()
    assert len(fleet.nodes) == 5 and fleet.generation == board.generation > generation


def test_raylets_sharing_a_host_count_its_gpus_once_and_share_its_actors() -> None:
    nodes = summary_nodes()
    amd = next(n for n in nodes if n.gpus)
    twin = NodeSnapshot(
        node_id="f" * 56, ip=amd.ip, hostname=amd.hostname, is_head=False, state="ALIVE", state_message="",
        start_time=amd.start_time, end_time=None, logical_cpus=1, logical_gpus=2, gpus=amd.gpus,
        sample_time=amd.sample_time,
    )  # fmt: skip
    fleet = fleet_of((amd, twin), [amd_trainer(amd)])
    assert len(fleet.rows) == 4 and fleet.totals.with_telemetry == 2  # two GPUs, reported twice
    assert fleet.totals.memory_used_mib == 12288 + 256
    twin_gpu0 = next(r for r in fleet.rows if r.node is twin and r.gpu_index == 0)
    assert [a.name for a in fleet.actors_on(twin_gpu0)] == ["amd_trainer"]  # same host, same pid space


def test_memory_total_is_na_when_no_gpu_reports_memory() -> None:
    gpu = GpuSample(index=0, name="x", uuid="", utilization=5.0, memory_used_mib=NA, memory_total_mib=NA,
                    power_w=NA, temperature_c=NA)  # fmt: skip
    node = NodeSnapshot(
        node_id="n1", ip="10.0.0.1", hostname="h", is_head=True, state="ALIVE", state_message="",
        start_time=T0, end_time=None, logical_cpus=1, logical_gpus=1, gpus=(gpu,), sample_time=T0,
    )  # fmt: skip
    totals = fleet_of((node,)).totals
    assert totals.memory_used_mib is NA and totals.memory_total_mib is NA


def test_worker_python_from_the_captured_raylet_command_line() -> None:
    doc = json.loads((SAMPLES / "node_detail.json").read_text())
    assert parse.worker_python(doc["data"]["detail"]["cmdline"]) == "/opt/venv/bin/python3"
    assert parse.worker_python(["raylet", "--node_id=x"]) == ""


def test_one_node_with_a_clock_ahead_does_not_age_the_others() -> None:
    """The cluster's offset is the median of the nodes' own: agent readings of a node whose clock runs
    3 s ahead do not make the other nodes' readings look 3 s old (or stale)."""
    nodes = tuple(n for n in synthetic_nodes(8, 1) if n.alive)[:5]
    gpu = nodes[0].gpus[0]
    board = GpuBoard()
    for second in range(1, 6):
        arrived = T0 + second + 0.2
        board.ingest_agent([nodes[0].node_id], T0 + second + 3.0, [gpu], arrived=arrived)
        for node in nodes[1:]:
            board.ingest_agent([node.node_id], T0 + second, [gpu], arrived=arrived)
    board.ingest_nodes(nodes, job_running=False, local_time=T0 + 5.2)
    fleet = board.fleet()
    now = T0 + 5.3
    ages = [fleet.age(row, now) for row in fleet.rows if row.node is not nodes[0]]
    # 0.1 s: the offset absorbs the steady 0.2 s delivery delay, so an age is the time since arrival.
    assert ages and all(age == pytest.approx(0.1, abs=0.01) for age in ages)
    assert not any(is_stale(row, now) for row in fleet.rows)


def test_history_of_nodes_gone_from_the_cluster_is_dropped() -> None:
    nodes = synthetic_nodes(4, 2)
    board = GpuBoard()
    for poll in range(FORGET_EVERY):
        board.ingest_nodes(
            nodes if poll < 5 else nodes[:2], job_running=False, local_time=T0 + poll, poll=poll
        )
    kept = {key.partition(":")[0] for key in board.history._rings}
    assert kept and kept <= {node.node_id for node in nodes[:2]}


def test_an_agent_that_ended_says_why_on_its_own_nodes_only() -> None:
    """Fault 5 of RELIABILITY.md: a worker host whose sshd is down (or whose host key changed) gets the
    reason in its own GPU rows; the other nodes' rows are unaffected; high-resolution mode off clears it."""
    from cockpit.ui.widgets.gpu_heatmap import cursor_detail
    from cockpit.ui.widgets.gpu_list import GpuList

    nodes = tuple(n for n in synthetic_nodes(4, 2) if n.alive and n.gpus)[:2]
    board = GpuBoard()
    board.ingest_nodes(nodes, job_running=False, local_time=T0)
    why = "w1 [10.0.0.11]: cannot start the agent (cannot connect to 10.0.0.11: Connection refused)"
    board.forget_agent([nodes[0].node_id], why)
    fleet = board.fleet()
    assert fleet.agent_failed == {nodes[0].node_id: why}
    first_rows = [r for r in fleet.rows if r.node.node_id == nodes[0].node_id]
    other_rows = [r for r in fleet.rows if r.node.node_id == nodes[1].node_id]
    assert why in cursor_detail(fleet, first_rows[0]).plain
    assert "agent:" not in cursor_detail(fleet, other_rows[0]).plain
    groups = {fleet.rows[start].node.node_id: g for g, start in enumerate(fleet.groups[:-1])}
    assert why in GpuList._summary(fleet, groups[nodes[0].node_id], first_rows[0])
    assert "agent:" not in GpuList._summary(fleet, groups[nodes[1].node_id], other_rows[0])
    reading = (GpuSample(index=0, name="agent GPU", uuid="u", utilization=9.0, memory_used_mib=1.0,
                         memory_total_mib=2.0, power_w=1.0, temperature_c=40.0),)  # fmt: skip
    board.ingest_agent([nodes[0].node_id], (nodes[0].sample_time or T0) + 1, reading)
    assert board.fleet().agent_failed == {}  # it answers again
    board.forget_agent([nodes[0].node_id], why)
    board.stop_agent()
    assert board.fleet().agent_failed == {}


def test_a_poll_that_repeats_the_last_readings_records_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Between two summaries each poll carries the last one's readings: only a node whose sample time
    moved has its GPUs written, and the history is the same as without the repeating poll."""
    nodes = synthetic_nodes(40, gpus=4)
    moved = nodes[3]
    assert moved.alive and moved.sample_time is not None and len(moved.gpus) == 4
    later = (*nodes[:3], replace(moved, sample_time=moved.sample_time + 5), *nodes[4:])
    board, without_repeat = GpuBoard(), GpuBoard()
    for each in (board, without_repeat):
        each.ingest_nodes(nodes, job_running=True, local_time=T0)
    written: list[str] = []
    record = board.history.record

    def counted(key: str, when: float, utilization: Metric) -> None:
        written.append(key)
        record(key, when, utilization)

    monkeypatch.setattr(board.history, "record", counted)
    board.ingest_nodes(nodes, job_running=True, local_time=T0 + 5)
    assert written == []
    board.ingest_nodes(later, job_running=True, local_time=T0 + 10)
    assert written == [f"{moved.node_id}:{gpu.index}" for gpu in moved.gpus]
    without_repeat.ingest_nodes(later, job_running=True, local_time=T0 + 10)
    keys = [f"{node.node_id}:{gpu.index}" for node in nodes for gpu in node.gpus]
    assert len(board.history) == len(without_repeat.history) > 0
    for key in keys:
        assert board.history.series(key, T0 + 10, 60) == without_repeat.history.series(key, T0 + 10, 60)
