"""A node Ray still lists as alive but that stopped reporting (`cockpit.core.cluster.liveness`): said
after `SILENT_AFTER` seconds on the cockpit's own clock, whatever the node's clock says; and its frozen
readings are no evidence for the hang watch (the partitioned-host fault, RELIABILITY.md)."""

from __future__ import annotations

import dataclasses

from cockpit.core.cluster.liveness import SILENT_AFTER, NodeSilence
from cockpit.core.doctor.hang import hang_policy
from cockpit.core.doctor.progress import gpu_readings, role_readings
from cockpit.core.doctor.watch import HangWatch
from cockpit.core.snapshots import NodeSnapshot
from tests.unit.test_hang_watch import JOB, PLACE, node, nodes


def reported(snapshot: NodeSnapshot, at: float | None, alive: bool = True) -> NodeSnapshot:
    return dataclasses.replace(snapshot, sample_time=at, state="ALIVE" if alive else "DEAD")


def test_a_node_whose_reading_stops_moving_is_silent_after_the_limit_on_the_callers_clock() -> None:
    silence = NodeSilence()
    a, b = node("a", "10.0.0.1", []), node("b", "10.0.0.2", [])
    # b's clock is a day behind: only whether its sample time moves counts, never its value.
    for second in range(0, 40, 5):
        behind = 1e9 - 86400.0 + min(second, 10)
        answer = silence.update([reported(a, 1e9 + second), reported(b, behind)], second)
        quiet_for = second - 10
        if quiet_for >= SILENT_AFTER:
            assert answer == {"b": quiet_for}
        else:
            assert answer == {}
    # It reports again: answering at once.
    assert silence.update([reported(a, 1e9 + 45), reported(b, 1e9 - 86400.0 + 45)], 45.0) == {}


def test_dead_nodes_and_nodes_that_never_reported_are_not_called_silent() -> None:
    silence = NodeSilence(after=5.0)
    dead, fresh = node("dead", "10.0.0.1", []), node("fresh", "10.0.0.2", [])
    for second in (0.0, 10.0, 20.0):
        assert silence.update([reported(dead, 5.0, alive=False), reported(fresh, None)], second) == {}


def test_a_silent_node_s_frozen_readings_are_not_known_to_the_hang_watch() -> None:
    """The policy node is cut off while its GPU last read 90 %: the dashboard keeps serving that reading.
    Its GPUs keep their places (the others' indices do not shift) but read as not known, for the
    movement check and for the straggler hint alike."""
    snapshot = nodes(rollout=0.0, policy=90.0)
    assert gpu_readings(snapshot, PLACE.nodes, silent={"w1"}) == [0.0, 0.0, None]
    assert gpu_readings(snapshot, PLACE.nodes) == [0.0, 0.0, 90.0]
    assert role_readings(snapshot, PLACE, silent={"w1"}) == {"rollout": [0.0, 0.0], "policy": [None]}


def test_the_hang_watch_finds_silent_nodes_itself() -> None:
    watch = HangWatch(JOB, hang_policy(None, override=600.0), 0.0)
    watch.placed(PLACE, 0.0)
    for second in range(0, 60, 5):
        watch.check([reported(n, second if n.node_id != "w1" else 0.0) for n in nodes(0.0, 90.0)], second)
    assert watch.silence.update([reported(n, 60.0 if n.node_id != "w1" else 0.0) for n in nodes(0.0, 90.0)],
                                60.0).keys() == {"w1"}  # fmt: skip


def test_the_node_table_says_not_answering_until_ray_gives_up() -> None:
    from cockpit.ui.widgets.node_table import node_cells

    alive, dead = node("w1", "10.0.0.2", []), reported(node("w1", "10.0.0.2", []), 0.0, alive=False)
    dead = dataclasses.replace(dead, state_message="health check failed due to missing too many heartbeats")
    assert node_cells(alive, 100.0)["state"].plain == "ALIVE"
    assert node_cells(alive, 100.0, silent_for=25.0)["state"].plain == "not answering (25s)"
    cells = node_cells(dead, 100.0, silent_for=25.0)  # Ray gave up: its word, and its reason
    assert (cells["state"].plain, cells["reason"].plain) == ("DEAD", dead.state_message)
