"""Secrets: `${env:NAME}` resolves only in a profile's `runtime_env.env_vars`, judged on the reference as the
resolver reads it (any spacing), and never from extra overrides or a job's metadata; `secret_files:` sends
the path of an owner-only file instead of its content."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cockpit.core.jobs import launch, profiles
from cockpit.core.jobs.errors import OverrideError
from cockpit.core.jobs.overrides import Override, parse_overrides
from cockpit.core.text import MASK

SECRET = "s3cr3t-do-not-show"
SPELLINGS = ["${env:COCKPIT_TEST_SECRET}", "${ env:COCKPIT_TEST_SECRET}", "${env:COCKPIT_TEST_SECRET }"]
SPELLINGS += ["${\tenv:COCKPIT_TEST_SECRET}", "${  env:COCKPIT_TEST_SECRET  }"]


@pytest.fixture(autouse=True)
def secret_in_shell(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COCKPIT_TEST_SECRET", SECRET)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("reference", SPELLINGS)
def test_every_spelling_the_resolver_reads_resolves_in_env_vars(tmp_path: Path, reference: str) -> None:
    path = write(tmp_path, f"entrypoint: run\nruntime_env:\n  env_vars:\n    TOKEN: '{reference}'\n")
    profile = profiles.load(path)
    assert profiles.render(profile)["runtime_env"]["env_vars"]["TOKEN"] == SECRET
    assert profiles.render(profile, mask=True)["runtime_env"]["env_vars"]["TOKEN"] == MASK
    assert profiles.secret_names(profile) == ["COCKPIT_TEST_SECRET"]


PLACES = [
    ("entrypoint: 'python3 x.py --key {ref}'\n", 1, "entrypoint"),
    ("entrypoint: {{module: m, args: ['--key', '{ref}']}}\n", 1, "entrypoint"),
    ("entrypoint: x\noverrides:\n  - a=1\n  - 'wandb.key={ref}'\n", 4, "overrides[2]"),
    ("entrypoint: x\nworking_dir: '/shared/{ref}'\n", 2, "working_dir"),
    ("entrypoint: x\nmetadata:\n  owner: '{ref}'\n", 3, "metadata.owner"),
    ("entrypoint: x\nruntime_env:\n  pip:\n    - 'pkg @ https://{ref}@host/p.whl'\n", 3, "runtime_env.pip"),
    ("entrypoint: x\nruntime_env:\n  config:\n    setup_timeout_seconds: '{ref}'\n", 3, "runtime_env.config"),
    ("entrypoint: x\nruntime_env:\n  py_executable: '{ref} python'\n", 3, "runtime_env.py_executable"),
]


@pytest.mark.parametrize("reference", SPELLINGS)
@pytest.mark.parametrize(("template", "line", "key"), PLACES)
def test_a_secret_outside_env_vars_is_refused_in_any_spelling(
    tmp_path: Path, template: str, line: int, key: str, reference: str
) -> None:
    path = write(tmp_path, template.format(ref=reference))
    with pytest.raises(profiles.ProfileError) as info:
        profiles.load(path)
    message = str(info.value)
    assert message.startswith(f"{path}:{line}: {key}: ") and "runtime_env.env_vars" in message, message
    assert "\n" not in message and SECRET not in message


@pytest.mark.parametrize("reference", SPELLINGS)
def test_an_extra_override_with_a_secret_is_refused_before_anything_is_resolved(
    tmp_path: Path, reference: str
) -> None:
    with pytest.raises(OverrideError) as info:
        parse_overrides(["a=1", f"wandb.key={reference}"])
    message = str(info.value)
    assert "runtime_env.env_vars" in message and "\n" not in message and SECRET not in message
    # Built by hand (an API caller, not the parser): still never resolved into the request.
    profile = profiles.load(write(tmp_path, "entrypoint: python3 x.py\n"))
    forged = Override(key="wandb.key", value=reference, text=f"wandb.key={reference}")
    with pytest.raises(profiles.ProfileError):
        profiles.render(profile, (forged,))
    with pytest.raises(profiles.ProfileError):
        launch.plan(profile, (forged,))


def test_extra_overrides_are_passed_as_typed_never_resolved(tmp_path: Path) -> None:
    profile = profiles.load(write(tmp_path, "entrypoint: python3 x.py\ncluster: {nodes: 2}\n"))
    extra = parse_overrides(["n=${cluster.nodes}", "p=${python}", "h=${data.max_len}"])
    request = profiles.render(profile, extra)
    assert request["entrypoint"] == "python3 x.py 'n=${cluster.nodes}' 'p=${python}' 'h=${data.max_len}'"
    assert json.loads(request["metadata"]["cockpit_overrides"]) == [o.text for o in extra]
    assert profiles.override_values(profile, extra)["n"] == "${cluster.nodes}"


def test_the_cli_refuses_a_secret_override_in_one_line(tmp_path: Path) -> None:
    from tests.harness.run import run_cockpit

    for reference in SPELLINGS:
        result = run_cockpit("submit", "http://127.0.0.1:1", "demo", f"k={reference}", "--dry-run")
        assert result.returncode == 1 and result.stdout == ""
        (line,) = result.stderr.splitlines()
        assert line.startswith("cockpit: ") and "runtime_env.env_vars" in line and SECRET not in line


# -- secret_files: the path of an owner-only file, never its content ------------------------------


def secret_file(tmp_path: Path, mode: int) -> Path:
    path = tmp_path / "wandb.key"
    path.write_text(SECRET)
    path.chmod(mode)
    return path


@pytest.mark.parametrize("mode", [0o600, 0o400])
def test_a_secret_file_sends_its_path_not_its_content(tmp_path: Path, mode: int) -> None:
    key = secret_file(tmp_path, mode)
    path = write(tmp_path, f"entrypoint: run\nsecret_files:\n  WANDB_API_KEY_FILE: {key}\n")
    profile = profiles.load(path)
    request = profiles.render(profile)
    assert request["runtime_env"]["env_vars"]["WANDB_API_KEY_FILE"] == str(key)
    assert SECRET not in json.dumps(request)
    from cockpit.core.jobs.preflight import preflight

    check = next(c for c in preflight(profile) if c.name == "secret files")
    assert check.status == "ok" and str(key) in check.detail


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o660])
def test_a_secret_file_others_can_read_is_refused_at_submit(tmp_path: Path, mode: int) -> None:
    key = secret_file(tmp_path, mode)
    path = write(tmp_path, f"entrypoint: run\nsecret_files:\n  WANDB_API_KEY_FILE: {key}\n")
    profile = profiles.load(path)
    with pytest.raises(profiles.ProfileError) as info:
        profiles.render(profile)
    assert f"{oct(mode)[2:]}" in str(info.value) and "chmod 600" in str(info.value)
    from cockpit.core.jobs.preflight import preflight

    check = next(c for c in preflight(profile) if c.name == "secret files")
    assert check.blocking and check.key == "WANDB_API_KEY_FILE"
    # Shown without it being read: the plan masks nothing it does not have to, and never blocks a look.
    assert profiles.render(profile, mask=True, check_secrets=False)["runtime_env"]["env_vars"][
        "WANDB_API_KEY_FILE"
    ] == str(key)


def test_a_missing_secret_file_blocks_submit_and_warns_in_check(tmp_path: Path) -> None:
    path = write(tmp_path, f"entrypoint: run\nsecret_files: {{TOKEN_FILE: {tmp_path / 'nope'}}}\n")
    profile = profiles.load(path)
    from cockpit.core.jobs.preflight import preflight

    assert next(c for c in preflight(profile) if c.name == "secret files").blocking
    assert next(c for c in preflight(profile, at_submit=False) if c.name == "secret files").status == "warn"
    with pytest.raises(profiles.ProfileError, match="no such file"):
        profiles.render(profile)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("secret_files: {TOKEN_FILE: relative/key}\n", ":2: secret_files.TOKEN_FILE: must be an absolute"),
        ("secret_files: {'BAD NAME': /k}\n", ":2: secret_files.BAD NAME: not an environment variable name"),
        ("secret_files: {T: '${env:X}'}\n", ":2: secret_files.T: "),
        ("secret_files: [a]\n", ":2: secret_files: must be a mapping"),
        (
            "runtime_env: {env_vars: {T: x}}\nsecret_files: {T: /k}\n",
            ":3: secret_files.T: also set in runtime_env.env_vars",
        ),
    ],
)
def test_secret_files_errors_name_file_line_and_key(tmp_path: Path, text: str, fragment: str) -> None:
    path = write(tmp_path, "entrypoint: run\n" + text)
    with pytest.raises(profiles.ProfileError) as info:
        profiles.load(path)
    assert str(info.value).startswith(str(path)) and fragment in str(info.value), str(info.value)


def test_a_secret_file_owned_by_someone_else_is_refused(tmp_path: Path) -> None:
    key = secret_file(tmp_path, 0o600)
    try:
        os.chown(key, os.geteuid() + 4242, -1)
    except PermissionError:
        pytest.skip("only root can give a file to another user here")
    path = write(tmp_path, f"entrypoint: run\nsecret_files: {{T: {key}}}\n")
    with pytest.raises(profiles.ProfileError, match=f"owned by uid {os.geteuid() + 4242}"):
        profiles.render(profiles.load(path))
