"""What the Actors screen's details pane knows about an actor (typed values, on dashboard JSON captured
from Ray 2.60), and runtime env masking (secrets by name and by shape, malformed and hostile text;
Hypothesis for the secret-named env_vars). The pane's words: tests/ui/test_actor_details_pane.py."""

from __future__ import annotations

import json
import string
from dataclasses import replace
from pathlib import Path
from typing import Any

from hypothesis import assume, given
from hypothesis import strategies as st

from cockpit.core.actors.details import (
    MAX_LINE_CHARS,
    MAX_LINES,
    SECRET_NAME_PARTS,
    SECRET_NAMES,
    ActorDetails,
    ActorPlace,
    GroupPlace,
    actor_details,
    bundles_on_node,
    is_secret_name,
    mask_runtime_env,
)
from cockpit.core.actors.listing import ActorView
from cockpit.core.cluster import parse
from cockpit.core.cluster.answers import state_listing
from cockpit.core.snapshots import ActorRow, NodeSnapshot, PlacementGroupRow
from cockpit.core.text import CONTROLS, MASK

WANDB_KEY = "6f1e0c1b2a3d4e5f60718293a4b5c6d7e8f90a1b"
HF_TOKEN = "hf_QmVtZXJnZW5jeVRva2VuRm9yVGVzdHM"
URL_PASSWORD = "s3cr3t-Pa55"
GITHUB_TOKEN = "ghp_R4nd0mLook1ngT0kenV4lue"
OPENAI_KEY = "sk-proj-abcDEF123456ghiJKL"
HOSTILE = "[bold red]x[/]\x1b[2J\x00\n" + "y" * 10_000_000


def load(samples_dir: Path, name: str) -> Any:
    return json.loads((samples_dir / name).read_text())


def sample_actors(samples_dir: Path) -> dict[str, ActorRow]:
    rows = state_listing(load(samples_dir, "v0_actors.json"), "/api/v0/actors", parse.actor_row).rows
    return {row.name: row for row in rows}


def sample_node(samples_dir: Path, node_id: str) -> NodeSnapshot:
    rows = state_listing(load(samples_dir, "v0_nodes.json"), "/api/v0/nodes", parse.node_from_state).rows
    return next(node for node in rows if node.node_id == node_id)


def sample_group(samples_dir: Path) -> PlacementGroupRow:
    doc = load(samples_dir, "v0_pgs.json")
    return state_listing(doc, "/api/v0/placement_groups", parse.placement_group_row).rows[0]


def details(view: ActorView, **kwargs: Any) -> ActorDetails:
    kwargs.setdefault("node", None)
    kwargs.setdefault("placement_group", None)
    return actor_details(view, **kwargs)


def env(**env_vars: str) -> str:
    return json.dumps({"env_vars": env_vars, "working_dir": "gcs://_ray_pkg_ee56dcfc36f39836.zip"})


# What the details pane knows, typed (its words: tests/ui/test_actor_details_pane.py)


def test_sample_actor_details(samples_dir: Path) -> None:
    actor = sample_actors(samples_dir)["trainer_1"]
    node = sample_node(samples_dir, actor.node_id)
    view = ActorView(actor=actor, role="learner", host=node.hostname, started=1_000.0)
    got = actor_details(view, node=node, placement_group=None, now=1_065.0)
    assert got.actor_id == "505b494baa0d9e12451cf10402000000"
    assert (got.class_name, got.name, got.role, got.state) == ("Trainer", "trainer_1", "learner", "ALIVE")
    assert got.node == ActorPlace(actor.node_id, "192.0.2.2", "192.0.2.2", listed=True, alive=True)
    assert (got.pid, got.job_id, got.restarts) == (7508, "02000000", 0)
    assert (got.started, got.age) == (1_000.0, 65.0)
    assert got.resources == {"CPU": 0.1} and got.gpus == () and got.gpus_requested == 0
    assert got.placement_group is None and got.death_cause is None and got.repr_name == ""
    assert got.runtime_env.splitlines() == [
        "env_vars:",
        "  RAY_worker_niceness: 0",
        "  STEPS: 900",
        "working_dir: gcs://_ray_pkg_ee56dcfc36f39836.zip",
    ]


def test_dead_actor_says_why(samples_dir: Path) -> None:
    dead = next(a for a in sample_actors(samples_dir).values() if a.state == "DEAD")
    got = details(ActorView(actor=dead, role=None, host=""))
    assert got.death_cause is not None and "worker process has died" in got.death_cause
    assert got.role is None and got.started is None and got.age is None
    assert got.node == ActorPlace(dead.node_id, "", "", listed=False, alive=True)
    assert details(ActorView(replace(dead, death_cause=""), None, "")).death_cause == ""
    assert details(ActorView(replace(dead, state="ALIVE"), None, "")).death_cause is None


def test_node_dead_and_not_placed(samples_dir: Path) -> None:
    actor = sample_actors(samples_dir)["gpu_worker"]
    node = replace(sample_node(samples_dir, actor.node_id), hostname="gpu-a", state="DEAD")
    got = details(ActorView(actor, "rollout", "gpu-a"), node=node).node
    assert got == ActorPlace(actor.node_id, "gpu-a", "192.0.2.2", listed=True, alive=False)
    pending = replace(actor, node_id="", pid=None, state="PENDING_CREATION")
    got_pending = details(ActorView(pending, "rollout", ""))
    assert got_pending.node is None and got_pending.pid is None


def test_gpus_from_telemetry_or_logical_only(samples_dir: Path) -> None:
    view = ActorView(sample_actors(samples_dir)["gpu_worker"], "rollout", "")
    telemetry = details(view, gpus=[(0, 87.4), (3, None), (4, float("nan"))]).gpus
    assert telemetry == ((0, 87.4), (3, None), (4, None))
    assert details(view).gpus == () and details(view).gpus_requested == 1
    assert details(view).resources == {"CPU": 0.1, "GPU": 1}


def test_placement_group_and_its_bundles_on_this_node(samples_dir: Path) -> None:
    group = sample_group(samples_dir)
    actor = replace(sample_actors(samples_dir)["trainer_0"], placement_group_id=group.placement_group_id)
    got = details(ActorView(actor, None, ""), placement_group=group).placement_group
    assert got == GroupPlace(group.placement_group_id, group, (0, 1))
    unread = details(ActorView(actor, None, "")).placement_group
    assert unread == GroupPlace(group.placement_group_id, None, None)
    unplaced = replace(actor, node_id="")
    assert details(ActorView(unplaced, None, ""), placement_group=group).placement_group == GroupPlace(
        group.placement_group_id, group, None
    )


def test_bundle_indices_on_a_node() -> None:
    nodes = ("a", "b", "a", "a", "a", "", "b", "a")
    group = PlacementGroupRow("pg", "", "01000000", "CREATED", ({"GPU": 1.0},) * len(nodes), nodes)
    assert bundles_on_node(group, "a") == (0, 2, 3, 4, 7)
    assert bundles_on_node(group, "b") == (1, 6)
    assert bundles_on_node(replace(group, bundle_nodes=("x", "b")), "b") == (1,)
    assert bundles_on_node(group, "c") == ()


def test_hostile_actor_fields_are_kept_as_sent() -> None:
    """The core neither cuts nor escapes: the cluster's strings reach the UI as sent (which cuts them and
    shows them as text), except the runtime env, masked and bounded here; non-finite times read unknown."""
    row = ActorRow(
        HOSTILE, HOSTILE, HOSTILE, "DEAD", HOSTILE, HOSTILE, None, 0, {HOSTILE: 1.0}, HOSTILE, HOSTILE
    )
    group = PlacementGroupRow(HOSTILE, HOSTILE, HOSTILE, HOSTILE, ({HOSTILE: float("inf")},), (HOSTILE,))
    node = NodeSnapshot(HOSTILE, HOSTILE, HOSTILE, False, HOSTILE, HOSTILE, None, None, 0.0, 0.0)
    view = ActorView(
        replace(row, placement_group_id=HOSTILE, runtime_env=HOSTILE), HOSTILE, HOSTILE, float("nan")
    )
    got = details(view, node=node, placement_group=group, gpus=[(0, float("inf"))] * 1000, now=float("inf"))
    assert got.class_name == HOSTILE and got.death_cause == HOSTILE and got.node is not None
    assert got.node.host == HOSTILE and not got.node.alive
    assert got.placement_group == GroupPlace(HOSTILE, group, (0,))
    assert got.started is None and got.age is None and set(got.gpus) == {(0, None)}
    assert got.runtime_env.startswith("(runtime env not readable: ")
    assert details(replace(view, started=1.0), now=float("inf")).age is None


# Runtime env masking


def test_secrets_by_name_url_userinfo_and_token_shape() -> None:
    out = mask_runtime_env(
        env(
            WANDB_API_KEY=WANDB_KEY,
            DATA_URL=f"https://alice:{URL_PASSWORD}@data.example.com/shards",
            MODEL_SOURCE=HF_TOKEN,
            HF_HOME="/scratch/hf",
        )
    )
    for secret in (WANDB_KEY, URL_PASSWORD, "alice", HF_TOKEN):
        assert secret not in out
    assert f"  WANDB_API_KEY: {MASK}" in out.splitlines()
    assert f"  DATA_URL: https://{MASK}@data.example.com/shards" in out.splitlines()
    assert f"  MODEL_SOURCE: {MASK}" in out.splitlines()
    assert "  HF_HOME: /scratch/hf" in out.splitlines()  # what is not secret stays readable


def test_secrets_by_shape_anywhere() -> None:
    doc = {
        "env_vars": {
            "WANDB": WANDB_KEY,
            "ARGS": f"--hf-token {HF_TOKEN} --steps 10",
            "MODEL": "Qwen/Qwen2.5-7B",
        },
        "pip": [f"git+https://oauth2:{URL_PASSWORD}@gitlab.example.com/team/lib.git", "torch==2.3.1"],
        "container": {"run_options": [f"-e OPENAI_API_KEY={URL_PASSWORD}", "--ipc=host"]},
        "plugin": {
            "auth": {"user": "alice", "password": URL_PASSWORD},
            "endpoint": "http://x.example?api_key=k9",
        },
        "sources": [
            HF_TOKEN,
            GITHUB_TOKEN,
            OPENAI_KEY,
            "Bearer opaqueValue0123",
        ],  # outside env_vars: no blob rule here
    }
    out = mask_runtime_env(json.dumps(doc))
    for secret in (WANDB_KEY, HF_TOKEN, URL_PASSWORD, "k9", "alice", GITHUB_TOKEN, OPENAI_KEY, "opaque"):
        assert secret not in out
    for kept in (
        "--steps 10",
        "Qwen/Qwen2.5-7B",
        "torch==2.3.1",
        "--ipc=host",
        "gitlab.example.com/team/lib.git",
    ):
        assert kept in out


def test_names_that_say_secret() -> None:
    for name in (
        *SECRET_NAMES,
        "db_password",
        "DB_PASS",
        "db-pwd",
        "GH_PAT",
        "SENTRY_DSN",
        "MySessionCookie",
    ):
        assert is_secret_name(name), name
    for name in ("STEPS", "HF_HOME", "PATH", "PWD", "BYPASS_CACHE", "RAY_worker_niceness"):
        assert not is_secret_name(name), name


def test_malformed_runtime_env_is_a_note_without_the_text() -> None:
    marker = "MARKER-" + WANDB_KEY
    cases = {
        f"WANDB_API_KEY={marker}": "not JSON",
        json.dumps([{"env_vars": {"WANDB_API_KEY": marker}}]): "a list, not an object",
        json.dumps(marker): "a string, not an object",
        "[" * 20_000 + json.dumps(marker) + "]" * 20_000: "nested too deeply",
        json.dumps({"env_vars": ["WANDB_API_KEY", marker]}): "env_vars is not an object",
        json.dumps({"env_vars": {"A": marker * 400_000}}): "characters, more than",
    }
    for text, why in cases.items():
        out = mask_runtime_env(text)
        assert out.startswith("(runtime env not readable: ") and why in out, out
        assert "MARKER" not in out and "\n" not in out


def test_empty_and_bounded_output() -> None:
    assert mask_runtime_env("") == "not reported" and mask_runtime_env("{}") == "none"
    many = mask_runtime_env(json.dumps({"env_vars": {f"V{i:03}": "x" * 500 for i in range(100)}}))
    lines = many.splitlines()
    assert len(lines) == MAX_LINES and lines[-1] == f"... {101 - MAX_LINES + 1} more"
    assert all(len(line) <= MAX_LINE_CHARS for line in lines) and lines[1].endswith("…")
    exactly = mask_runtime_env(json.dumps({"env_vars": {f"V{i}": "1" for i in range(MAX_LINES - 1)}}))
    assert len(exactly.splitlines()) == MAX_LINES and "more" not in exactly
    one_over = mask_runtime_env(json.dumps({"env_vars": {f"V{i}": "1" for i in range(MAX_LINES)}}))
    assert len(one_over.splitlines()) == MAX_LINES and one_over.endswith("\n... 2 more")


def test_a_newline_in_a_value_cannot_forge_a_line() -> None:
    out = mask_runtime_env(json.dumps({"env_vars": {"NOTE": "ok\x07\nWANDB_API_KEY: shown\x1b[2J"}}))
    assert out.splitlines() == ["env_vars:", f"  NOTE: ok\ufffd WANDB_API_KEY: {MASK}"]


# Properties

_PART = st.sampled_from(sorted({*SECRET_NAME_PARTS, *SECRET_NAMES}))
_AFFIX = st.text(alphabet=string.ascii_letters + string.digits + "_", max_size=8)
SECRET_KEY = st.builds(
    lambda pre, part, post, case: case(pre + part + post),
    _AFFIX,
    _PART,
    _AFFIX,
    st.sampled_from([str.upper, str.lower, str.title]),
)
SECRET_VALUE = st.text(st.characters(whitelist_categories=("L", "N", "P", "S")), min_size=6, max_size=200)
OTHER_KEY = st.text(alphabet=string.ascii_uppercase + "_", min_size=1, max_size=12).filter(
    lambda k: not is_secret_name(k)
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=50),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=30,
)


@given(
    secrets=st.dictionaries(SECRET_KEY, SECRET_VALUE, min_size=1, max_size=4),
    others=st.dictionaries(OTHER_KEY, st.text(max_size=80), max_size=6),
    rest=st.dictionaries(st.sampled_from(["working_dir", "pip", "config", "py_modules"]), JSON, max_size=3),
)
def test_a_secret_named_value_never_shows(
    secrets: dict[str, str], others: dict[str, str], rest: dict[str, Any]
) -> None:
    env_vars = {**others, **secrets}
    out = mask_runtime_env(json.dumps({**rest, "env_vars": env_vars}))
    blanked = mask_runtime_env(json.dumps({**rest, "env_vars": {**others, **dict.fromkeys(secrets, "x")}}))
    assert out == blanked  # the secret values make no difference at all to what is shown
    for secret in secrets.values():
        assume(secret not in blanked)  # a value that also is a key or a word of the text proves nothing
        assert secret not in out


@given(
    st.text(max_size=300) | JSON.map(json.dumps) | st.dictionaries(st.text(max_size=10), JSON).map(json.dumps)
)
def test_any_text_reads_within_bounds(text: str) -> None:
    out = mask_runtime_env(text)
    lines = out.splitlines()
    assert 1 <= len(lines) <= MAX_LINES and all(len(line) <= MAX_LINE_CHARS for line in lines)
    assert not CONTROLS.search(out.replace("\n", ""))
