"""The configuration file: defaults, values from the file with their line, `COCKPIT_*` over the file, and
one line per problem naming file, line and key while that key keeps its default; `cockpit config show`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cockpit.core.config import settings as config
from cockpit.core.config.settings import FIELDS, load

GOOD = """\
target: head-node
dashboard_port: 9000
refresh:
  actors: 2
theme: light
layout: wide
hang_after: 15m
profile_dirs: [~/my-profiles]
roles:
  MyRolloutEngine: rollout
keys:
  jobs.stop: x
"""


def test_no_file_gives_every_default(tmp_path: Path) -> None:
    loaded = load(tmp_path / "missing.yaml", env={})
    assert loaded.problems == ()
    assert {name: loaded[name] for name in loaded.values} == {f.name: f.default for f in FIELDS}
    assert set(loaded.origins.values()) == {"default"}
    assert loaded.theme == "textual-dark" and loaded.dashboard_port == 8265 and loaded.hang_after == 600


def test_file_values_carry_their_line_and_env_wins(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(GOOD)
    loaded = load(
        path, env={"COCKPIT_DASHBOARD_PORT": "9100", "COCKPIT_LAYOUT": "gpu", "COCKPIT_REFRESH_NODES": "30"}
    )
    assert loaded.problems == ()
    assert loaded["refresh.nodes"] == 30.0 and loaded.origins["refresh.nodes"] == "env COCKPIT_REFRESH_NODES"
    assert loaded.target == "head-node" and loaded.origins["target"] == f"{path}:1"
    assert loaded["refresh.actors"] == 2.0 and loaded.origins["refresh.actors"] == f"{path}:4"
    assert loaded.theme == "textual-light"
    assert loaded.hang_after == 900.0
    assert loaded.profile_dirs == (Path("~/my-profiles").expanduser(),)
    assert loaded.roles == {"MyRolloutEngine": "rollout"}
    assert loaded.keys == {"jobs.stop": "x"} and loaded.where("keys.jobs.stop") == f"{path}:12"
    # The environment overrides the file, and says so.
    assert loaded.dashboard_port == 9100 and loaded.origins["dashboard_port"] == "env COCKPIT_DASHBOARD_PORT"
    assert loaded.layout == "gpu" and loaded.origins["layout"] == "env COCKPIT_LAYOUT"


def test_a_bad_value_is_one_line_with_file_line_and_key_and_keeps_its_default(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("target: local\ndashboard_port: 99999\nrefresh:\n  sometimes: 3\ntheme: purple\n")
    loaded = load(path, env={"COCKPIT_HANG_AFTER": "soon"})
    assert loaded.target == "local"  # the rest of the file still counts
    assert loaded.dashboard_port == 8265 and loaded.origins["dashboard_port"] == "default"
    assert loaded.theme == "textual-dark"
    assert loaded.hang_after == 600
    problems = loaded.problems
    assert len(problems) == 4 and all("\n" not in p for p in problems)
    assert problems[0].startswith(f"{path}:2: dashboard_port: must be a port number")
    assert problems[1].startswith(f"{path}:4: refresh.sometimes: not a setting")
    assert problems[2].startswith(f"{path}:5: theme: must be one of dark, light")
    assert problems[3].startswith("COCKPIT_HANG_AFTER='soon': hang_after:")


def test_a_file_that_is_not_yaml_counts_for_nothing(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("target: local\nkeys: [unclosed\n")
    loaded = load(path, env={})
    assert loaded.target == ""
    assert len(loaded.problems) == 1 and loaded.problems[0].startswith(f"{path}:")
    assert "not valid YAML" in loaded.problems[0] and "defaults used" in loaded.problems[0]


def test_config_show_prints_each_value_and_where_it_came_from(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(GOOD)
    env = {**os.environ, config.CONFIG_ENV: str(path), "COCKPIT_THEME": "dark"}
    out = subprocess.run(
        [sys.executable, "-m", "cockpit.cli", "config", "show"], env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"# {path} (found)"
    assert any(line.startswith("target: head-node") and f"# {path}:1 ·" in line for line in lines)
    assert any(line.startswith("  actors: 2") and f"# {path}:4 ·" in line for line in lines)
    assert any(line.startswith("theme: dark") and "# env COCKPIT_THEME ·" in line for line in lines)
    assert any(line.startswith("ssh_config: ''") and "# default ·" in line for line in lines)
    assert out.stderr == ""


def config_show(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cockpit.cli", "config", "show"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
    )


def test_config_show_checks_the_layout_it_names_as_the_cockpit_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cockpit.ui.layouts import COCKPIT_PANES, load_layout_or_default

    layouts = tmp_path / "ray-cockpit" / "layouts"
    layouts.mkdir(parents=True)
    broken = layouts / "broken.yaml"
    broken.write_text("cockpit:\n  - nodes\n  - [jobs, gpu_hetmap]\n")
    env = {"XDG_CONFIG_HOME": str(tmp_path), "COCKPIT_LAYOUT": "broken"}
    out = config_show(env)
    # A problem of the configuration is a line on stderr; the values are still shown (as for any other).
    assert out.returncode == 0, out.stderr
    assert any(line.startswith("layout: broken") for line in out.stdout.splitlines())
    expected = (
        f"{broken}:3: cockpit: unknown pane 'gpu_hetmap' (panes: {', '.join(COCKPIT_PANES)}) "
        "(the default layout is used)"
    )
    assert out.stderr == f"cockpit: {expected}\n"
    # The very line the cockpit screen shows.
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert load_layout_or_default("broken")[1] == expected
    unknown = config_show({"XDG_CONFIG_HOME": str(tmp_path), "COCKPIT_LAYOUT": "nothing"})
    assert unknown.returncode == 0 and "no layout named 'nothing' (layouts: " in unknown.stderr
    broken.write_text("cockpit:\n  - [jobs, gpu_heatmap]\n")
    assert config_show(env).stderr == ""


def test_profile_dirs_of_the_config_reach_the_profiles_the_command_line_finds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cockpit.core.jobs import profiles

    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "mine.yaml").write_text("name: mine\ndescription: from profile_dirs\nentrypoint: python3 x.py\n")
    path = tmp_path / "config.yaml"
    path.write_text(f"profile_dirs: [{extra}]\n")
    env = {**os.environ, config.CONFIG_ENV: str(path), "XDG_CONFIG_HOME": str(tmp_path / "none")}
    out = subprocess.run(
        [sys.executable, "-m", "cockpit.cli", "profiles", "list"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert any(line.split()[0] == "mine" for line in out.stdout.splitlines())
    # The core reads no configuration of its own: the directories are what its caller passes.
    monkeypatch.setenv(config.CONFIG_ENV, str(path))
    assert "mine" in [p.name for p in profiles.discover(dirs=load(path, env={}).profile_dirs)[0]]
    assert "mine" not in [p.name for p in profiles.discover()[0]]
