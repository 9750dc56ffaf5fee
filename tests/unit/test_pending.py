"""Why pending placement groups and actors do not run, on JSON captured from Ray 2.60 and the
`ray status` text of the session cluster with unplaceable placement groups (captured 2026-11-26)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from cockpit.core.actors.pending import format_bundle, parse_demands, pending_report
from cockpit.core.cluster import parse
from cockpit.core.cluster.answers import envelope_data, state_listing
from cockpit.core.snapshots import ActorRow

STATUS_WITH_DEMANDS = """\
======== Autoscaler status: 2026-11-26 08:47:35.647409 ========
Node status
---------------------------------------------------------------
Active:
 1 node_1a9a8bab6f39c3b5f32d7fe541d0cfe0624694544c227b95cf677289
Pending:
 (no pending nodes)
Recent failures:
 (no failures)

Resources
---------------------------------------------------------------
Total Usage:
 0.0/6.0 CPU
 0.0/6.0 GPU

From request_resources:
 (none)
Pending Demands:
 {'CPU': 1.0, 'GPU': 8.0}: 1+ pending tasks/actors
 {'GPU': 8.0} * 1 (PACK): 1+ pending placement groups
 {'GPU': 1.0} * 4 (STRICT_SPREAD): 1+ pending placement groups
"""


def load(samples_dir: Path, name: str) -> Any:
    return json.loads((samples_dir / name).read_text())


def nodes(samples_dir: Path):  # type: ignore[no-untyped-def]
    return state_listing(load(samples_dir, "v0_nodes.json"), "/api/v0/nodes", parse.node_from_state).rows


def usage(samples_dir: Path):  # type: ignore[no-untyped-def]
    doc = envelope_data(load(samples_dir, "cluster_status.json"), "/api/cluster_status")
    return parse.node_usage(doc["clusterStatus"])


def pending_pg(samples_dir: Path, name: str, bundles: list[dict[str, float]]):  # type: ignore[no-untyped-def]
    row = copy.deepcopy(load(samples_dir, "v0_pgs.json")["data"]["result"]["result"][0])
    template = row["bundles"][0]
    row.update(name=name, state="PENDING", placement_group_id=name.encode().hex()[:36])
    row["bundles"] = [{**template, "unit_resources": b, "node_id": None} for b in bundles]
    return parse.placement_group_row(row)


def test_demands_are_read_from_the_status_text() -> None:
    demands = parse_demands(STATUS_WITH_DEMANDS)
    assert [d.strategy for d in demands] == ["", "PACK", "STRICT_SPREAD"]
    assert demands[2].bundles == ({"GPU": 1.0},) * 4
    assert parse_demands("Pending Demands:\n (no resource demands)\n") == ()
    assert format_bundle({"GPU": 8.0, "CPU": 0.5}) == "{CPU: 0.5, GPU: 8}"


def test_node_usage_is_total_minus_used(samples_dir: Path) -> None:
    by_node = {u.node_id[:4]: u.free() for u in usage(samples_dir)}
    assert by_node["8354"]["GPU"] == 1.0 and by_node["4eed"]["GPU"] == 2.0


def test_unplaceable_groups_and_actor_are_named_with_the_numbers(samples_dir: Path) -> None:
    big = pending_pg(samples_dir, "global_pool", [{"GPU": 8.0}])
    spread = pending_pg(samples_dir, "spread", [{"GPU": 1.0}] * 4)
    huge = ActorRow(
        "a" * 32, "HugeLearner", "huge", "PENDING_CREATION", "03000000", "", None, 0, {"GPU": 8.0, "CPU": 1.0}
    )
    # the sample cluster: three alive nodes, two with 2 GPUs (one of them has 1 in use)
    table = [*nodes(samples_dir)]
    third = copy.deepcopy(load(samples_dir, "v0_nodes.json")["data"]["result"]["result"][0])
    third["node_id"] = "835465adeb0cc791a88c373fe406be9a6c57afe0d557e1a99415b610"
    table.append(parse.node_from_state(third))
    report = pending_report([huge], [big, spread], table, usage(samples_dir), STATUS_WITH_DEMANDS)
    lines = report.lines()
    assert report.stuck and len(lines) == 3  # the demands they explain are not said twice
    assert lines[0] == (
        "placement group `global_pool` PENDING: 1 bundle of {GPU: 8} (PACK); "
        "largest free on any node: GPU 2; "
        "no node has GPU 8 (the most on one node: 2): it can never be placed on these nodes"
    )
    assert lines[1].startswith("placement group `spread` PENDING: 4 bundles of {GPU: 1} (STRICT_SPREAD)")
    assert "STRICT_SPREAD needs 4 different nodes, 2 of the 3 alive nodes can hold a bundle" in lines[1]
    assert lines[2].startswith("actor HugeLearner `huge` PENDING_CREATION: asks for {CPU: 1, GPU: 8}")
    assert all(item.infeasible for item in report.items)


def test_a_group_that_only_waits_for_busy_gpus_is_not_called_infeasible(samples_dir: Path) -> None:
    busy = pending_pg(samples_dir, "two", [{"GPU": 1.0}, {"GPU": 1.0}])
    status = STATUS_WITH_DEMANDS.replace("{'GPU': 1.0} * 4 (STRICT_SPREAD)", "{'GPU': 1.0} * 2 (PACK)")
    used = parse.node_usage(
        {"loadMetricsReport": {"usageByNode": {n.node_id: {"GPU": [2.0, 2.0]} for n in nodes(samples_dir)}}}
    )
    report = pending_report([], [busy], nodes(samples_dir), used, status)
    item = report.items[0]
    assert not item.infeasible, item.sentence
    assert (
        "largest free on any node: GPU 0" in item.sentence
        and "other actors or placement groups hold them" in item.sentence
    )


def test_nothing_pending_is_not_stuck(samples_dir: Path) -> None:
    report = pending_report(
        [], [], nodes(samples_dir), usage(samples_dir), "Pending Demands:\n (no resource demands)"
    )
    assert not report.stuck and report.lines() == ["nothing pending (2 alive nodes)"]


def test_an_infeasible_task_demand_alone_is_reported(samples_dir: Path) -> None:
    status = "Pending Demands:\n {'GPU': 16.0}: 3+ pending tasks/actors\n"
    report = pending_report([], [], nodes(samples_dir), (), status)
    assert report.stuck
    assert report.lines() == [
        "infeasible demand in `ray status`: {'GPU': 16.0}: 3+ pending tasks/actors "
        "(no node has GPU 16 (the most on one node: 2))"
    ]


def test_a_group_bigger_than_the_whole_cluster_is_infeasible(samples_dir: Path) -> None:
    pg = pending_pg(samples_dir, "four", [{"GPU": 2.0}, {"GPU": 2.0}])
    report = pending_report([], [pg], nodes(samples_dir), (), "")
    assert report.items[0].infeasible
    assert "needs GPU 4 and the alive nodes have 2 in all" in report.items[0].sentence


def test_an_actor_restarting_after_its_host_died_is_named_with_why_it_cannot_come_back(
    samples_dir: Path,
) -> None:
    """A restartable actor pinned to a host (`node:<IP>`) whose host was lost: RESTARTING, and no alive
    node offers that resource, so it waits for the host to come back (the killed-host fault)."""
    pinned = ActorRow("b" * 32, "Beat", "", "RESTARTING", "04000000", "", None, 1, {"node:10.231.7.12": 0.01})
    report = pending_report([pinned], [], nodes(samples_dir), usage(samples_dir), "")
    assert report.stuck
    (line,) = report.lines()
    assert line.startswith(f"actor Beat {'b' * 12} RESTARTING: asks for {{node:10.231.7.12: 0.01}}"), line
    assert "it can never be scheduled on these nodes" in line
