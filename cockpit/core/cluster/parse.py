"""Provides lenient parsing of dashboard JSON into snapshots.

Field sets drift between Ray releases, int64 fields arrive as strings, and numbers may be null or -1,
so every reader here tolerates a missing or odd value and maps it to NA or a neutral default. The
dashboard is not trusted either: any JSON at all (`Infinity`, numbers past a float's range, a list where
an object belongs) gives a snapshot with NA for what is missing or wrong, never an exception.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from cockpit.core.cluster import oom
from cockpit.core.snapshots import (
    NA,
    ActorRow,
    ActorSummary,
    ClusterInfo,
    GpuProcess,
    GpuSample,
    JobRow,
    ListMeta,
    Metric,
    NodeSnapshot,
    NodeUsage,
    PlacementGroupRow,
    ProcessStat,
    TaskRow,
    WorkerRow,
)

_MIB = 1024 * 1024


def as_int(value: Any, default: int = 0) -> int:
    """An int from an int, float or numeric string (int64 fields arrive as strings); DEFAULT for anything
    else, infinities and NaN included."""
    if isinstance(value, int):  # bool included
        return int(value)
    if isinstance(value, str):
        try:
            return int(value)  # exact, however large (a uint64 sentinel)
        except ValueError:
            pass
        try:
            value = float(value)
        except ValueError:
            return default
    if isinstance(value, float):
        return int(value) if math.isfinite(value) else default
    return default


def as_opt_int(value: Any) -> int | None:
    if value is None or value == "":
        return None
    number = as_int(value, default=-1)
    return None if number < 0 else number


def as_metric(value: Any) -> Metric:
    """A reported number, or NA for null, non-numbers, infinities, NaN, numbers past a float's range and
    the -1 that NVML failures produce."""
    if isinstance(value, bool) or value is None:
        return NA
    if isinstance(value, (int, float, str)):
        try:
            number = float(value)
        except (ValueError, OverflowError):
            return NA
        return number if math.isfinite(number) and number >= 0 else NA
    return NA


def as_list(value: Any) -> Sequence[Any]:
    """VALUE when it is a JSON array, else empty (a field of the wrong type reads as missing)."""
    return value if isinstance(value, list) else ()


def as_mapping(value: Any) -> Mapping[str, Any]:
    """VALUE when it is a JSON object, else empty (a field of the wrong type reads as missing)."""
    return value if isinstance(value, Mapping) else {}


def as_str(value: Any) -> str:
    return "" if value is None else str(value)


def ms_to_seconds(value: Any) -> float | None:
    """Posix seconds from a millisecond timestamp; None for 0, null and uint64 -1 sentinels."""
    number = as_int(value)
    if number <= 0 or number >= 2**63:
        return None
    return number / 1000.0


def resources(value: Any) -> dict[str, float]:
    if not isinstance(value, Mapping):
        return {}
    out: dict[str, float] = {}
    for key, amount in value.items():
        metric = as_metric(amount)
        if metric is not NA:
            out[str(key)] = float(metric)
    return out


def list_meta(result: Mapping[str, Any], returned: int) -> ListMeta:
    """The truncation funnel of a state-API response (`data.result`)."""
    total = as_int(result.get("total"), returned)
    after = as_int(result.get("num_after_truncation"), total)
    filtered = as_int(result.get("num_filtered"), returned)
    return ListMeta(total=total, num_after_truncation=after, num_filtered=filtered, returned=returned)


def cluster_info(version: Mapping[str, Any], metadata: Any) -> ClusterInfo:
    """Versions from `/api/version` and the `data` of `/api/v0/cluster_metadata` (None, or any JSON)."""
    version, meta = as_mapping(version), as_mapping(metadata)
    python = meta.get("pythonVersion")
    return ClusterInfo(
        ray_version=as_str(meta.get("rayVersion") or version.get("ray_version")) or "unknown",
        python_version=str(python) if python else NA,
        session_name=as_str(version.get("session_name")),
        git_commit=as_str(meta.get("gitCommit") or version.get("ray_commit")),
    )


def gpu_sample(entry: Mapping[str, Any]) -> GpuSample:
    processes = []
    for proc in as_list(entry.get("processesPids")):
        if isinstance(proc, Mapping) and proc.get("pid") is not None:
            processes.append(
                GpuProcess(
                    pid=as_int(proc.get("pid")),
                    memory_mib=as_metric(proc.get("gpuMemoryUsage")),
                    utilization=as_metric(proc.get("gpuUtilization")),
                )
            )
    power_mw = as_metric(entry.get("powerMw"))
    return GpuSample(
        index=as_int(entry.get("index")),
        name=as_str(entry.get("name")),
        uuid=as_str(entry.get("uuid")),
        utilization=as_metric(entry.get("utilizationGpu")),
        memory_used_mib=as_metric(entry.get("memoryUsed")),
        memory_total_mib=as_metric(entry.get("memoryTotal")),
        power_w=NA if power_mw is NA else power_mw / 1000.0,
        temperature_c=as_metric(entry.get("temperatureC")),
        processes=tuple(processes),
    )


def node_from_summary(entry: Mapping[str, Any]) -> NodeSnapshot:
    """A node from one `/nodes?view=summary` entry (camelCase; resource names mangled)."""
    raylet = as_mapping(entry.get("raylet"))
    res = resources(raylet.get("resourcesTotal"))
    mem = as_list(entry.get("mem"))
    store_used = as_metric(raylet.get("objectStoreUsedMemory"))
    store_free = as_metric(raylet.get("objectStoreAvailableMemory"))
    store_total: Metric = NA if store_used is NA or store_free is NA else store_used + store_free
    mem_total = as_metric(mem[0]) if len(mem) > 0 else NA
    mem_used = as_metric(mem[3]) if len(mem) > 3 else NA
    return NodeSnapshot(
        node_id=as_str(raylet.get("nodeId")),
        ip=as_str(raylet.get("nodeManagerAddress") or entry.get("ip")),
        hostname=as_str(entry.get("hostname") or raylet.get("nodeManagerHostname")),
        is_head=bool(raylet.get("isHeadNode")),
        state=as_str(raylet.get("state")) or "UNKNOWN",
        state_message=as_str(raylet.get("stateMessage")),
        start_time=ms_to_seconds(raylet.get("startTimeMs")),
        end_time=ms_to_seconds(raylet.get("endTimeMs")),
        logical_cpus=res.get("CPU", 0.0),
        logical_gpus=res.get("GPU", 0.0),
        resources_total=res,
        cpu_percent=as_metric(entry.get("cpu")),
        mem_used_bytes=mem_used,
        mem_total_bytes=mem_total,
        object_store_used_bytes=store_used,
        object_store_total_bytes=store_total,
        gpus=tuple(gpu_sample(g) for g in as_list(entry.get("gpus")) if isinstance(g, Mapping)),
        sample_time=_seconds(entry.get("now")),
        python=worker_python(as_list(entry.get("cmdline"))),
    )


def _seconds(value: Any) -> float | None:
    """Posix seconds sent as a JSON number; None for anything else (a string, a bool, infinity)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = as_metric(value)
    return None if number is NA else float(number)


def worker_python(raylet_cmdline: Iterable[Any]) -> str:
    """The Python a node runs Ray workers with, from its raylet's `--python_worker_command=...`."""
    for arg in raylet_cmdline:
        if isinstance(arg, str) and arg.startswith("--python_worker_command="):
            words = arg.split("=", 1)[1].split()
            if words:
                return words[0]
    return ""


def node_from_state(row: Mapping[str, Any]) -> NodeSnapshot:
    """A node from one `/api/v0/nodes?detail=true` row (the GCS table: exact names, no host stats)."""
    res = resources(row.get("resources_total"))
    return NodeSnapshot(
        node_id=as_str(row.get("node_id")),
        ip=as_str(row.get("node_ip")),
        hostname=as_str(row.get("node_name")),
        is_head=bool(row.get("is_head_node")),
        state=as_str(row.get("state")) or "UNKNOWN",
        state_message=as_str(row.get("state_message")),
        start_time=ms_to_seconds(row.get("start_time_ms")),
        end_time=ms_to_seconds(row.get("end_time_ms")),
        logical_cpus=res.get("CPU", 0.0),
        logical_gpus=res.get("GPU", 0.0),
        resources_total=res,
    )


def merge_nodes(
    state_rows: Iterable[NodeSnapshot], summaries: Iterable[NodeSnapshot], only_listed: bool = False
) -> tuple[NodeSnapshot, ...]:
    """Nodes with membership from the GCS table and host/GPU stats from the reporter summary.

    The GCS table is authoritative for who exists and who died (the summary is cached and lags a
    freshly joined node by seconds); a node only the summary knows is kept too, unless ONLY_LISTED (the
    summary is older than the table: a node it alone knows has left). Head first, then by join time, so
    the order is stable while nodes come and go.
    """
    stats = {node.node_id: node for node in summaries}
    merged: list[NodeSnapshot] = []
    seen: set[str] = set()
    for node in state_rows:
        seen.add(node.node_id)
        host = stats.get(node.node_id)
        if host is None:
            merged.append(node)
            continue
        merged.append(
            NodeSnapshot(
                node_id=node.node_id,
                ip=node.ip or host.ip,
                hostname=host.hostname or node.hostname,
                is_head=node.is_head,
                state=node.state,
                state_message=node.state_message or host.state_message,
                start_time=node.start_time or host.start_time,
                end_time=node.end_time or host.end_time,
                logical_cpus=node.logical_cpus,
                logical_gpus=node.logical_gpus,
                resources_total=node.resources_total,
                cpu_percent=host.cpu_percent,
                mem_used_bytes=host.mem_used_bytes,
                mem_total_bytes=host.mem_total_bytes,
                object_store_used_bytes=host.object_store_used_bytes,
                # The reporter's "available" is 0 until the store is first used; the GCS total is exact.
                object_store_total_bytes=node.resources_total.get("object_store_memory")
                or host.object_store_total_bytes,
                gpus=host.gpus,
                sample_time=host.sample_time,
                python=host.python,
            )
        )
    if not only_listed:
        merged.extend(node for node_id, node in stats.items() if node_id not in seen)
    merged.sort(key=lambda n: (not n.is_head, n.start_time or float("inf"), n.node_id))
    return tuple(merged)


def actor_row(row: Mapping[str, Any]) -> ActorRow:
    death = row.get("death_cause")
    return ActorRow(
        actor_id=as_str(row.get("actor_id")),
        class_name=as_str(row.get("class_name")),
        name=as_str(row.get("name")),
        state=as_str(row.get("state")),
        job_id=as_str(row.get("job_id")),
        node_id=as_str(row.get("node_id")),
        pid=as_opt_int(row.get("pid")) or None,
        num_restarts=as_int(row.get("num_restarts")),
        required_resources=resources(row.get("required_resources")),
        death_cause=_death_cause_text(death),
        repr_name=as_str(row.get("repr_name")),
        placement_group_id=as_str(row.get("placement_group_id")),
        start_time=ms_to_seconds(row.get("start_time")),
        runtime_env=_runtime_env_text(row.get("serialized_runtime_env")),
    )


def _runtime_env_text(value: Any) -> str:
    """The runtime env as JSON text: Ray sends it serialized; an object (should a release send one
    unserialized) is serialized here so the masker can still read it, and other junk is kept as text."""
    if isinstance(value, (Mapping, list)):
        try:
            return json.dumps(value)
        except (TypeError, ValueError, RecursionError):
            return ""
    return as_str(value)


def _death_cause_text(death: Any) -> str:
    """Why an actor died, in one line. Ray nests the reason a level down, under the kind of death:
    `actor_died_error_context.error_message` (killed, its process or node died, out of memory ...), or,
    when its constructor raised, `creation_task_failure_context.formatted_exception_string` (a whole
    traceback: its last line is the exception, e.g. "ValueError: CUDA out of memory"). The context also
    holds `serialized_exception`, a pickle in base64: never shown."""
    if not death:
        return ""
    if isinstance(death, str):
        said = oom.classify(death)
        return oom.death_line(said, death) if said else death
    if isinstance(death, Mapping):
        for context, value in death.items():
            if not isinstance(value, Mapping):
                continue
            message = as_str(value.get("error_message"))
            kind: oom.OomKind | None = "ray" if context == "oom_context" else oom.classify(message)
            if kind:  # killed for memory, or maybe: the label first, then Ray's first line (not its advice)
                return oom.death_line(kind, message)
            for key in ("error_message", "formatted_exception_string"):
                lines = [line for line in as_str(value.get(key)).splitlines() if line.strip()]
                if lines:
                    return lines[-1].strip()
        return ""
    return as_str(death)
    return str(death)


def task_row(row: Mapping[str, Any]) -> TaskRow:
    return TaskRow(
        task_id=as_str(row.get("task_id")),
        attempt_number=as_int(row.get("attempt_number")),
        name=as_str(row.get("name") or row.get("func_or_class_name")),
        state=as_str(row.get("state")),
        job_id=as_str(row.get("job_id")),
        type=as_str(row.get("type")),
        actor_id=as_str(row.get("actor_id")),
        node_id=as_str(row.get("node_id")),
        worker_id=as_str(row.get("worker_id")),
        error_type=as_str(row.get("error_type")),
        error_message=as_str(row.get("error_message")),
        worker_pid=as_opt_int(row.get("worker_pid")),
    )


def worker_row(row: Mapping[str, Any]) -> WorkerRow:
    port = as_opt_int(row.get("debugger_port"))
    if port is not None and not 0 < port < 65536:
        port = None
    return WorkerRow(
        worker_id=as_str(row.get("worker_id")),
        worker_type=as_str(row.get("worker_type")),
        is_alive=bool(row.get("is_alive")),
        node_id=as_str(row.get("node_id")),
        ip=as_str(row.get("ip")),
        pid=as_opt_int(row.get("pid")),
        debugger_port=port or None,
        num_paused_threads=as_int(row.get("num_paused_threads")),
        exit_type=as_str(row.get("exit_type")),
        start_time=ms_to_seconds(row.get("start_time_ms")) or ms_to_seconds(row.get("worker_launch_time_ms")),
        exit_detail=as_str(row.get("exit_detail")),
        end_time=ms_to_seconds(row.get("end_time_ms")),
    )


def job_row(row: Mapping[str, Any]) -> JobRow:
    metadata = row.get("metadata")
    return JobRow(
        submission_id=as_str(row.get("submission_id")),
        job_id=as_str(row.get("job_id")),
        type=as_str(row.get("type")),
        status=as_str(row.get("status")),
        entrypoint=as_str(row.get("entrypoint")),
        message=as_str(row.get("message")),
        start_time=ms_to_seconds(row.get("start_time")),
        end_time=ms_to_seconds(row.get("end_time")),
        driver_node_id=as_str(row.get("driver_node_id")),
        error_type=as_str(row.get("error_type")),
        metadata={str(k): as_str(v) for k, v in metadata.items()} if isinstance(metadata, Mapping) else {},
        debugger=as_str(as_mapping(as_mapping(row.get("runtime_env")).get("env_vars")).get("RAY_DEBUG")),
        driver_pid=as_int(as_mapping(row.get("driver_info")).get("pid")) or None,
    )


def actor_summary(result: Mapping[str, Any]) -> ActorSummary:
    """`data.result` of `/api/v0/actors/summarize`: per-class state counts of the whole cluster."""
    inner = as_mapping(as_mapping(as_mapping(result.get("result")).get("node_id_to_summary")).get("cluster"))
    by_class: dict[str, dict[str, int]] = {}
    for key, entry in as_mapping(inner.get("summary")).items():
        entry = as_mapping(entry)
        counts = {str(state): as_int(n) for state, n in as_mapping(entry.get("state_counts")).items()}
        by_class[as_str(entry.get("class_name")) or str(key)] = counts
    total = as_int(inner.get("total_actors"), sum(sum(c.values()) for c in by_class.values()))
    return ActorSummary(by_class=by_class, total=total, meta=list_meta(result, total))


def placement_group_row(row: Mapping[str, Any]) -> PlacementGroupRow:
    bundles = [as_mapping(b) for b in as_list(row.get("bundles"))]
    return PlacementGroupRow(
        placement_group_id=as_str(row.get("placement_group_id")),
        name=as_str(row.get("name")),
        creator_job_id=as_str(row.get("creator_job_id")),
        state=as_str(row.get("state")),
        bundles=tuple(resources(b.get("unit_resources")) for b in bundles),
        bundle_nodes=tuple(as_str(b.get("node_id")) for b in bundles),
        scheduling_state=as_str(as_mapping(row.get("stats")).get("scheduling_state")),
    )


def node_usage(cluster_status: Mapping[str, Any]) -> tuple[NodeUsage, ...]:
    """`data.clusterStatus` of `/api/cluster_status` (JSON form): each node's {resource: (used, total)}.

    The dashboard camelCases the keys: `CPU` and `GPU` survive, `object_store_memory` becomes
    `objectStoreMemory` and custom resources are mangled, so only CPU, GPU and memory are trusted here.
    """
    report = as_mapping(as_mapping(cluster_status.get("loadMetricsReport")).get("usageByNode"))
    out = []
    for node_id, usage in report.items():
        pairs: dict[str, tuple[float, float]] = {}
        for res, pair in as_mapping(usage).items():
            values = as_list(pair)  # [used, total]: read for 2,000 nodes every 15 s while a job runs
            if len(values) == 2:
                used, total = values
                if isinstance(used, (int, float)) and isinstance(total, (int, float)):
                    pairs[str(res)] = (float(used), float(total))
        out.append(NodeUsage(node_id=str(node_id).lower(), used_total=pairs))
    return tuple(out)


def node_processes(detail: Mapping[str, Any], node_id: str) -> tuple[ProcessStat, ...]:
    """The processes in one `/nodes/{id}` answer (`data.detail.workers`: Ray's workers and agents)."""
    out = []
    now = _seconds(detail.get("now"))
    for entry in as_list(detail.get("workers")):
        if not isinstance(entry, Mapping) or as_opt_int(entry.get("pid")) is None:
            continue
        words = [as_str(w) for w in as_list(entry.get("cmdline")) if as_str(w)]
        memory = as_mapping(entry.get("memoryInfo"))
        stats = as_list(entry.get("coreWorkerStats"))
        core = as_mapping(stats[0]) if stats else {}
        actor_id = as_str(core.get("actorId"))
        out.append(
            ProcessStat(
                node_id=node_id,
                pid=as_int(entry.get("pid")),
                name=(words[0].split()[0] if words else "")[:200],
                rss_bytes=as_metric(memory.get("rss")),
                cpu_percent=as_metric(entry.get("cpuPercent")),
                sample_time=now,
                actor_id="" if not actor_id.strip("f") else actor_id,
                job_id=_job_of(as_str(core.get("jobId") or entry.get("jobId"))),
            )
        )
    return tuple(out)


def _job_of(job_id: str) -> str:
    """A process's job id; "" for Ray's nil job (`ffff`: an agent, a process of no job)."""
    return "" if not job_id.strip("f") else job_id
