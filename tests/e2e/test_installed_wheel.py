"""The cockpit as a user installs it: the sdist and the wheel built from this checkout (`uv build`, else
`python -m build`: the sdist, then the wheel from the sdist), the wheel installed with its dependencies
into a fresh virtualenv outside the repository (`uv tool install`, else `pipx install`, else a plain venv
and pip; `COCKPIT_TEST_INSTALLER=uv|pipx|venv` picks one), and run from another directory with no
PYTHONPATH: `--version`, every shipped profile listed and checked, the wide layout and its styles, the
Slurm template, bash completion in a real interactive shell, and `cockpit demo` in a real terminal up to
the Cluster screen with its job running, then `q` with no Ray process left.

One install serves every test of the module. uv (a test extra) builds and installs in about 20 s and a
tenth of pip's CPU time; pip takes a minute or more, most of it unpacking Ray. The dependencies come from
the installer's cache and configured indexes.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cockpit.core.local import processes, record
from tests.harness.cluster import cluster_processes, process_names
from tests.harness.terminal import Terminal

if sys.version_info >= (3, 11):
    import tomllib
else:  # `build` (a test extra) brings tomli where tomllib is missing
    import tomli as tomllib

pytestmark = [
    pytest.mark.installed,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

REPO = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
SHIPPED = {
    name: sorted(p.relative_to(REPO / name).as_posix() for p in (REPO / name).rglob("*") if p.is_file())
    for name in ("profiles", "layouts")
}
PROFILE_NAMES = sorted(p.removesuffix(".yaml") for p in SHIPPED["profiles"] if p.endswith(".yaml"))


@dataclass(frozen=True)
class Installed:
    how: str
    """`uv tool`, `pipx` or `venv`."""
    root: Path
    """Everything of this install: the built files, the virtualenv, a HOME, a working directory."""
    sdist: Path
    wheel: Path
    bin: Path
    """Where the `cockpit` command is."""
    python: Path
    """The virtualenv's interpreter (the one `cockpit` runs)."""
    env: dict[str, str]
    """A user's environment: the install's bin first on PATH, no PYTHONPATH, a HOME of its own."""
    work: Path
    """A working directory outside the repository, without ./profiles."""


def _run(argv: list[str], timeout: float, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kwargs)
    said = f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, f"{' '.join(argv)} exited {done.returncode}:\n{said}"
    return done


def _uv() -> str | None:
    """The `uv` command: the test extras' (the `uv` package beside this interpreter), else one on PATH."""
    try:
        from uv import find_uv_bin
    except ModuleNotFoundError:
        return shutil.which("uv")
    try:
        return find_uv_bin()
    except FileNotFoundError:
        return shutil.which("uv")


def _installer() -> str:
    chosen = os.environ.get("COCKPIT_TEST_INSTALLER")
    if chosen:
        assert chosen in ("uv", "pipx", "venv"), f"COCKPIT_TEST_INSTALLER={chosen}: uv, pipx or venv"
        return chosen
    return "uv" if _uv() else "pipx" if shutil.which("pipx") else "venv"


def _user_env(root: Path, bin_dir: Path) -> dict[str, str]:
    drop = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "COCKPIT_", "SLURM_", "_ARGCOMPLETE", "COMP_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        HOME=str(root / "home"),
        XDG_CONFIG_HOME=str(root / "home" / ".config"),
        XDG_STATE_HOME=str(root / "home" / ".local" / "state"),
        COCKPIT_CONFIG=str(root / "home" / "no-config.yaml"),
    )
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    root = tmp_path_factory.mktemp("installed").resolve()
    assert not root.is_relative_to(REPO.resolve()), "the install must live outside the repository"
    uv = _uv()
    if uv is None:
        try:
            import build  # noqa: F401
        except ModuleNotFoundError:
            pytest.fail("neither uv nor `build`: install the test extras (pip install -e '.[test]')")
    dist = root / "dist"
    started = time.monotonic()
    # Both build the sdist, then the wheel from the sdist, each in an isolated build environment.
    builder = [uv, "build", "--quiet"] if uv else [sys.executable, "-m", "build"]
    _run([*builder, "--out-dir" if uv else "--outdir", str(dist), str(REPO)], timeout=900)
    (sdist,) = dist.glob("ray_cockpit-*.tar.gz")
    (wheel,) = dist.glob("ray_cockpit-*.whl")
    built = time.monotonic()

    how = _installer()
    (root / "home" / ".ssh").mkdir(parents=True)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHONPATH", "VIRTUAL_ENV"))}
    if how == "uv":
        bin_dir, tools = root / "bin", root / "uv-tools"
        env = {**base, "UV_TOOL_DIR": str(tools), "UV_TOOL_BIN_DIR": str(bin_dir)}
        # Compiled as pip and pipx do: a Ray started from uncompiled sources takes much longer to come up.
        command = [uv or "uv", "tool", "install", "--compile-bytecode", "--python", sys.executable]
        _run([*command, str(wheel)], timeout=1800, env=env)
        python = tools / "ray-cockpit" / "bin" / "python"
    elif how == "pipx":
        bin_dir, home = root / "bin", root / "pipx"
        env = {**base, "PIPX_HOME": str(home), "PIPX_BIN_DIR": str(bin_dir)}
        _run(["pipx", "install", "--python", sys.executable, str(wheel)], timeout=1800, env=env)
        python = home / "venvs" / "ray-cockpit" / "bin" / "python"
    else:
        venv = root / "venv"
        _run([sys.executable, "-m", "venv", str(venv)], timeout=300, env=base)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        _run([*pip, str(wheel)], timeout=1800, env=base)
        bin_dir, python = venv / "bin", venv / "bin" / "python"
    work = root / "work"
    work.mkdir()
    print(
        f"built the sdist and the wheel in {built - started:.0f} s, installed with {how} "
        f"in {time.monotonic() - built:.0f} s"
    )
    yield Installed(how, root, sdist, wheel, bin_dir, python, _user_env(root, bin_dir), work)
    # The virtualenv is about 450 MB; pytest keeps the temporary directories of the last three runs.
    for big in ("venv", "uv-tools", "pipx"):
        shutil.rmtree(root / big, ignore_errors=True)


def cockpit(installed: Installed, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The installed `cockpit ARGS`, found on PATH as a user's shell finds it, run from the working
    directory outside the repository."""
    command = shutil.which("cockpit", path=installed.env["PATH"])
    assert command is not None and Path(command).parent == installed.bin, command
    return subprocess.run(
        [command, *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=installed.work,
        env={**installed.env, **env},
        stdin=subprocess.DEVNULL,
    )


def python(installed: Installed, code: str) -> str:
    """What CODE prints, run by the install's interpreter from the working directory outside the repo."""
    argv = [str(installed.python), "-c", code]
    return _run(argv, timeout=120, cwd=installed.work, env=installed.env).stdout


def test_the_wheel_and_the_sdist_carry_every_shipped_file(installed: Installed) -> None:
    data = ["cockpit/py.typed", "cockpit/ui/app.tcss", "cockpit/core/slurm/slurm_up.sh"]
    shipped = [f"cockpit/shipped/{kind}/{name}" for kind, names in SHIPPED.items() for name in names]
    modules = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "cockpit").rglob("*.py"))
    with zipfile.ZipFile(installed.wheel) as wheel:
        in_wheel = set(wheel.namelist())
    assert [f for f in [*data, *shipped, *modules] if f not in in_wheel] == []
    with tarfile.open(installed.sdist) as sdist:
        top = installed.sdist.name.removesuffix(".tar.gz")
        files = {m.name.removeprefix(f"{top}/"): m for m in sdist.getmembers()}
    assert [f for f in [*data, *shipped, *modules, "pyproject.toml"] if f not in files] == []
    assert [f for f in shipped if not files[f].isfile()] == [], "the sdist holds the files, not links"


def test_the_installed_cockpit_runs_from_another_directory(installed: Installed) -> None:
    where = python(installed, "import cockpit; print(cockpit.__file__)").strip()
    assert Path(where).is_relative_to(installed.root) and not Path(where).is_relative_to(REPO)

    done = cockpit(installed, "--version")
    assert (done.returncode, done.stdout) == (0, f"ray-cockpit {VERSION}\n")

    first = cockpit(installed)
    assert first.returncode == 0 and "  cockpit demo\n" in first.stdout and first.stderr == ""

    listed = cockpit(installed, "profiles", "list")
    assert listed.returncode == 0, listed.stderr
    assert sorted(line.split()[0] for line in listed.stdout.splitlines()) == PROFILE_NAMES
    assert "(invalid)" not in listed.stdout

    checked = cockpit(installed, "profiles", "check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    ticks = [line for line in checked.stdout.splitlines() if line.startswith("✔ ")]
    assert sorted(line.split()[1] for line in ticks) == PROFILE_NAMES
    assert all(f"({installed.root}" in line for line in ticks), "the shipped files of the install"

    shown = cockpit(installed, "config", "show", COCKPIT_LAYOUT="wide")
    assert shown.returncode == 0 and shown.stderr == ""
    assert re.search(r"^layout: wide\s+# env COCKPIT_LAYOUT", shown.stdout, re.M), shown.stdout
    layout = python(
        installed,
        "from cockpit.ui.layouts import load_layout\n"
        "wide = load_layout('wide'); print(wide.css_path); print(len(wide.css)); print(*wide.panes)",
    ).splitlines()
    assert Path(layout[0]).is_relative_to(installed.root) and layout[0].endswith("shipped/layouts/wide.tcss")
    assert int(layout[1]) > 0 and "metrics" in layout[2].split()

    dry = cockpit(installed, "slurm", "up", "demo", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "#SBATCH --job-name=cockpit-demo" in dry.stdout
    profile = re.search(r"^PROFILE=(\S+)$", dry.stdout, re.M)
    assert profile is not None and profile.group(1).startswith(str(installed.root))


def test_bash_completes_the_installed_cockpit(installed: Installed) -> None:
    """An interactive bash with the completion the installed cockpit prints: TAB completes a command, a
    shipped profile and a Host of the user's ssh config."""
    (installed.root / "home" / ".ssh" / "config").write_text("Host gpu-login\n  HostName 10.1.2.3\n")
    term = Terminal(f"cockpit-installed-bash-{os.getpid()}", 120, 20)
    try:
        env = " ".join(f"{k}={shlex.quote(installed.env[k])}" for k in ("HOME", "PATH", "XDG_CONFIG_HOME"))
        term.type(f"cd {shlex.quote(str(installed.work))} && env -u PYTHONPATH {env} bash --norc -i", "Enter")
        term.type('eval "$(cockpit completion bash)" && echo completion-ready', "Enter")
        term.wait_for(lambda s: "\ncompletion-ready" in s, timeout=60)
        term.type("clear", "Enter")
        term.type("cockpit conn", "Tab")
        # ... and a space after it, which tmux does not show at the end of a line.
        term.wait_for(lambda s: "cockpit connect" in s, timeout=60)
        term.type("gpu-", "Tab")
        term.wait_for(lambda s: "cockpit connect gpu-login" in s, timeout=60)
        term.type("C-u")
        term.type("cockpit submit local demo-c", "Tab")
        term.wait_for(lambda s: "cockpit submit local demo-crash" in s, timeout=60)
    finally:
        term.close()


def test_the_installed_demo_runs_and_quits_clean(installed: Installed) -> None:
    """`cockpit demo` with the wide layout (its styles from the wheel): every pane of the cockpit screen,
    then the Cluster screen with the three nodes and the job running, then `q`: no Ray process left."""
    state = installed.root / "demo-state"
    term = Terminal(f"cockpit-installed-demo-{os.getpid()}", 200, 50)
    try:
        env = {**installed.env, "COCKPIT_STATE_DIR": str(state), "COCKPIT_LAYOUT": "wide"}
        exports = " ".join(f"{k}={shlex.quote(env[k])}" for k in IN_THE_TERMINAL)
        cd = f"cd {shlex.quote(str(installed.work))}"
        term.type(f"{cd} && env -u PYTHONPATH {exports} cockpit demo; echo demo-exit=$?", "Enter")
        screen = term.wait_for(lambda s: "─ Training curves ─" in s and "RUNNING   demo-" in s, timeout=180)
        assert screen.splitlines()[0].startswith(" 0 Cockpit · local (demo)")
        for title in ("Join progress", "Nodes", "GPUs", "Jobs", "Driver log", "Paused workers"):
            assert f"─ {title} ─" in screen, title
        assert "▀▀" in screen  # the heatmap's cells (logical GPUs: no readings, still drawn)
        cluster = record.load(state)
        assert cluster is not None
        before = cluster_processes(cluster)
        assert any(name.startswith("ray::Dashboard") for name in process_names(before).values())
        term.type("1")
        screen = term.wait_for(
            lambda s: s.lstrip().startswith("1 Cluster") and "Nodes    3/3" in s and "RUNNING" in s,
            timeout=60,
        )
        assert screen.count("ALIVE") == 3 and "demo-" in screen
        term.type("q")
        term.wait_for(lambda s: "demo-exit=0" in s, timeout=90)
        assert process_names(before) == {}, "quitting the demo leaves no Ray process"
        assert record.load(state) is None
    finally:
        term.close()  # a demo still running gets SIGHUP and stops its cluster; what is left is stopped here
        if record.load(state) is not None:
            processes.down(directory=state)


IN_THE_TERMINAL = (
    "HOME",
    "PATH",
    "XDG_CONFIG_HOME",
    "XDG_STATE_HOME",
    "COCKPIT_CONFIG",
    "COCKPIT_STATE_DIR",
    "COCKPIT_LAYOUT",
)
"""What the demo's shell takes from the install's environment (tmux's shell starts with the test's)."""
