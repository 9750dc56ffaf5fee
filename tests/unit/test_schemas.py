"""The JSON Schemas shipped for editors (`cockpit/schemas/`): each is what its declaration generates (so it
cannot drift from the loader), the package ships them, they take every shipped profile and layout, and they
refuse what the loader refuses by its shape (a typo'd key above all) while the loader names the same key on
its line; `cockpit config schema` says where they are."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from cockpit.cli import schemas
from cockpit.core.config.layouts import LayoutError
from cockpit.core.config.role_table import RolesError, read_role_table
from cockpit.core.config.settings import load as load_config
from cockpit.core.jobs import profiles
from cockpit.ui.layouts import load_layout

REPO = Path(__file__).resolve().parents[2]
SHIPPED_PROFILES = sorted((REPO / "profiles").glob("*.yaml"))
SHIPPED_LAYOUTS = sorted((REPO / "layouts").glob("*.yaml"))


def validator(kind: str) -> jsonschema.Draft7Validator:
    shipped = yaml.safe_load(schemas.shipped_path(kind).read_text(encoding="utf-8"))
    jsonschema.Draft7Validator.check_schema(shipped)
    return jsonschema.Draft7Validator(shipped)


def schema_problems(kind: str, text: str) -> list[str]:
    return [error.message for error in validator(kind).iter_errors(yaml.safe_load(text))]


@pytest.mark.parametrize("kind", schemas.KINDS)
def test_each_shipped_schema_is_what_its_declaration_generates(kind: str) -> None:
    shipped = schemas.shipped_path(kind).read_text(encoding="utf-8")
    assert shipped == schemas.text(kind), f"the {kind} schema is stale: run scripts/schemas"


def test_the_package_ships_the_schemas() -> None:
    # The `cockpit = [...]` list of [tool.setuptools.package-data] (tomllib is 3.11+; this runs on 3.10).
    table = (REPO / "pyproject.toml").read_text().split("[tool.setuptools.package-data]", 1)[1]
    entries = table.split("cockpit = [", 1)[1].split("]", 1)[0]
    assert '"schemas/*.json"' in entries
    assert sorted(p.name for p in schemas.schemas_dir().glob("*.json")) == sorted(
        f"{kind}.schema.json" for kind in schemas.KINDS
    )


@pytest.mark.parametrize("path", SHIPPED_PROFILES, ids=[p.name for p in SHIPPED_PROFILES])
def test_the_profile_schema_takes_every_shipped_profile(path: Path) -> None:
    assert len(SHIPPED_PROFILES) >= 10
    validator("profile").validate(yaml.safe_load(path.read_text()))
    profiles.load(path)  # and the loader too


@pytest.mark.parametrize("path", SHIPPED_LAYOUTS, ids=[p.name for p in SHIPPED_LAYOUTS])
def test_the_layout_schema_takes_every_shipped_layout(path: Path) -> None:
    assert len(SHIPPED_LAYOUTS) >= 4
    validator("layout").validate(yaml.safe_load(path.read_text()))
    load_layout(path.stem)


def test_a_typo_in_a_profile_key_is_refused_by_the_schema_and_named_on_its_line_by_the_loader(
    tmp_path: Path,
) -> None:
    text = "name: mine\nentrypoint: python3 train.py\nhang_afte: 10m\n"
    problems = schema_problems("profile", text)
    assert len(problems) == 1 and "'hang_afte' was unexpected" in problems[0], problems
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    with pytest.raises(profiles.ProfileError) as info:
        profiles.load(path)
    assert str(info.value).startswith(f"{path}:3: hang_afte: unknown key (expected one of cluster, debug, ")


# Each: (kind, text, whether it is good). The schema and the loader agree on each.
AGREED: list[tuple[str, str, bool]] = [
    ("profile", "entrypoint: x\n", True),
    ("profile", "entrypoint: {module: pkg.mod, args: [--steps, 5]}\ntags: [a, 1]\n", True),
    ("profile", "entrypoint: x\nframework:\nprogress:\n", True),  # a key without a value is absent
    ("profile", "entrypoint: x\nhang_after: 1h30m\n", True),
    ("profile", "entrypoint: x\nhang_after: 90\n", True),
    ("profile", "name: n\n", False),
    ("profile", "entrypoint: x\nbogus: 1\n", False),
    ("profile", "entrypoint: x\ncluster: {nodes: many}\n", False),
    ("profile", "entrypoint: x\ncluster:\n  gpu_per_node: 8\n", False),
    ("profile", "entrypoint: x\nruntime_env:\n  envvars: {}\n", False),
    ("profile", "entrypoint: x\ntags: demo\n", False),
    ("profile", "entrypoint: x\nframework: deepspeed\n", False),
    ("profile", "entrypoint: x\nhang_after: true\n", False),
    ("profile", "entrypoint: x\nhang_after: 10x\n", False),
    ("profile", "entrypoint: x\ndebug: always\n", False),
    ("profile", "entrypoint: {args: [a]}\n", False),
    ("profile", "entrypoint: x\nsecret_files: {'BAD NAME': /k}\n", False),
    ("profile", "- entrypoint: x\n", False),
    ("layout", "cockpit:\n  - nodes\n  - [jobs, gpu_heatmap]\n", True),
    ("layout", "cluster: [nodes, join]\n", True),
    ("layout", "cockpit:\n  - nodes\n  - [jobs, gpu_hetmap]\n", False),
    ("layout", "panes: [nodes]\n", False),
    ("layout", "cockpit:\n  - []\n", False),
    ("layout", "cockpit: []\n", False),
    ("layout", "cluster: [gpu_list]\n", False),
    ("config", "target: head-node\nrefresh:\n  actors: 2\nhang_after: 15m\nkeys:\n  jobs.stop: x\n", True),
    ("config", "theme: nord\nprofile_dirs: [~/p]\nroles: {MyEngine: rollout}\n", True),
    ("config", "dashbord_port: 9000\n", False),
    ("config", "refresh:\n  sometimes: 3\n", False),
    ("config", "dashboard_port: 99999\n", False),
    ("config", "theme: purple\n", False),
    ("config", "layout: 'two words'\n", False),
    ("roles", 'MyRolloutEngine: rollout\n"*Judge*": reward\n', True),
    ("roles", "Good: rollout\nBad: [1, 2]\n", False),
    ("roles", "- rollout\n", False),
]


def loads(kind: str, path: Path) -> bool:
    """Whether the loader of KIND takes the file at PATH (a layout: PATH is in the user's layouts; the
    config's loader lists problems instead of raising)."""
    try:
        if kind == "profile":
            profiles.load(path)
        elif kind == "layout":
            load_layout(path.stem)
        elif kind == "config":
            return load_config(path, env={}).problems == ()
        else:
            read_role_table(path)
    except (profiles.ProfileError, LayoutError, RolesError):
        return False
    return True


@pytest.mark.parametrize(("kind", "text", "good"), AGREED)
def test_the_schema_and_the_loader_agree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, text: str, good: bool
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    folder = tmp_path / "ray-cockpit" / "layouts"
    folder.mkdir(parents=True)
    path = folder / "mine.yaml"
    path.write_text(text)
    problems = schema_problems(kind, text)
    assert (problems == []) == good, problems
    assert loads(kind, path) == good


def test_config_schema_says_where_each_schema_is() -> None:
    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "cockpit.cli", "config", "schema", *argv], capture_output=True, text=True
        )

    every = run()
    assert every.returncode == 0, every.stderr
    lines: dict[str, Any] = dict(line.split(maxsplit=1) for line in every.stdout.splitlines())
    assert list(lines) == list(schemas.KINDS)
    assert all(Path(path).is_file() for path in lines.values())
    one = run("profile")
    assert one.returncode == 0 and one.stdout == f"{schemas.shipped_path('profile')}\n"
    assert run("bogus").returncode == 2
