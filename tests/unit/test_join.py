from __future__ import annotations

from cockpit.core.cluster.join import JoinProgress
from cockpit.core.snapshots import NodeSnapshot


def node(i: int, state: str = "ALIVE", gpus: float = 2, reason: str = "") -> NodeSnapshot:
    return NodeSnapshot(
        node_id=f"{i:08x}" * 7,
        ip="10.0.0.1",
        hostname=f"gpu{i}",
        is_head=i == 0,
        state=state,
        state_message=reason,
        start_time=1.0,
        end_time=None,
        logical_cpus=8,
        logical_gpus=gpus,
    )


def test_waiting_names_what_is_missing() -> None:
    progress = JoinProgress.of([node(0), node(1)], expected_nodes=4, expected_gpus=8)
    assert not progress.ready
    assert (progress.missing_nodes, progress.missing_gpus) == (2, 4)
    assert progress.summary() == "2/4 nodes, 4/8 GPUs — waiting: 2 nodes, 4 GPUs missing"


def test_dead_nodes_do_not_count_and_keep_their_reason() -> None:
    reason = "Unexpected termination: health check failed due to missing too many heartbeats"
    progress = JoinProgress.of([node(0), node(1), node(2, "DEAD", reason=reason)], expected_nodes=3)
    assert progress.alive_nodes == 2 and progress.missing_nodes == 1
    assert progress.summary().endswith("; 1 dead")
    assert reason in progress.death_lines()[0]


def test_ready_without_expectations() -> None:
    progress = JoinProgress.of([node(0)])
    assert progress.ready and progress.summary() == "1 nodes, 2 GPUs — ready"
