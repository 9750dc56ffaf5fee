"""`ActorIndex`: the Actors screen's local filter and sort, checked against a plain reading of the terms."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cockpit.core.actors.listing import ACTOR_STATES, ActorView, parse_query
from cockpit.core.actors.roles import role_of
from cockpit.core.actors.table import SORT_COLUMNS, ActorIndex
from cockpit.core.cluster import parse
from cockpit.core.cluster.selectors import node_candidates
from cockpit.core.snapshots import ActorRow
from tests.harness.properties import examples

CLASSES = ("RolloutWorker", "PolicyTrainer", "Critic", "WorkerDict", "Mystery")
HOSTS = ("gpu-a1", "gpu-a10", "gpu-b1", "")
"""gpu-a1 names one host, though it starts another's name (`cockpit.core.cluster.selectors`)."""


def view(
    i: int, state: str = "ALIVE", cls: str = "RolloutWorker", host: str = "gpu-a1", **kw: object
) -> ActorView:
    actor = ActorRow(
        actor_id=f"{i:032x}",
        class_name=cls,
        name=str(kw.get("name", f"{cls.lower()}_{i}")),
        state=state,
        job_id=str(kw.get("job", "02000000")),
        node_id=f"{(i % 4):056x}" if host else "",
        pid=1000 + i if state == "ALIVE" else None,
        num_restarts=int(kw.get("restarts", 0)),  # type: ignore[call-overload]
        required_resources={"GPU": 1.0} if cls != "Mystery" else {},
        death_cause="killed by the test" if state == "DEAD" else "",
    )
    return ActorView(actor=actor, role=role_of(cls, actor.name) or None, host=host, started=1000.0 + i)


def rows() -> list[ActorView]:
    return [
        view(i, ACTOR_STATES[i % 5], CLASSES[i % 5], HOSTS[i % 4], restarts=i % 3, job=f"0{i % 2 + 1}000000")
        for i in range(60)
    ]


def test_terms_filter_as_their_keys_say() -> None:
    index = ActorIndex.build(rows())
    dead = [index.rows[i] for i in index.order(parse_query("state:dead"))]
    assert dead and all(v.actor.state == "DEAD" for v in dead)
    assert len(dead) == sum(1 for v in index.rows if v.actor.state == "DEAD")
    rollout = [index.rows[i] for i in index.order(parse_query("role:ROLLOUT"))]
    assert rollout and {v.role for v in rollout} == {"rollout"}
    on_b = [index.rows[i] for i in index.order(parse_query("node:gpu-b"))]
    assert on_b and {v.host for v in on_b} == {"gpu-b1"}
    on_a1 = [index.rows[i] for i in index.order(parse_query("node:GPU-A1"))]  # the host, not gpu-a10 too
    assert on_a1 and {v.host for v in on_a1} == {"gpu-a1"}
    on_a = [index.rows[i] for i in index.order(parse_query("node:gpu-a"))]  # a filter: every node it starts
    assert {v.host for v in on_a} == {"gpu-a1", "gpu-a10"}
    job = [index.rows[i] for i in index.order(parse_query("job:01"))]
    assert job and {v.actor.job_id for v in job} == {"01000000"}
    critic = [index.rows[i] for i in index.order(parse_query("class:critic state:ALIVE"))]
    assert all(v.actor.class_name == "Critic" and v.actor.state == "ALIVE" for v in critic)
    words = [index.rows[i] for i in index.order(parse_query("rolloutworker_10"))]
    assert [v.actor.name for v in words] == ["rolloutworker_10"]


def test_a_submission_id_finds_its_jobs_actors() -> None:
    index = ActorIndex.build(rows())
    jobs = {"raysubmit_x": "02000000"}
    found = [index.rows[i] for i in index.order(parse_query("job:raysubmit_x"), job_ids=jobs)]
    assert found and {v.actor.job_id for v in found} == {"02000000"}
    assert not index.order(parse_query("job:raysubmit_unknown"), job_ids={"raysubmit_x": "02000000"})


def test_state_sort_puts_stuck_first_and_dead_last_and_reverse_flips_it() -> None:
    index = ActorIndex.build(rows())
    states = [index.rows[i].actor.state for i in index.sorted_order("state")]
    assert states[0] == "PENDING_CREATION" and states[-1] == "DEAD"
    assert index.rows[index.sorted_order("state", reverse=True)[0]].actor.state == "DEAD"


def test_filter_keeps_the_sort_order() -> None:
    index = ActorIndex.build(rows())
    order = index.order(parse_query("state:ALIVE"), sort="restarts")
    restarts = [index.rows[i].actor.num_restarts for i in order]
    assert restarts == sorted(restarts, reverse=True)


def test_every_column_sorts_every_row_once() -> None:
    index = ActorIndex.build(rows())
    for column in SORT_COLUMNS:
        assert sorted(index.sorted_order(column)) == list(range(len(index)))
    with pytest.raises(ValueError, match="no column"):
        index.sorted_order("colour")


def test_position_of_follows_an_actor_and_says_none_when_filtered_out() -> None:
    index = ActorIndex.build(rows())
    order = index.order(parse_query(""), sort="class")
    target = index.rows[order[7]].actor.actor_id
    assert index.position_of(target, order) == 7
    narrowed = index.order(parse_query("state:DEAD"))
    if index.rows[index.positions[target]].actor.state != "DEAD":
        assert index.position_of(target, narrowed) is None
    assert index.position_of("not-an-actor", order) is None


def test_real_rows_from_the_captured_sample(samples_dir: Path) -> None:
    data = json.loads((samples_dir / "v0_actors.json").read_text())
    actors = [parse.actor_row(r) for r in data["data"]["result"]["result"]]
    index = ActorIndex.build([ActorView(a, role_of(a.class_name, a.name) or None, "vm") for a in actors])
    trainers = index.order(parse_query("class:Trainer"))
    assert {index.rows[i].actor.class_name for i in trainers} == {"Trainer"}
    assert index.order(parse_query("role:driver"))  # the JobSupervisor


@dataclass(frozen=True)
class _Node:
    node_id: str
    ip: str
    hostname: str


WORDS = st.text(alphabet="abcdefgijlnoprstuvwxyzABDGJR_-.0123456789:", min_size=0, max_size=12)
"""Enough to spell every key (`job:`, `node:gpu-a1`, `class:pkg.Critic`), in any case."""


@settings(max_examples=examples(200), deadline=None)
@given(
    text=st.lists(WORDS, max_size=3).map(" ".join), sort=st.sampled_from(SORT_COLUMNS), reverse=st.booleans()
)
def test_any_filter_is_the_rows_a_plain_reading_keeps(text: str, sort: str, reverse: bool) -> None:
    """Whatever is typed: no error, a subset in sort order, and exactly the rows each term keeps."""
    index = ActorIndex.build(rows())
    query = parse_query(text)
    order = index.order(query, sort, reverse)
    base = index.sorted_order(sort, reverse)
    assert list(order) == [i for i in base if i in set(order)]

    hosts = {v.actor.node_id: v.host for v in index.rows if v.actor.node_id}
    nodes = [_Node(node_id, "", host) for node_id, host in hosts.items()]
    named = {n.node_id for n in node_candidates(query.node, nodes)} if query.node else set()

    def keeps(v: ActorView) -> bool:
        a = v.actor
        hay = "|".join((a.class_name, a.name, a.actor_id, a.repr_name, v.role or "", v.host, a.state)).lower()
        return (
            (not query.state or a.state == query.state)
            and (not query.role or (v.role or "") == query.role)
            and (not query.class_name or a.class_name.lower() == query.class_name.lower())
            and (not query.job or a.job_id.lower().startswith(query.job.lower()))
            and (not query.node or a.node_id in named)
            and all(w.lower() in hay for w in query.words)
        )

    assert set(order) == {i for i, v in enumerate(index.rows) if keeps(v)}


@settings(max_examples=examples(150), deadline=None)
@given(
    texts=st.lists(st.lists(WORDS, max_size=3).map(" ".join), min_size=1, max_size=6),
    sort=st.sampled_from(SORT_COLUMNS),
    reverse=st.booleans(),
)
def test_typing_on_one_index_gives_what_a_fresh_index_gives(
    texts: list[str], sort: str, reverse: bool
) -> None:
    """Each keystroke may narrow the last result instead of every row; whatever is typed, in whatever
    order (characters added, deleted, terms changed), the rows are those a fresh index gives."""
    typed = ActorIndex.build(rows())
    for text in [t[:n] for t in texts for n in range(len(t) + 1)]:
        assert list(typed.order(parse_query(text), sort, reverse)) == list(
            ActorIndex.build(rows(), presort=None).order(parse_query(text), sort, reverse)
        ), text
