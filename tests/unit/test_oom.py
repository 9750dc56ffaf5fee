"""Out-of-memory deaths as Ray 2.60 reports them (tests/fixtures/oom: a real memory-monitor kill of an actor
and a task, and an actor the test SIGKILLed), and the memory watch's flags on readings over time."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cockpit.core.cluster import parse
from cockpit.core.cluster.oom import (
    LABELS,
    classify,
    kernel_kills,
    monitor_threshold,
    ray_oom_figures,
)
from cockpit.core.memory.report import oom_kills, process_rows
from cockpit.core.memory.watch import MARGIN, MemoryWatch, Threshold
from cockpit.core.snapshots import NA, GpuProcess, GpuSample, ProcessStat
from tests.harness.properties import examples
from tests.harness.synthetic import synthetic_nodes

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "oom"
KILLS: dict[str, Any] = json.loads((FIXTURES / "ray_2.60_kills.json").read_text())
GIB = 2**30

RAYLET_OUT = (
    "[2026-11-28 01:27:25,189 I 17478 17478] (raylet) store_runner.cc:50: Allowing the Plasma store to use "
    "up to 7.3567GB of memory.\n"
    "[2026-11-28 01:27:26,201 I 17478 17478] (raylet) threshold_memory_monitor.cc:53: ThresholdMemoryMonitor "
    "initialized with usage threshold at 3361716480 bytes (13.300000% of system memory), total system memory "
    "bytes: 25276063744, monitor interval: 100ms\n"
)
DMESG = (
    "[12345.678901] python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0\n"
    "[12345.679999] oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,"
    "task_memcg=/,task=ray::Victim,pid=24592,uid=0\n"
    "[12345.680001] Out of memory: Killed process 24592 (ray::Victim) total-vm:9876543kB, "
    "anon-rss:8388608kB, file-rss:1024kB, shmem-rss:0kB, UID:0 pgtables:20480kB oom_score_adj:0\n"
)


def actors() -> list[Any]:
    return [parse.actor_row(row) for row in KILLS["actors"]]


def workers() -> list[Any]:
    return [parse.worker_row(row) for row in KILLS["workers"]]


def test_an_actor_killed_by_rays_memory_monitor_says_so_first() -> None:
    by_name = {a.name: a for a in actors()}
    hog = by_name["hog"].death_cause
    assert hog.startswith(f"{LABELS['ray']} · 1 worker(s) were killed due to the node running low on memory.")
    assert "\n" not in hog and "Top 10 memory users" not in hog  # Ray's first line, not its last
    victim = by_name["victim"].death_cause
    assert victim.startswith(LABELS["kernel?"] + " · The actor is dead because its worker process has died.")
    assert "Some common causes" not in victim  # Ray's advice is cut; its facts stay
    assert "Worker exit type: SYSTEM_ERROR" in victim


def test_the_kill_text_gives_the_node_the_process_and_the_threshold() -> None:
    hog = next(w for w in workers() if w.exit_type == "NODE_OUT_OF_MEMORY" and w.pid == 17604)
    figures = ray_oom_figures(hog.exit_detail)
    assert figures.threshold_bytes == 3361716480 and figures.limit_bytes == 25276063744
    assert figures.threshold_fraction == 0.133 and figures.used_bytes == 3388084224
    assert figures.pid == 17604 and figures.actor_id == "f9b3fe7e33448d7c160cf31801000000"
    assert figures.job_id == "01000000" and figures.task_name == "hog:Hog.__init__"
    assert figures.rss_bytes == int(1.84 * GIB) and figures.node_ip == "192.0.2.2"
    assert figures.worker_id == hog.worker_id


def test_kills_from_the_worker_table_name_their_actor_and_kind() -> None:
    kills = oom_kills(workers(), actors())
    assert [k.kind for k in kills] == ["kernel?", "ray", "ray"]  # newest first
    victim, task, hog = kills
    assert victim.class_name == "Victim" and victim.rss_bytes is None and victim.label == LABELS["kernel?"]
    assert task.task_name == "hog_task" and task.class_name == "" and task.rss_bytes == int(1.94 * GIB)
    assert hog.class_name == "Hog" and hog.actor_name == "hog" and hog.pid == 17604
    assert hog.message.startswith("1 worker(s) were killed due to the node running low on memory.")
    assert hog.time is not None and hog.threshold_bytes == 3361716480
    assert [k.pid for k in oom_kills(workers(), actors(), job="02000000")] == []


def test_the_kernel_log_turns_a_sigkill_into_a_kernel_oom() -> None:
    kernel = kernel_kills(DMESG)
    assert set(kernel) == {24592} and kernel[24592].rss_bytes == 8388608 * 1024
    victim = oom_kills(workers(), actors(), kernel=kernel)[0]
    assert victim.kind == "kernel" and victim.label == "OOM (kernel)"
    assert victim.rss_bytes == 8 * GIB and "Killed process 24592" in victim.message


def test_classify_reads_codes_and_words() -> None:
    assert classify("", exit_type="NODE_OUT_OF_MEMORY") == "ray"
    assert classify("boom", error_type="OUT_OF_MEMORY") == "ray"
    assert classify("Worker exit type: NODE_OUT_OF_MEMORY Worker exit detail: ...") == "ray"
    assert classify("ValueError: CUDA out of memory") is None  # an exception in user code, not a kill
    assert classify("Worker exit type: INTENDED_USER_EXIT") is None


def test_the_monitor_threshold_from_raylet_out() -> None:
    found = monitor_threshold(RAYLET_OUT)
    assert found is not None and found.threshold_bytes == 3361716480 and found.fraction == 0.133
    assert monitor_threshold("no monitor here\n") is None


@settings(max_examples=examples(200), deadline=None)
@given(st.text(max_size=400), st.sampled_from(["", "NODE_OUT_OF_MEMORY", "SYSTEM_ERROR"]))
def test_hostile_text_never_breaks_the_readers(text: str, exit_type: str) -> None:
    classify(text, exit_type=exit_type)
    ray_oom_figures(text)
    monitor_threshold(text)
    kernel_kills(text)
    death = {"oom_context": {"error_message": text}}
    parse.actor_row({"actor_id": "a", "state": "DEAD", "death_cause": death})


def node_at(used: float, when: float, total: float = 100 * GIB) -> Any:
    node = synthetic_nodes(1, 0)[0]
    return replace(node, state="ALIVE", mem_used_bytes=used, mem_total_bytes=total, sample_time=when)


def test_a_rising_node_is_flagged_with_the_time_left() -> None:
    watch = MemoryWatch()
    for second in range(0, 25, 5):  # 1 GiB a minute, from 50 GiB: the default threshold is 95 GiB
        watch.update([node_at(50 * GIB + second / 60 * GIB, 1000.0 + second)])
    assert watch.flagged() == []  # 45 minutes left: beyond the horizon
    watch.set_threshold(
        watch.nodes[0].node_id, Threshold(60 * GIB, 0.6, "raylet.out", "gpu-0000"), cluster_wide=True
    )
    memory = watch.update([node_at(50.5 * GIB, 1030.0)])[0]
    assert memory.flag == "rising" and memory.slope_bytes_per_s is not None
    assert abs(memory.slope_bytes_per_s * 60 - GIB) < 0.05 * GIB
    assert memory.seconds_left is not None and 500 < memory.seconds_left < 620
    warning = memory.warning()
    assert warning.startswith("OOM risk: gpu-0000 at 50.5 GiB of 60.0 GiB, 9m") and "s left" in warning
    assert warning.endswith(" (Ray kills at 60%), +1.0 GiB/min")


def test_near_and_over_the_threshold_whatever_the_trend() -> None:
    watch = MemoryWatch()
    near = watch.update([node_at((0.95 - MARGIN / 2) * 100 * GIB, 1.0)])[0]
    assert near.flag == "near" and near.slope_bytes_per_s is None
    assert near.threshold is not None and near.threshold.source == "Ray's default"
    over = watch.update([node_at(96 * GIB, 2.0)])[0]
    assert over.flag == "over" and over.warning().startswith("OOM risk: gpu-0000 at 96.0 GiB, over 95.0 GiB")
    assert over.warning().endswith("(Ray kills at 95%)")
    gone = watch.update([])  # a node that left: its readings go too
    assert gone == () and watch.flagged() == []


def test_a_dead_or_unreported_node_is_not_flagged() -> None:
    watch = MemoryWatch()
    dead = replace(node_at(99 * GIB, 1.0), state="DEAD")
    silent = replace(node_at(99 * GIB, 1.0), mem_used_bytes=NA, node_id="other")
    assert [m.flag for m in watch.update([dead, silent])] == ["", ""]


def test_process_rows_name_actors_and_their_gpu_memory() -> None:
    node = node_at(10 * GIB, 1.0)
    gpu = GpuSample(0, "H100", "GPU-0", 90.0, 40960.0, 81559.0, 500.0, 60.0, (GpuProcess(222, 30720.0, NA),))
    node = replace(node, gpus=(gpu,))
    stats = [
        ProcessStat(node.node_id, 111, "ray::IDLE", 90e6),
        ProcessStat(node.node_id, 222, "ray::RolloutWorker", 6 * GIB),
        ProcessStat(node.node_id, 333, "ray::DashboardAgent", NA),
    ]
    rollout = replace(actors()[0], pid=222, node_id=node.node_id, class_name="RolloutWorker", state="ALIVE")
    rows = process_rows(node, stats, {(node.node_id, 222): rollout}, limit=2)
    assert [r.pid for r in rows] == [222, 111]
    assert rows[0].role == "rollout" and rows[0].gpu_memory_bytes == 30 * GIB
    assert rows[1].role == "" and rows[1].gpu_memory_bytes is NA


def test_a_nodes_processes_with_their_memory_and_actors(samples_dir: Path) -> None:
    detail = json.loads((samples_dir / "node_detail.json").read_text())["data"]["detail"]
    stats = {s.pid: s for s in parse.node_processes(detail, "n1")}
    agent, trainer = stats[3956], stats[7508]
    assert agent.name == "ray::RuntimeEnvAgent" and agent.rss_bytes == 84742144.0 and agent.actor_id == ""
    assert trainer.name == "ray::Trainer" and trainer.actor_id == "505b494baa0d9e12451cf10402000000"
    assert trainer.job_id == "02000000" and trainer.sample_time is not None
    assert stats[3952].actor_id == ""  # a driver: its actor id is all f
    node = node_at(10 * GIB, 1.0)
    rows = process_rows(node, stats.values(), {})
    assert rows[0].pid == 3952 and rows[0].class_name == "" and rows[0].role == ""
    by_pid = {r.pid: r for r in rows}
    assert by_pid[7440].class_name == "JobSupervisor"  # an actor named by its process title


def test_the_node_tables_memory_cell_shows_the_trend_and_the_flag() -> None:
    from cockpit.ui.widgets.node_table import memory_cell

    watch = MemoryWatch()
    watch.set_threshold("any", Threshold(60 * GIB, 0.6, "raylet.out"), cluster_wide=True)
    for second in range(0, 35, 5):  # 1 GiB a minute toward 60 GiB: about 10 minutes left
        node = node_at(50 * GIB + second / 60 * GIB, 1000.0 + second)
        watch.update([node])
    cell = memory_cell(node, watch.by_node[node.node_id])
    assert cell.plain == "50.5 GiB/100.0 GiB +1.0 GiB/min" and str(cell.style) == "bold yellow"
    flat = MemoryWatch()
    flat.update([node_at(10 * GIB, 1.0)])
    quiet = node_at(10 * GIB, 1.0)
    assert memory_cell(quiet, flat.by_node[quiet.node_id]).plain == "10.0 GiB/100.0 GiB"
    near = node_at(94 * GIB, 1.0)
    assert str(memory_cell(near, MemoryWatch().update([near])[0]).style) == "bold red"
    assert memory_cell(replace(near, mem_total_bytes=NA), None).plain == "N/A"
