"""Parsing of dashboard JSON captured from Ray 2.60 (../shared/ray-2.60-samples)."""

from __future__ import annotations

import json
from pathlib import Path

from cockpit.core.cluster import parse
from cockpit.core.snapshots import NA


def load(samples_dir: Path, name: str) -> dict:  # type: ignore[type-arg]
    return json.loads((samples_dir / name).read_text())


def test_amd_gpus_parse_with_na_temperature(samples_dir: Path) -> None:
    doc = load(samples_dir, "nodes_summary_fakeamd.json")
    nodes = [parse.node_from_summary(e) for e in doc["data"]["summary"]]
    amd = next(n for n in nodes if n.gpus)
    assert [g.index for g in amd.gpus] == [0, 1]
    first = amd.gpus[0]
    assert first.name == "FAKE Instinct MI300X"
    assert first.utilization == 37.0
    assert first.memory_used_mib == 12288.0 and first.memory_total_mib == 196608.0
    assert first.power_w == 412.0
    assert first.temperature_c is NA  # AMD reports no temperature
    assert first.processes[0].pid == 11500 and first.processes[0].utilization is NA
    assert amd.logical_gpus == 2.0 and amd.has_gpu_telemetry


def test_logical_only_gpus_have_no_telemetry(samples_dir: Path) -> None:
    doc = load(samples_dir, "nodes_summary_fakeamd.json")
    nodes = [parse.node_from_summary(e) for e in doc["data"]["summary"]]
    logical = [n for n in nodes if n.logical_gpus and not n.gpus]
    assert logical, "the sample has a node with --num-gpus and no GPU hardware"
    assert all(not n.has_gpu_telemetry for n in logical)


def test_nvml_failure_and_null_utilization_become_na() -> None:
    for raw in (-1, None, "n/a"):
        sample = parse.gpu_sample({"index": 0, "utilizationGpu": raw, "memoryUsed": 1, "memoryTotal": 2})
        assert sample.utilization is NA
    assert parse.gpu_sample({"index": 1, "utilizationGpu": 0}).utilization == 0.0


def test_state_nodes_merge_with_summary(samples_dir: Path) -> None:
    table = [parse.node_from_state(r) for r in load(samples_dir, "v0_nodes.json")["data"]["result"]["result"]]
    stats = [
        parse.node_from_summary(e) for e in load(samples_dir, "nodes_summary_fakeamd.json")["data"]["summary"]
    ]
    merged = parse.merge_nodes(table, stats)
    assert merged[0].is_head
    ids = [n.node_id for n in merged]
    assert len(ids) == len(set(ids)) == 3  # two from the table, one known only to the summary
    head = merged[0]
    assert head.cpu_percent is not NA and head.mem_total_bytes is not NA
    # Exact resource names come from the GCS table, not the camelCased summary.
    assert "object_store_memory" in head.resources_total


def test_int64_strings_and_uint64_sentinels() -> None:
    assert parse.ms_to_seconds("1795642331165") == 1795642331.165
    assert parse.ms_to_seconds("0") is None
    assert parse.ms_to_seconds(18446744073709551615) is None
    assert parse.as_int("3") == 3 and parse.as_int(None, 7) == 7


def test_actor_rows_and_death_cause(samples_dir: Path) -> None:
    doc = load(samples_dir, "v0_actors.json")["data"]["result"]
    rows = [parse.actor_row(r) for r in doc["result"]]
    dead = [r for r in rows if r.state == "DEAD"]
    assert dead and all(r.death_cause for r in dead)
    assert "worker process has died" in dead[0].death_cause
    assert all(isinstance(r.num_restarts, int) for r in rows)


def test_actor_runtime_env_is_kept_as_sent(samples_dir: Path) -> None:
    doc = load(samples_dir, "v0_actors.json")["data"]["result"]
    row = parse.actor_row(doc["result"][0])
    assert json.loads(row.runtime_env)["env_vars"]["STEPS"] == "900"
    assert "runtime_env" not in repr(row)  # its env_vars may hold secrets: never in a log line


def test_actor_runtime_env_junk_never_raises() -> None:
    for raw, text in ((None, ""), (5, "5"), ("not json", "not json"), ([], "[]")):
        assert parse.actor_row({"serialized_runtime_env": raw}).runtime_env == text
    sent_as_object = parse.actor_row({"serialized_runtime_env": {"env_vars": {"A": "1"}}})
    assert json.loads(sent_as_object.runtime_env) == {"env_vars": {"A": "1"}}


def test_truncation_is_reported(samples_dir: Path) -> None:
    result = load(samples_dir, "dbg_workers_paused.json")["data"]["result"]
    meta = parse.list_meta(result, len(result["result"]))
    assert meta.total == 17 and meta.num_after_truncation == 2
    assert meta.truncated_at_source and not meta.complete
    limited = parse.list_meta({"total": 5, "num_after_truncation": 5, "num_filtered": 5}, 1)
    assert limited.limited and limited.describe() == "showing 1 of 5"


def test_paused_workers(samples_dir: Path) -> None:
    result = load(samples_dir, "dbg_workers_paused.json")["data"]["result"]["result"]
    workers = [parse.worker_row(r) for r in result]
    assert all(w.num_paused_threads > 0 and w.debugger_port for w in workers)


def test_jobs_and_cluster_info(samples_dir: Path) -> None:
    jobs = [parse.job_row(r) for r in load(samples_dir, "jobs_list.json")]
    assert {j.status for j in jobs} >= {"FAILED", "RUNNING"}
    running = next(j for j in jobs if j.status == "RUNNING")
    assert running.key == running.submission_id and not running.terminal and running.start_time
    info = parse.cluster_info(
        load(samples_dir, "version.json"), load(samples_dir, "cluster_meta.json")["data"]
    )
    assert info.ray_version == "2.60.0" and info.python_version == "3.11.7"
