"""The words of the Actors screen's details pane (`cockpit.ui.widgets.actor_details`) on dashboard JSON
captured from Ray 2.60: labels in reading order, each value worded and cut, hostile text shown as text.
What the core hands it (typed values, the runtime env masked): tests/unit/test_actor_details.py."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from cockpit.core.actors.details import actor_details
from cockpit.core.actors.listing import ActorView
from cockpit.core.snapshots import ActorRow, NodeSnapshot, PlacementGroupRow
from cockpit.core.text import CONTROLS
from cockpit.ui.widgets.actor_details import MAX_VALUE_CHARS, bundles_text, detail_pairs, details_text
from tests.unit.test_actor_details import HOSTILE, sample_actors, sample_group, sample_node


def details(view: ActorView, **kwargs: Any) -> dict[str, str]:
    kwargs.setdefault("node", None)
    kwargs.setdefault("placement_group", None)
    return dict(detail_pairs(actor_details(view, **kwargs)))


def test_sample_actor_reads_in_order(samples_dir: Path) -> None:
    actor = sample_actors(samples_dir)["trainer_1"]
    node = sample_node(samples_dir, actor.node_id)
    view = ActorView(actor=actor, role="learner", host=node.hostname, started=1_000.0)
    pairs = detail_pairs(actor_details(view, node=node, placement_group=None, now=1_065.0))
    assert [label for label, _ in pairs] == [
        "Actor id",
        "Class",
        "Name",
        "Role",
        "State",
        "Restarts",
        "Job",
        "Node",
        "PID",
        "Started",
        "Resources",
        "GPUs",
        "Placement group",
        "Runtime env",
    ]
    got = dict(pairs)
    assert got["Actor id"] == "505b494baa0d9e12451cf10402000000"
    assert (got["Class"], got["Name"], got["Role"], got["State"]) == (
        "Trainer",
        "trainer_1",
        "learner",
        "ALIVE",
    )
    assert got["Node"] == "192.0.2.2 · 837a4760"  # the sample's node is named by its IP: shown once
    assert (got["PID"], got["Job"], got["Restarts"]) == ("7508", "02000000", "0")
    assert got["Started"].startswith("1m05s ago (")
    assert got["Resources"] == "{CPU: 0.1}" and got["GPUs"] == "none" and got["Placement group"] == "none"
    assert got["Runtime env"].splitlines() == [
        "env_vars:",
        "  RAY_worker_niceness: 0",
        "  STEPS: 900",
        "working_dir: gcs://_ray_pkg_ee56dcfc36f39836.zip",
    ]
    # Laid out: labels in a column, the runtime env's lines indented under its first.
    lines = details_text(pairs).plain.splitlines()
    assert lines[0] == "Actor id         505b494baa0d9e12451cf10402000000"
    assert lines[-4:] == [
        "Runtime env      env_vars:",
        "    RAY_worker_niceness: 0",
        "    STEPS: 900",
        "  working_dir: gcs://_ray_pkg_ee56dcfc36f39836.zip",
    ]


def test_repr_name_is_shown_when_given(samples_dir: Path) -> None:
    actor = replace(sample_actors(samples_dir)["trainer_1"], repr_name="Trainer(rank=1)")
    pairs = detail_pairs(actor_details(ActorView(actor, None, ""), node=None, placement_group=None))
    labels = [label for label, _ in pairs]
    assert labels[labels.index("Name") + 1] == "Repr name" and dict(pairs)["Repr name"] == "Trainer(rank=1)"


def test_dead_actor_says_why(samples_dir: Path) -> None:
    dead = next(a for a in sample_actors(samples_dir).values() if a.state == "DEAD")
    got = details(ActorView(actor=dead, role=None, host=""))
    assert "worker process has died" in got["Death cause"]
    assert got["Role"] == "unknown (class shown)" and got["Started"] == "unknown"
    assert got["Node"] == "837a4760 · (not in the node table)"
    assert details(ActorView(replace(dead, death_cause=""), None, ""))["Death cause"] == "none given"
    assert "Death cause" not in details(ActorView(replace(dead, state="ALIVE"), None, ""))


def test_node_dead_and_not_placed(samples_dir: Path) -> None:
    actor = sample_actors(samples_dir)["gpu_worker"]
    node = replace(sample_node(samples_dir, actor.node_id), hostname="gpu-a", state="DEAD")
    assert (
        details(ActorView(actor, "rollout", "gpu-a"), node=node)["Node"]
        == "gpu-a · 192.0.2.2 · 4eed9171 (dead)"
    )
    pending = replace(actor, node_id="", pid=None, state="PENDING_CREATION")
    got = details(ActorView(pending, "rollout", ""))
    assert got["Node"] == "not placed" and got["PID"] == "none"


def test_gpus_from_telemetry_or_logical_only(samples_dir: Path) -> None:
    view = ActorView(sample_actors(samples_dir)["gpu_worker"], "rollout", "")
    assert details(view, gpus=[(0, 87.4), (3, None)])["GPUs"] == "0: 87%, 3: N/A"
    assert details(view)["GPUs"] == "logical only (1 requested)"
    assert details(view)["Resources"] == "{CPU: 0.1, GPU: 1}"


def test_placement_group_and_its_bundles_on_this_node(samples_dir: Path) -> None:
    group = sample_group(samples_dir)
    actor = replace(sample_actors(samples_dir)["trainer_0"], placement_group_id=group.placement_group_id)
    got = details(ActorView(actor, None, ""), placement_group=group)
    assert (
        got["Placement group"] == "my_pg (5b7a2df6) · CREATED · 2 x {CPU: 0.1} · bundles #0, #1 on this node"
    )
    unread = details(ActorView(actor, None, ""))["Placement group"]
    assert unread == "5b7a2df6 (not in the placement group list)"


def test_bundle_indices_on_a_node() -> None:
    assert bundles_text((0, 2, 3, 4, 7)) == "bundles #0, #2-#4, #7 on this node"
    assert bundles_text((1, 6)) == "bundles #1, #6 on this node"
    assert bundles_text((1,)) == "bundle #1 on this node"
    assert bundles_text(()) == "no bundle on this node"


def test_hostile_actor_fields_are_cut_and_shown_as_text() -> None:
    row = ActorRow(
        HOSTILE, HOSTILE, HOSTILE, "DEAD", HOSTILE, HOSTILE, None, 0, {HOSTILE: 1.0}, HOSTILE, HOSTILE
    )
    group = PlacementGroupRow(HOSTILE, HOSTILE, HOSTILE, HOSTILE, ({HOSTILE: float("inf")},), (HOSTILE,))
    node = NodeSnapshot(HOSTILE, HOSTILE, HOSTILE, False, HOSTILE, HOSTILE, None, None, 0.0, 0.0)
    view = ActorView(
        replace(row, placement_group_id=HOSTILE, runtime_env=HOSTILE), HOSTILE, HOSTILE, float("nan")
    )
    core = actor_details(
        view, node=node, placement_group=group, gpus=[(0, float("inf"))] * 1000, now=float("inf")
    )
    pairs = detail_pairs(core)
    got = dict(pairs)
    assert all(len(value) <= MAX_VALUE_CHARS == 300 for value in got.values())
    assert got["Class"].startswith("[bold red]x[/]")  # markup is text: the pane shows it as such
    assert got["Started"] == "unknown" and got["Runtime env"].startswith("(runtime env not readable: ")
    # On the pane: the markup as written, no escape or control character, one line per pair.
    text = details_text(pairs)
    assert all(not span.style or span.style == "bold" for span in text.spans)  # the labels only
    line = next(line for line in text.plain.splitlines() if line.startswith("Class"))
    assert "[bold red]x[/]" in line and not CONTROLS.search(text.plain.replace("\n", ""))
    assert len(text.plain.splitlines()) == len(pairs)
