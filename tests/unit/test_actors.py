"""The actor listing on dashboard JSON captured from Ray 2.60, and the filter-term parser (Hypothesis)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from cockpit.core.actors.listing import (
    ACTOR_STATES,
    KEYS,
    ActorQuery,
    actor_list,
    parse_query,
    server_filters,
)
from cockpit.core.cluster import parse
from cockpit.core.cluster.answers import envelope_data, state_listing
from cockpit.core.cluster.selectors import node_candidates


def load(samples_dir: Path, name: str) -> Any:
    return json.loads((samples_dir / name).read_text())


def actors(samples_dir: Path, name: str = "v0_actors.json"):  # type: ignore[no-untyped-def]
    return state_listing(load(samples_dir, name), "/api/v0/actors", parse.actor_row)


def summary(samples_dir: Path):  # type: ignore[no-untyped-def]
    doc = envelope_data(load(samples_dir, "v0_actors_summary.json"), "/api/v0/actors/summarize")
    return parse.actor_summary(doc["result"])


def nodes(samples_dir: Path):  # type: ignore[no-untyped-def]
    return state_listing(load(samples_dir, "v0_nodes.json"), "/api/v0/nodes", parse.node_from_state).rows


def test_summary_counts_every_state(samples_dir: Path) -> None:
    counted = summary(samples_dir)
    assert counted.total == 5
    assert counted.by_state() == {"ALIVE": 4, "DEAD": 1}
    assert counted.by_class["JobSupervisor"] == {"ALIVE": 1, "DEAD": 1}


def test_complete_list_has_roles_hosts_and_a_plain_count(samples_dir: Path) -> None:
    result = actor_list(actors(samples_dir), ActorQuery(), nodes(samples_dir), summary(samples_dir))
    assert result.complete and result.describe() == "5 actors"
    roles = {v.actor.name: v.role for v in result.rows}
    assert roles["trainer_0"] == "policy"  # by the pattern, not the table
    assert roles["gpu_worker"] is None  # `GpuWorker` says nothing: the UI shows the class
    assert roles["_ray_internal_job_actor_cockpit-test-3"] == "driver"
    assert {v.host for v in result.rows} == {"192.0.2.2"}
    assert result.by_state == {"ALIVE": 4, "DEAD": 1} and result.matching == 5


def test_without_a_summary_a_complete_list_counts_itself_and_a_cut_one_does_not(samples_dir: Path) -> None:
    """The Actors screen's later fetches ask for no summary while the list holds every actor: the counts
    must be those the summary gives; a cut list cannot count what it does not hold."""
    complete = actor_list(actors(samples_dir), ActorQuery(), nodes(samples_dir), None)
    counted = summary(samples_dir)
    assert complete.by_state == counted.by_state()
    assert complete.by_class == {cls: sum(states.values()) for cls, states in counted.by_class.items()}
    cut = actor_list(actors(samples_dir, "v0_actors_limit1.json"), ActorQuery(), (), None)
    assert cut.by_state == {} and cut.by_class == {}


def test_limited_list_says_showing_n_of_m_and_what_narrows_it(samples_dir: Path) -> None:
    # Captured with limit=1: the funnel says 5 matched, 1 returned.
    result = actor_list(actors(samples_dir, "v0_actors_limit1.json"), ActorQuery(), (), summary(samples_dir))
    assert not result.complete
    line = result.describe()
    assert line.startswith("showing 1 of 5 actors; narrow with ")
    assert "state:ALIVE (4)" in line and "class:" in line


def test_server_side_filter_counts_come_from_the_summary(samples_dir: Path) -> None:
    query = parse_query("class:Trainer")
    assert server_filters(query) == [("class_name", "=", "Trainer")]
    result = actor_list(actors(samples_dir, "v0_actors_filtered.json"), query)
    assert [v.actor.name for v in result.rows] == ["trainer_1", "trainer_0"]
    assert result.complete and result.meta.num_filtered == 2


def test_role_and_free_text_are_matched_here(samples_dir: Path) -> None:
    listing = actors(samples_dir)
    drivers = actor_list(listing, parse_query("role:driver"))
    assert {v.actor.class_name for v in drivers.rows} == {"JobSupervisor"}
    assert server_filters(parse_query("role:driver")) == []
    found = actor_list(listing, parse_query("gpu WORKER"))
    assert [v.actor.name for v in found.rows] == ["gpu_worker"]


def test_node_term_resolves_by_host_and_id_prefix(samples_dir: Path) -> None:
    table = nodes(samples_dir)
    assert len(node_candidates("192.0.2.2", table)) == 2  # both nodes share the IP: matched here
    head = node_candidates("837a", table)
    assert [n.node_id[:4] for n in head] == ["837a"]
    ids = [n.node_id for n in head]
    assert server_filters(parse_query("node:837a"), ids) == [("node_id", "=", ids[0])]
    result = actor_list(actors(samples_dir), parse_query("node:837a"), table, node_ids=ids)
    assert {v.actor.node_id for v in result.rows} == set(ids) and len(result.rows) == 4


def test_unknown_state_is_a_problem_not_a_filter() -> None:
    query = parse_query("state:sleeping rollout")
    assert query.state == "" and query.words == ("rollout",)
    assert query.problems and "unknown state 'SLEEPING'" in query.problems[0]


def test_full_query_text() -> None:
    query = parse_query("state:alive role:Rollout node:host-1 job:02000000 class:Foo free text")
    assert query == ActorQuery(
        state="ALIVE", role="rollout", node="host-1", job="02000000", class_name="Foo", words=("free", "text")
    )
    assert server_filters(query) == [
        ("state", "=", "ALIVE"),
        ("job_id", "=", "02000000"),
        ("class_name", "=", "Foo"),
    ]


_value = st.text(st.characters(blacklist_categories=("Z", "C")), min_size=1, max_size=12)
_word = _value.filter(lambda w: w.partition(":")[0].lower() not in KEYS)


@given(
    state=st.sampled_from(("", *ACTOR_STATES)),
    role=st.one_of(st.just(""), _value.map(str.lower)),
    node=st.one_of(st.just(""), _value),
    job=st.one_of(st.just(""), _value),
    class_name=st.one_of(st.just(""), _value),
    words=st.lists(_word, max_size=4).map(tuple),
)
def test_query_text_round_trips(
    state: str, role: str, node: str, job: str, class_name: str, words: tuple[str, ...]
) -> None:
    query = ActorQuery(state=state, role=role, node=node, job=job, class_name=class_name, words=words)
    assert parse_query(query.text()) == query


@given(st.text(max_size=80))
def test_parser_never_raises_and_keeps_every_free_word(text: str) -> None:
    query = parse_query(text)
    assert all(word in text for word in query.words)
    assert query.state in ("", *ACTOR_STATES)
    assert all(w.partition(":")[0].lower() not in KEYS or not w.partition(":")[1] for w in query.words)


def test_age_comes_from_the_alive_worker_with_the_same_node_and_pid(samples_dir: Path) -> None:
    workers = state_listing(load(samples_dir, "v0_workers.json"), "/api/v0/workers", parse.worker_row).rows
    result = actor_list(actors(samples_dir), ActorQuery(), workers=workers)
    started = {v.actor.name: v.started for v in result.rows}
    assert started["trainer_1"] == 1795642106.129  # worker pid 7508's start_time_ms
    assert started["_ray_internal_job_actor_cockpit-test-2"] is None  # dead: no age
