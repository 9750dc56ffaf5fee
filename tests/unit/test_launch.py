"""The launch path without a cluster: overrides parsed once, the plan, a blocked submit, profile discovery."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cockpit.core.cluster.dashboard import DashboardClient
from cockpit.core.jobs import launch, profiles
from cockpit.core.snapshots import NodeSnapshot

REPO = Path(__file__).resolve().parents[2]


def cockpit_in(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`python -m cockpit.cli ARGS` run from `cwd` (whose ./profiles comes first on the search path)."""
    return subprocess.run(
        [sys.executable, "-m", "cockpit.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO), **env},
        stdin=subprocess.DEVNULL,
    )


def test_overrides_are_split_once_with_hydra_prefixes_kept_as_typed() -> None:
    split = launch.parse_overrides(["trainer.nnodes=2", "+trainer.x='a=b'", "~old.key=1", "++y=", "k=v=w"])
    assert [(o.key, o.value, o.text) for o in split] == [
        ("trainer.nnodes", "2", "trainer.nnodes=2"),
        ("trainer.x", "'a=b'", "+trainer.x='a=b'"),
        ("old.key", "1", "~old.key=1"),
        ("y", "", "++y="),
        ("k", "v=w", "k=v=w"),
    ]


@pytest.mark.parametrize("bad", ["foo", "=1", "+=1"])
def test_a_malformed_override_is_the_same_one_line_from_the_cli_and_the_api(tmp_path: Path, bad: str) -> None:
    with pytest.raises(launch.OverrideError) as info:
        launch.parse_overrides(["a=1", bad, "also bad"])
    message = str(info.value)
    assert message == f"{bad!r} is not KEY=VALUE (e.g. trainer.total_epochs=1)." and "\n" not in message
    # The CLI parses before it contacts anything: the same line, exit 1, no traceback.
    result = cockpit_in(tmp_path, "submit", "http://127.0.0.1:1", "demo", "a=1", bad, "also bad")
    assert result.returncode == 1
    assert result.stderr == f"cockpit: {message}\n" and result.stdout == ""


def test_plan_masks_secrets_and_records_profile_and_overrides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WANDB_API_KEY", "s3cr3t-value")
    path = tmp_path / "p.yaml"
    path.write_text(
        "name: p\nframework: verl\nentrypoint: python3 -m verl.trainer.main_ppo\n"
        "cluster: {nodes: 2, gpus_per_node: 8}\noverrides: [trainer.nnodes=2]\n"
        "runtime_env:\n  env_vars: {WANDB_API_KEY: '${env:WANDB_API_KEY}'}\n"
    )
    extra = launch.parse_overrides(["trainer.total_epochs=1", "data.path=a b"])
    plan = launch.plan(profiles.load(path), extra, submission_id="p-1")
    assert plan.request["submission_id"] == plan.submission_id == "p-1" and not plan.cluster_checked
    assert plan.request["entrypoint"].endswith("trainer.nnodes=2 trainer.total_epochs=1 'data.path=a b'")
    assert plan.request["metadata"]["cockpit_profile"] == "p"
    assert json.loads(plan.request["metadata"]["cockpit_overrides"]) == [
        "trainer.total_epochs=1",
        "data.path=a b",
    ]
    assert "s3cr3t-value" not in repr(plan) and not plan.blocking


async def test_a_blocked_plan_is_not_sent_and_names_the_profile_line(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text(
        "name: big\nframework: verl\nentrypoint: python3 -m verl.trainer.main_ppo\n"
        "overrides:\n  - trainer.nnodes=1\n  - trainer.n_gpus_per_node=8\n"
    )
    alive = [
        NodeSnapshot(
            node_id=f"{i:056x}",
            ip="10.0.0.1",
            hostname=f"gpu{i}",
            is_head=i == 0,
            state="ALIVE",
            state_message="",
            start_time=1.0,
            end_time=None,
            logical_cpus=8,
            logical_gpus=8,
        )
        for i in range(2)
    ]
    plan = launch.plan(profiles.load(path), launch.parse_overrides(["trainer.nnodes=4"]), alive)
    assert plan.cluster_checked
    assert [c.name for c in plan.blocking] == ["verl trainer.nnodes x n_gpus_per_node"]
    # Nothing listens on port 1: raising before any request is the only way this can pass.
    async with DashboardClient("http://127.0.0.1:1") as client:
        with pytest.raises(launch.LaunchBlocked) as info:
            await launch.submit(client, plan)
    assert str(info.value).startswith(f"{path}:5: verl trainer.nnodes x n_gpus_per_node: asks 4 x 8 GPUs")


def write_profile(directory: Path, name: str, description: str, stem: str | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{stem or name}.yaml"
    path.write_text(f"name: {name}\ndescription: {description}\nentrypoint: python3 x.py\n")
    return path


def test_profiles_list_shows_a_name_once_the_first_on_the_search_path(tmp_path: Path) -> None:
    config = tmp_path / "config"
    write_profile(tmp_path / "profiles", "demo", "the one in ./profiles")
    write_profile(config / "ray-cockpit" / "profiles", "demo", "the one in the config dir")
    write_profile(config / "ray-cockpit" / "profiles", "mine", "only in the config dir")
    result = cockpit_in(tmp_path, "profiles", "list", XDG_CONFIG_HOME=str(config))
    assert result.returncode == 0, result.stderr
    names = [line.split()[0] for line in result.stdout.splitlines()]
    assert names.count("demo") == 1 and names.count("mine") == 1 and "demo-crash" in names
    assert "the one in ./profiles" in result.stdout and "config dir" not in result.stdout.split("mine")[0]
    shown = json.loads(cockpit_in(tmp_path, "profiles", "show", "demo", XDG_CONFIG_HOME=str(config)).stdout)
    assert shown["entrypoint"] == "python3 x.py"


def test_discover_and_find_share_one_precedence_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    renamed = write_profile(tmp_path / "profiles", "renamed", "file name differs", stem="other")
    (tmp_path / "profiles" / "demo-crash.yaml").write_text("entrypoint: x\nbogus: 1\n")
    found, problems = profiles.discover()
    names = [p.name for p in found]
    assert len(names) == len(set(names)) and "renamed" in names and "demo" in names
    # A broken file claims its name: its error shows instead of the shipped profile of that name.
    assert "demo-crash" not in names and len(problems) == 1 and ":2: bogus: unknown key" in problems[0]
    assert profiles.find("renamed") == renamed
    with pytest.raises(profiles.ProfileError, match=":2: bogus: unknown key"):
        profiles.find("demo-crash")
    with pytest.raises(profiles.ProfileError, match="no profile named 'other'"):
        profiles.find("other")
