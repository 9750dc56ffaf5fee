"""Profile files at their worst: `cockpit profiles check FILE` says one line `FILE:LINE: ...` and exits 1 for
every kind of bad file (no expansion, a size cap, no traceback); arbitrary bytes give a Profile or one
ProfileError line; profile files other users can write are skipped with a warning."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cockpit.core.jobs import profile_load, profiles
from cockpit.core.jobs.preflight import preflight
from tests.harness.hostile import hostile_text
from tests.harness.properties import examples

REPO = Path(__file__).resolve().parents[2]
MEMORY_CAP = 2 * 2**30
"""Address space the checked process may use: an expanding alias bomb dies of MemoryError (a traceback,
the test fails) instead of taking the shared machine's memory."""


def alias_bomb() -> str:
    levels = ['    a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for n in range(1, 9):
        refs = ", ".join([f"*a{n - 1}"] * 9)
        levels.append(f"    a{n}: &a{n} [{refs}]")
    return "entrypoint: python3 x.py\nruntime_env:\n  config:\n" + "\n".join(levels) + "\n"


def padded(size: int) -> str:
    return "entrypoint: python3 x.py\n" + (
        "# padding padding padding padding padding padding\n" * (size // 50)
    )


def shape(framework: str, cluster: str, overrides: list[str]) -> str:
    items = "".join(f"  - {o}\n" for o in overrides)
    return f"framework: {framework}\nentrypoint: python3 -m x\ncluster: {cluster}\noverrides:\n{items}"


CASES: list[tuple[str, bytes | str, int, str]] = [
    ("alias bomb", alias_bomb(), 5, "YAML aliases (*a0) are not allowed"),
    ("alias", "entrypoint: &e python3 x.py\ndescription: *e\n", 2, "YAML aliases (*e) are not allowed"),
    ("merge key alias", "entrypoint: x\nmetadata: {<<: *m}\n", 2, "YAML aliases (*m) are not allowed"),
    (
        "duplicate key",
        "entrypoint: a\nname: n\nentrypoint: b\n",
        3,
        "duplicate key 'entrypoint' (first on line 1)",
    ),
    ("nested duplicate", "entrypoint: a\ncluster:\n  nodes: 1\n  nodes: 2\n", 4, "duplicate key 'nodes'"),
    ("not UTF-8", b"entrypoint: x\nname: caf\xe9\n", 2, "not UTF-8 text (byte 0xe9)"),
    ("UTF-16", "entrypoint: x\n".encode("utf-16"), 1, "not UTF-8 text (byte 0xff)"),
    ("NUL byte", b"entrypoint: x\nname: a\x00b\n", 2, "not valid YAML"),
    ("bad YAML", "entrypoint: [unclosed\n", 2, "not valid YAML"),
    ("tab indent", "entrypoint: x\ncluster:\n\tnodes: 2\n", 3, "not valid YAML"),
    ("two documents", "entrypoint: x\n---\nentrypoint: y\n", 2, "not valid YAML"),
    ("non-mapping list", "- entrypoint: x\n", 1, "a profile is a mapping of keys"),
    ("non-mapping scalar", "just text\n", 1, "a profile is a mapping of keys"),
    ("empty", "", 1, "a profile is a mapping of keys"),
    ("too big", padded(300 * 1024), 1, "over 256 KiB"),
    ("deep nesting", "entrypoint: x\nmetadata: " + "[" * 5000 + "]" * 5000 + "\n", 2, "nested deeper than"),
    ("huge number", "entrypoint: x\ncluster: {nodes: " + "1" * 5000 + "}\n", 2, "cannot read this value"),
    ("date-like name", "entrypoint: x\nname: 2001-13-45\n", 0, ""),  # a string, not a date: valid
    ("python tag", "entrypoint: !!python/object:os.system x\n", 1, "not valid YAML"),
    ("binary tag", "entrypoint: x\nname: !!binary '%%%'\n", 2, "not valid YAML"),
    (
        "secret in entrypoint",
        "entrypoint: echo ${env:TOKEN}\n",
        1,
        "entrypoint: ${env:TOKEN}: secrets belong in",
    ),
    (
        "spaced secret",
        "entrypoint: x\noverrides:\n  - k=${ env:TOKEN}\n",
        3,
        "overrides[1]: ${env:TOKEN}: secrets",
    ),
    (
        "spaced secret 2",
        "entrypoint: x\nmetadata: {a: '${env:TOKEN }'}\n",
        2,
        "metadata.a: ${env:TOKEN}: secrets",
    ),
    (
        "spaced secret 3",
        "entrypoint: x\nworking_dir: '/s/${  env:TOKEN  }'\n",
        2,
        "working_dir: ${env:TOKEN}",
    ),
    (
        "verl shape",
        shape("verl", "{nodes: 2, gpus_per_node: 8}", ["trainer.nnodes=4", "trainer.n_gpus_per_node=8"]),
        5,
        "trainer.nnodes=4 (line 5) disagrees with cluster.nodes: 2 (line 3)",
    ),
    (
        "intuitor shape",
        shape("intuitor", "{nodes: 4, gpus_per_node: 8}", ["trainer.nnodes=4", "trainer.n_gpus_per_node=4"]),
        6,
        "trainer.n_gpus_per_node=4 (line 6) disagrees with cluster.gpus_per_node: 8 (line 3)",
    ),
    (
        "nemo rl shape",
        shape(
            "nemo_rl", "\n  nodes: 1\n  gpus_per_node: 8", ["cluster.num_nodes=2", "cluster.gpus_per_node=8"]
        ),
        7,
        "cluster.num_nodes=2 (line 7) disagrees with cluster.nodes: 1 (line 4)",
    ),
    (
        "rlinf shape",
        shape(
            "rlinf", "{nodes: 4, gpus_per_node: 8}", ["cluster.num_nodes=4", "cluster.num_gpus_per_node=2"]
        ),
        6,
        "cluster.num_gpus_per_node=2 (line 6) disagrees with cluster.gpus_per_node: 8 (line 3)",
    ),
]


def limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def check(path: Path, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cockpit.cli", "profiles", "check", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limit_memory,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO), **env},
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize(("kind", "content", "line", "fragment"), CASES, ids=[c[0] for c in CASES])
def test_profiles_check_says_one_line_for_every_kind_of_bad_file(
    tmp_path: Path, kind: str, content: bytes | str, line: int, fragment: str
) -> None:
    path = tmp_path / "p.yaml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    result = check(path)
    assert "Traceback" not in result.stderr, result.stderr
    if not fragment:
        assert result.returncode == 0, result.stdout + result.stderr
        return
    assert result.returncode == 1, result.stdout + result.stderr
    (shown,) = result.stdout.splitlines()
    assert shown.startswith(f"✘ {path}:{line}: ") and fragment in shown, shown
    if "disagrees" not in fragment:  # a file the loader refuses; a shape mismatch is a failed check
        with pytest.raises(profiles.ProfileError):
            profiles.load(path)


def test_a_path_that_is_not_a_regular_file_is_one_line(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    (tmp_path / "dir.yaml").mkdir()
    for path in (fifo, tmp_path / "dir.yaml"):
        with pytest.raises(profiles.ProfileError, match="not a regular file"):
            profiles.load(path)


# -- arbitrary bytes --------------------------------------------------------------------------------

KEYS = [
    *sorted(key.name for key in profile_load.PROFILE.keys),
    "cluster.nodes",
    "runtime_env.env_vars",
    "bogus",
]
SCALARS = st.one_of(
    hostile_text,
    st.sampled_from(
        ["~", "1", "-1", "1e9", ".nan", "true", "[]", "{}", "'${env:X}'", "${ env:X}", "&a x", "*a"]
    ),
    st.sampled_from(
        ["${python}", "${cluster.nodes}", "2001-01-01", "0x1F", "!!binary AAAA", "|\n  x", '"\\0"']
    ),
)


@st.composite
def yaml_like(draw: st.DrawFn) -> bytes:
    """Text shaped like a profile (keys a profile has, nested a little, values hostile)."""
    lines = []
    for _ in range(draw(st.integers(0, 8))):
        key = draw(st.sampled_from(KEYS))
        indent = "  " * draw(st.integers(0, 2))
        value = draw(SCALARS)
        lines.append(f"{indent}{key}: {value}" if draw(st.booleans()) else f"{indent}- {value}")
    return "\n".join(lines).encode("utf-8", errors="surrogatepass")


@settings(
    max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(content=st.one_of(st.binary(max_size=2000), yaml_like()))
def test_any_bytes_give_a_profile_or_one_line(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "p.yaml"
    path.write_bytes(content)
    try:
        profile = profiles.load(path)
    except profiles.ProfileError as exc:
        message = str(exc)
        assert message.startswith(f"{path}:") and "\n" not in message and "\r" not in message
        assert message.isprintable(), message
        return
    # A profile that loads is one the checks and the dry run can show (they may refuse it, in one line).
    for item in preflight(profile, (), None, at_submit=False):
        assert "\n" not in item.detail
    try:
        profiles.render(profile, mask=True, check_secrets=False)
    except profiles.ProfileError as exc:
        assert "\n" not in str(exc)


# -- who may write a profile ------------------------------------------------------------------------


def mine(directory: Path, name: str = "demo", description: str = "from ./profiles") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o755)
    path = directory / f"{name}.yaml"
    path.write_text(f"name: {name}\ndescription: {description}\nentrypoint: python3 x.py\n")
    path.chmod(0o644)
    return path


def listed(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cockpit.cli", "profiles", "list"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO), "XDG_CONFIG_HOME": str(cwd / "config")},
        stdin=subprocess.DEVNULL,
    )


def test_a_profiles_directory_others_can_write_is_skipped_with_a_warning(tmp_path: Path) -> None:
    mine(tmp_path / "profiles")
    assert "from ./profiles" in listed(tmp_path).stdout
    (tmp_path / "profiles").chmod(0o777)
    result = listed(tmp_path)
    assert result.returncode == 0 and "from ./profiles" not in result.stdout
    assert "demo" in result.stdout  # the shipped one of that name
    (warning,) = [line for line in result.stderr.splitlines() if "skipped" in line]
    assert warning.startswith(f"cockpit: skipped {tmp_path / 'profiles'}: writable by group and others")


def test_demo_says_which_profile_it_skipped_too(tmp_path: Path) -> None:
    """`cockpit demo --profile NAME` looks profiles up as `profiles list` does, and says so when it skips
    one another user could have changed (here the name is found nowhere else: it stops, starting nothing)."""
    path = mine(tmp_path / "profiles", name="my-demo")
    path.chmod(0o666)
    result = subprocess.run(
        [sys.executable, "-m", "cockpit.cli", "demo", "--profile", "my-demo"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={
            **os.environ,
            "PYTHONPATH": str(REPO),
            "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "COCKPIT_STATE_DIR": str(tmp_path / "state"),
        },
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 1, result.stderr
    assert f"cockpit: skipped {path}: writable by group and others" in result.stderr
    assert "starting a local Ray cluster" not in result.stdout and not (tmp_path / "state").exists()


def test_a_profile_file_others_can_write_is_skipped_with_a_warning(tmp_path: Path) -> None:
    path = mine(tmp_path / "profiles")
    path.chmod(0o664)
    result = listed(tmp_path)
    assert "from ./profiles" not in result.stdout
    (warning,) = [line for line in result.stderr.splitlines() if "skipped" in line]
    assert warning == f"cockpit: skipped {path}: writable by group (chmod go-w it if it is yours)"


def test_a_profile_owned_by_someone_else_is_skipped_with_a_warning(tmp_path: Path) -> None:
    path = mine(tmp_path / "profiles")
    try:
        os.chown(path, os.geteuid() + 4242, -1)
    except PermissionError:
        pytest.skip("only root can give a file to another user here")
    result = listed(tmp_path)
    assert "from ./profiles" not in result.stdout
    (warning,) = [line for line in result.stderr.splitlines() if "skipped" in line]
    assert f"skipped {path}: owned by uid {os.geteuid() + 4242}" in warning
    found, _problems = profiles.discover()
    assert all(p.path != path for p in found)
