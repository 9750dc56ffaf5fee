"""The one selector grammar (`cockpit.core.cluster.selectors`): what an actor or node selector names, the
one-line errors for none or several, and hostile selector and cluster text (Hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cockpit.core.cluster.errors import SelectorError
from cockpit.core.cluster.selectors import (
    ACTOR_SELECTOR,
    NODE_SELECTOR,
    SHOWN,
    actor_candidates,
    node_candidates,
    pick_actor,
    pick_node,
)
from cockpit.core.errors import is_permanent
from cockpit.core.snapshots import ActorRow, NodeSnapshot
from tests.harness.hostile import controls, hostile_cluster, hostile_text


def actor(actor_id: str, name: str = "", state: str = "ALIVE", job: str = "02000000") -> ActorRow:
    return ActorRow(
        actor_id=actor_id,
        class_name="RolloutWorker",
        name=name,
        state=state,
        job_id=job,
        node_id="ab" * 28,
        pid=4242,
        num_restarts=0,
    )


def node(node_id: str, ip: str, hostname: str, state: str = "ALIVE") -> NodeSnapshot:
    return NodeSnapshot(
        node_id=node_id,
        ip=ip,
        hostname=hostname,
        is_head=False,
        state=state,
        state_message="",
        start_time=1.0,
        end_time=None,
        logical_cpus=8,
        logical_gpus=2,
    )


A1 = "1a2b3c4d" + "0" * 24
A2 = "1a2bffff" + "0" * 24
A3 = "99999999" + "1" * 24
ACTORS = [
    actor(A1, "RolloutWorker_0"),
    actor(A2, "RolloutWorker_1"),
    actor(A3, "1a2b"),  # a name that is also the start of two ids
]

N1 = "3f2a" + "0" * 52
N2 = "3f2b" + "1" * 52
N3 = "77aa" + "2" * 52
NODES = [
    node(N1, "10.0.0.1", "gpu1"),
    node(N2, "10.0.0.2", "gpu10"),
    node(N3, "10.0.0.3", "gpu-b7"),
]


# -- actors ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("selector", "chosen"),
    [
        (A1, A1),  # the whole id
        (A1.upper(), A1),  # ids in any case
        ("1a2b3", A1),  # the start of one
        ("RolloutWorker_1", A2),  # a name
        ("  RolloutWorker_1 ", A2),  # surrounding space is no part of it
        ("1a2b", A3),  # a name wins over the start of ids
        ("9999", A3),
    ],
)
def test_an_actor_selector_names_one_actor(selector: str, chosen: str) -> None:
    assert pick_actor(selector, ACTORS).actor_id == chosen


def test_an_actor_name_is_exact() -> None:
    with pytest.raises(SelectorError) as info:
        pick_actor("rolloutworker_0", ACTORS)
    assert str(info.value) == f"no actor 'rolloutworker_0' ({ACTOR_SELECTOR})."
    assert actor_candidates("RolloutWorker", ACTORS) == ()  # nor the start of a name


def test_an_ambiguous_actor_selector_is_one_line_with_its_candidates() -> None:
    with pytest.raises(SelectorError) as info:
        pick_actor("1a2", ACTORS)
    assert str(info.value) == (
        "'1a2' matches 2 actors: 1a2b3c4d0000 (job 02000000), 1a2bffff0000 (job 02000000); "
        "give more of its id."
    )
    assert is_permanent(info.value)


def test_of_several_the_only_alive_one_is_meant() -> None:
    """A name a new actor took over from dead ones (a job run again)."""
    again = [actor(A1, "Trainer", "DEAD", job="01000000"), actor(A2, "Trainer"), actor(A3, "Trainer", "DEAD")]
    assert pick_actor("Trainer", again).actor_id == A2
    with pytest.raises(SelectorError, match=r"^'Trainer' matches 2 actors: .*\(job 01000000, DEAD\)"):
        pick_actor("Trainer", [again[0], again[2]])  # none alive: which one is not for the cockpit to guess
    with pytest.raises(SelectorError, match=r"^no alive actor 'Trainer' "):
        pick_actor("Trainer", [again[0]], alive_only=True)


def test_many_candidates_are_counted_not_all_listed() -> None:
    many = [actor(f"{i:032x}", "w") for i in range(SHOWN + 3)]
    with pytest.raises(SelectorError) as info:
        pick_actor("w", many)
    assert str(info.value).startswith(f"'w' matches {SHOWN + 3} actors: ")
    assert " and 3 more; " in str(info.value)


def test_a_search_of_part_of_the_actors_says_so() -> None:
    with pytest.raises(SelectorError, match=r"^no actor 'abc' among the first 10000 actors \("):
        pick_actor("abc", ACTORS, searched_all=False)


# -- nodes -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("selector", "chosen"),
    [
        (N1, N1),
        ("3f2a", N1),  # the start of an id
        ("10.0.0.2", N2),  # an IP
        ("gpu1", N1),  # a host name wins over the start of another (gpu10)
        ("GPU10", N2),  # host names in any case
        ("gpu-b", N3),  # the start of a host name
        ("77", N3),
    ],
)
def test_a_node_selector_names_one_node(selector: str, chosen: str) -> None:
    assert pick_node(selector, NODES).node_id == chosen


def test_an_ip_is_whole() -> None:
    with pytest.raises(SelectorError) as info:
        pick_node("10.0.0", NODES)
    assert str(info.value) == f"no node '10.0.0' ({NODE_SELECTOR})."


def test_an_ambiguous_node_selector_lists_host_ip_and_id() -> None:
    with pytest.raises(SelectorError) as info:
        pick_node("3f2", NODES)
    assert (
        str(info.value)
        == "'3f2' matches 2 nodes: gpu1 10.0.0.1 (3f2a0000), gpu10 10.0.0.2 (3f2b1111); give more of its id."
    )
    assert node_candidates("gpu", NODES) == tuple(NODES)  # a filter keeps them all


def test_a_host_whose_node_came_back_is_the_alive_node() -> None:
    back = [node(N1, "10.0.0.1", "gpu1", "DEAD"), node(N2, "10.0.0.1", "gpu1")]
    assert pick_node("gpu1", back).node_id == N2
    assert pick_node("10.0.0.1", back).node_id == N2
    with pytest.raises(SelectorError, match=r"^no alive node '3f2a' "):
        pick_node("3f2a", back, alive_only=True)


@pytest.mark.parametrize("selector", ["", "   ", "\t\n"])
def test_an_empty_selector_is_an_error(selector: str) -> None:
    with pytest.raises(SelectorError, match=f"^an empty actor selector: give {ACTOR_SELECTOR}.$"):
        pick_actor(selector, ACTORS)
    with pytest.raises(SelectorError, match=f"^an empty node selector: give {NODE_SELECTOR}.$"):
        pick_node(selector, NODES)


# -- hostile text ------------------------------------------------------------------------------------------


@given(selector=hostile_text, cluster=hostile_cluster())
def test_hostile_selectors_and_clusters_give_one_clean_line_or_a_match(
    selector: str, cluster: tuple[tuple[NodeSnapshot, ...], list[ActorRow]]
) -> None:
    """Whatever the selector and the cluster's text: a node or actor it names, or a SelectorError whose
    message is one line a terminal cannot act on; never another exception."""
    nodes, actors = cluster
    for pick, things in ((pick_node, nodes), (pick_actor, actors)):
        try:
            found = pick(selector, things)  # type: ignore[operator]
        except SelectorError as exc:
            message = str(exc)
            assert not controls(message) and "\x1b" not in message and "\x9b" not in message
        else:
            assert found in things


@given(name=hostile_text.filter(lambda s: s.strip() == s and s != ""))
def test_any_name_finds_its_actor(name: str) -> None:
    """A name is matched exactly as the cluster wrote it, escapes and all."""
    other = actor(A2, name + "x")
    assert pick_actor(name, [actor(A3, name, "DEAD"), other, actor(A1, name)]).actor_id == A1


@given(st.integers(0, 31))
def test_every_start_of_a_unique_id_finds_it(length: int) -> None:
    unique = [actor(A3, "other"), actor(A1, "w")]
    assert pick_actor(A1[: length + 1], unique).actor_id == A1
