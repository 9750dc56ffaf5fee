from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from cockpit.core.jobs import profiles
from cockpit.core.jobs.overrides import parse_overrides
from cockpit.core.text import MASK


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return path


def test_shipped_demo_profiles_render() -> None:
    for name in ("demo", "demo-crash"):
        request = profiles.render(profiles.load(profiles.find(name)))
        assert request["entrypoint"].startswith(sys.executable)
        assert "cockpit.demo.trainer" in request["entrypoint"]
        assert request["metadata"]["cockpit_profile"] == name
    crash = profiles.render(profiles.load(profiles.find("demo-crash")))
    assert crash["runtime_env"] == {"env_vars": {"RAY_DEBUG_POST_MORTEM": "1"}}
    assert crash["entrypoint"].endswith(" steps=300 step_seconds=1.0 crash_at_step=15")
    # Without post-mortem the demo has no runtime env at all: each actor's worker starts directly.
    for name in ("demo", "demo-hang"):
        assert "runtime_env" not in profiles.render(profiles.load(profiles.find(name))), name


def test_secrets_are_masked_for_display(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WANDB_API_KEY", "s3cr3t-value")
    path = write(
        tmp_path,
        "entrypoint: python3 train.py\nruntime_env:\n  env_vars:\n    WANDB_API_KEY: ${env:WANDB_API_KEY}\n",
    )
    profile = profiles.load(path)
    shown = profiles.render(profile, mask=True)
    assert "s3cr3t-value" not in repr(shown) and shown["runtime_env"]["env_vars"]["WANDB_API_KEY"] == MASK
    assert profiles.render(profile)["runtime_env"]["env_vars"]["WANDB_API_KEY"] == "s3cr3t-value"


def test_overrides_kept_as_written(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "entrypoint: python3 -m verl.trainer.main_ppo\ncluster: {nodes: 2, gpus_per_node: 8}\n"
        'overrides:\n  - trainer.nnodes=${cluster.nodes}\n  - trainer.logger=\'["console","wandb"]\'\n',
    )
    extra = parse_overrides(["data.train_batch_size=256"])
    entry = profiles.render(profiles.load(path), extra)["entrypoint"]
    assert "trainer.nnodes=2" in entry
    assert "data.train_batch_size=256" in entry
    assert "trainer.logger=" in entry and "wandb" in entry


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("entrypoint: x\nbogus: 1\n", ":2: bogus: unknown key"),
        ("name: n\n", "entrypoint: missing"),
        ("entrypoint: x\ncluster: {nodes: many}\n", ":2: cluster.nodes: must be a whole number, not 'many'"),
        ("entrypoint: x\ncluster:\n  nodes: 2\n  gpu_per_node: 8\n", ":4: cluster.gpu_per_node: unknown key"),
        ("entrypoint: x\noverrides:\n  - a=1\n  - oops\n", ":4: overrides: 'oops' is not KEY=VALUE (e.g. "),
        ("entrypoint: x\nruntime_env:\n  envvars: {}\n", ":3: runtime_env.envvars: not a runtime_env field"),
        ("entrypoint: x\ntags: demo\n", ":2: tags: must be a list, not a string"),
        ("entrypoint: x\nframework: deepspeed\n", ":2: framework: unknown framework 'deepspeed'"),
        ("entrypoint: [unclosed\n", "not valid YAML"),
        ("entrypoint: x\nprogress: 'step=(\\d+'\n", ":2: progress: not a regular expression: missing ), "),
        ("entrypoint: x\n\nprogress: '\\q'\n", ":3: progress: not a regular expression: bad escape \\q"),
        ("entrypoint: x\nprogress: 'a{99999999999}'\n", ":2: progress: not a regular expression Python"),
        ("entrypoint: x\nprogress: [step]\n", ":2: progress: must be a string, not a list"),
        ("entrypoint: x\nhang_after: 10x\n", ":2: hang_after: '10x' is not a duration (e.g. 90s, 10m"),
        ("entrypoint: x\nhang_after: -5m\n", ":2: hang_after: '-5m' is not a duration"),
        ("entrypoint: x\nhang_after: 0\n", ":2: hang_after: '0' is no time at all"),
        ("entrypoint: x\nhang_after: 30d\n", ":2: hang_after: '30d' is not a duration"),
        ("entrypoint: x\nhang_after: 9999h\n", ":2: hang_after: '9999h' is more than 7 days"),
        ("entrypoint: x\nhang_after: true\n", ":2: hang_after: must be a duration such as 10m or 90s"),
        ("entrypoint: x\nhang_after: {m: 10}\n", ":2: hang_after: must be a duration such as 10m"),
        (
            "entrypoint: x\nmetrics: wandb\n",
            ":2: metrics: not a format (auto, verl, nemo_rl, rlinf, demo, generic); ",
        ),
        ("entrypoint: x\n\nmetrics: 'step=(\\d+'\n", ":3: metrics: not a format (auto, verl, nemo_rl, rlinf"),
        ("entrypoint: x\nmetrics: 'step=(?P<step>\\d+)'\n", ":2: metrics: not a format (auto, verl"),
        ("entrypoint: x\nmetrics: [verl]\n", ":2: metrics: must be a string, not a list"),
    ],
)
def test_errors_name_file_line_and_key(tmp_path: Path, text: str, fragment: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(profiles.ProfileError) as info:
        profiles.load(path)
    assert str(path) in str(info.value) and fragment in str(info.value)


@pytest.mark.parametrize(
    ("text", "progress", "hang_after"),
    [
        ("entrypoint: x\n", "", None),
        ("entrypoint: x\nprogress: 'step=\\d+'\nhang_after: 1m\n", r"step=\d+", 60.0),
        ("entrypoint: x\nhang_after: 1h30m\n", "", 5400.0),
        ("entrypoint: x\nhang_after: 90\n", "", 90.0),
        ("entrypoint: x\nhang_after: 2.5\n", "", 2.5),
        ("entrypoint: x\nprogress: '^step=\\d+ '\n", r"^step=\d+ ", None),
    ],
)
def test_hang_keys_load(tmp_path: Path, text: str, progress: str, hang_after: float | None) -> None:
    from cockpit.core.doctor.hang import DEFAULT_HANG_AFTER, hang_policy

    profile = profiles.load(write(tmp_path, text))
    assert (profile.progress, profile.hang_after) == (progress, hang_after)
    policy = hang_policy(profile)
    assert policy.hang_after == (DEFAULT_HANG_AFTER if hang_after is None else hang_after)
    # Without one in the profile, the default its caller passes (the config's `hang_after`).
    assert hang_policy(profile, default=42.0).hang_after == (42.0 if hang_after is None else hang_after)
    assert (policy.progress.pattern if policy.progress else "") == progress


def test_shipped_demo_hang_profile_shows_its_hang_keys() -> None:
    import subprocess

    profile = profiles.load(profiles.find("demo-hang"))
    assert (profile.progress, profile.hang_after) == (r"^step=\d+", 60.0)
    result = subprocess.run(
        [sys.executable, "-m", "cockpit.cli", "profiles", "show", "demo-hang"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["metadata"]["cockpit_profile"] == "demo-hang"  # stdout stays JSON
    assert result.stderr == (
        "hang detector: progress is a driver-log line matching `^step=\\d+`; "
        "no progress for 1m00s is a hang\n"
        "metrics: driver-log lines in the demo format (cockpit metrics)\n"
    )


def test_secrets_only_in_env_vars(tmp_path: Path) -> None:
    path = write(tmp_path, "entrypoint: python3 train.py\noverrides:\n  - wandb.key=${env:WANDB_API_KEY}\n")
    expected = r":3: overrides\[1\]: \$\{env:WANDB_API_KEY\}: secrets belong in"
    with pytest.raises(profiles.ProfileError, match=expected):
        profiles.load(path)


def test_unset_secret_is_one_clear_sentence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOPE_TOKEN", raising=False)
    path = write(tmp_path, "entrypoint: run\nruntime_env: {env_vars: {T: '${env:NOPE_TOKEN}'}}\n")
    with pytest.raises(profiles.ProfileError, match="export NOPE_TOKEN"):
        profiles.render(profiles.load(path))


SHIPPED = sorted(p for p in (Path(profiles.__file__).resolve().parents[3] / "profiles").glob("*.yaml"))


def test_every_shipped_profile_passes_check() -> None:
    import subprocess

    names = {p.stem for p in SHIPPED}
    assert {"verl-ppo-gsm8k-qwen0.5b", "verl-ppo-7b-2x8", "intuitor-grpo-math-qwen14b-4x8"} <= names
    assert {"nemo-rl-sft", "nemo-rl-dpo", "nemo-rl-rm", "nemo-rl-grpo"} <= names
    assert {
        "rlinf-math-grpo-collocated-4x8",
        "rlinf-math-grpo-disaggregated-4x8",
        "demo",
        "demo-crash",
        "demo-hang",
    } <= names
    result = subprocess.run(
        [sys.executable, "-m", "cockpit.cli", "profiles", "check", *map(str, SHIPPED)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("✔") == len(SHIPPED)


@pytest.mark.parametrize("name", ["verl-ppo-gsm8k-qwen0.5b", "verl-ppo-7b-2x8"])
def test_verl_dry_run_keeps_overrides_byte_for_byte(name: str) -> None:
    import subprocess

    import yaml

    path = profiles.find(name)
    written = yaml.safe_load(path.read_text())["overrides"]
    result = subprocess.run(
        [sys.executable, "-m", "cockpit.cli", "submit", "local", name, "--dry-run"],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "WANDB_API_KEY": "do-not-show"},
    )
    assert result.returncode == 0, result.stderr
    request = json.loads(result.stdout)
    entry = request["entrypoint"]
    shape = profiles.load(path).cluster
    for override in written:
        expected = override.replace("${cluster.nodes}", str(shape.nodes)).replace(
            "${cluster.gpus_per_node}", str(shape.gpus_per_node)
        )
        assert f" {expected}" in entry, expected
    assert "do-not-show" not in result.stdout + result.stderr


def test_rlinf_placements_are_checked() -> None:
    from cockpit.core.jobs.preflight import preflight

    for name in ("rlinf-math-grpo-collocated-4x8", "rlinf-math-grpo-disaggregated-4x8"):
        checks = preflight(profiles.load(profiles.find(name)), (), None, at_submit=False)
        placement = next(c for c in checks if c.name == "RLinf placement")
        assert placement.status == "ok" and "cover GPUs 0-31" in placement.detail
    overlapping = parse_overrides(["cluster.component_placement.inference=18-23"])
    checks = preflight(profiles.load(profiles.find("rlinf-math-grpo-disaggregated-4x8")), overlapping, None)
    assert next(c for c in checks if c.name == "RLinf placement").blocking


@pytest.mark.parametrize(
    ("text", "where", "fragment"),
    [
        ("entrypoint: x\ncluster: {nodes: 2\n", ":3", "not valid YAML"),
        ("entrypoint: x\nnodes: 2\n", ":2", "nodes: unknown key"),
        ("entrypoint: x\ncluster:\n  nodes: two\n", ":3", "cluster.nodes: must be a whole number"),
        (
            "framework: rlinf\nentrypoint: python main.py\noverrides:\n  - cluster.num_nodes=1\n"
            "  - cluster.num_gpus_per_node=8\n  - cluster.component_placement.rollout=0-5\n"
            "  - cluster.component_placement.actor=4-7\n",
            ":7",
            "RLinf placement: actor overlaps rollout at GPU 4",
        ),
        (
            "framework: rlinf\nentrypoint: python main.py\noverrides:\n  - cluster.num_nodes=1\n"
            "  - cluster.num_gpus_per_node=8\n  - cluster.component_placement.rollout=0-5\n",
            ":6",
            "GPUs 6-7 are given to no component",
        ),
    ],
)
def test_profiles_check_names_file_line_and_fix(tmp_path: Path, text: str, where: str, fragment: str) -> None:
    import subprocess

    path = write(tmp_path, text)
    result = subprocess.run(
        [sys.executable, "-m", "cockpit.cli", "profiles", "check", str(path)], capture_output=True, text=True
    )
    assert result.returncode == 1
    (line,) = result.stdout.splitlines()
    assert line.startswith(f"✘ {path}{where}: ") and fragment in line, line


def test_profiles_check_warns_of_a_secret_this_shell_lacks(tmp_path: Path) -> None:
    """Not the profile's fault (it passes), but a submit from this shell would be refused: said, by name,
    never with a value."""
    import os
    import subprocess

    path = write(
        tmp_path,
        'name: secret-test\nentrypoint: "python3 train.py"\n'
        'runtime_env:\n  env_vars:\n    WANDB_API_KEY: "${env:COCKPIT_TEST_UNSET_SECRET}"\n',
    )
    env = {k: v for k, v in os.environ.items() if k != "COCKPIT_TEST_UNSET_SECRET"}
    command = [sys.executable, "-m", "cockpit.cli", "profiles", "check", str(path)]
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"✔ secret-test ({path})",
        "  ⚠ secrets: not set in this shell: COCKPIT_TEST_UNSET_SECRET (export them)",
    ]
    env["COCKPIT_TEST_UNSET_SECRET"] = "s3cr3t-value"
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    assert result.stdout.splitlines() == [f"✔ secret-test ({path})"]
    assert "s3cr3t-value" not in result.stdout + result.stderr
