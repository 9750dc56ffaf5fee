"""Shell completion for real: bash runs the script `cockpit completion bash` prints and asks it as on TAB
(commands, shipped profile names, Host entries of an ssh config, layouts); fish and zsh the same where
installed; the user's Slurm jobs from a real one-node Slurm, and nothing but a bounded wait from a Slurm
controller that never answers. Completion loads no network client: it never connects to a cluster."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cockpit.cli import completion
from cockpit.core.config.layouts import known_layouts
from tests.harness.shell_completion import (
    REPO,
    bash_completions,
    checkout_cockpit,
    fish_completions,
    path_with,
)
from tests.harness.slurm import SlurmCluster
from tests.harness.terminal import Terminal

SHIPPED_PROFILES = sorted(p.stem for p in (REPO / "profiles").glob("*.yaml"))
SSH_CONFIG = """\
# the user's hosts
Host login-a
    HostName 10.0.0.1
Host head-1 head-2 *.internal !bastion
Host=gpu-box
Match host login-a
    User someone
Include conf.d/*.conf
"""


@pytest.fixture
def shell_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A `cockpit` on PATH running this checkout, a HOME with a test ssh config (and an Include), no
    config dir of the user's, and a working directory without ./profiles."""
    home = tmp_path / "home"
    (home / ".ssh" / "conf.d").mkdir(parents=True)
    (home / ".ssh" / "config").write_text(SSH_CONFIG)
    (home / ".ssh" / "conf.d" / "more.conf").write_text("Host included-host\n")
    checkout_cockpit(tmp_path / "bin")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "COMP_", "_ARC"))}
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        PATH=path_with(tmp_path / "bin"),
        COCKPIT_CONFIG=str(home / "no-config.yaml"),
    )
    (tmp_path / "work").mkdir()
    yield env


def test_bash_completes_commands(shell_env: dict[str, str], tmp_path: Path) -> None:
    assert bash_completions("cockpit con", shell_env, tmp_path / "work") == ["connect", "config"]
    assert bash_completions("cockpit conn", shell_env, tmp_path / "work") == ["connect"]
    assert bash_completions("cockpit profiles ", shell_env, tmp_path / "work") == ["list", "show", "check"]
    assert bash_completions("cockpit completion ", shell_env, tmp_path / "work") == ["bash", "zsh", "fish"]


def test_bash_completes_flags_once_a_dash_is_typed(shell_env: dict[str, str], tmp_path: Path) -> None:
    flags = bash_completions("cockpit connect --", shell_env, tmp_path / "work")
    assert {"--ssh-config", "--layout", "--expect-nodes", "--help"} <= set(flags)
    assert bash_completions("cockpit --v", shell_env, tmp_path / "work") == ["--version"]


def test_bash_completes_shipped_profile_names(shell_env: dict[str, str], tmp_path: Path) -> None:
    offered = bash_completions("cockpit submit local ", shell_env, tmp_path / "work")
    assert sorted(offered) == SHIPPED_PROFILES
    assert bash_completions("cockpit demo --profile demo-", shell_env, tmp_path / "work") == [
        "demo-crash",
        "demo-hang",
    ]
    offered = bash_completions("cockpit profiles show nemo-rl-s", shell_env, tmp_path / "work")
    assert offered == ["nemo-rl-sft"]


def test_bash_completes_the_users_own_profiles_too(shell_env: dict[str, str], tmp_path: Path) -> None:
    mine = Path(shell_env["XDG_CONFIG_HOME"]) / "ray-cockpit" / "profiles"
    mine.mkdir(parents=True, mode=0o700)
    (mine / "my-run.yaml").write_text("name: my-run\nentrypoint: echo hi\n")
    offered = bash_completions("cockpit slurm up ", shell_env, tmp_path / "work")
    assert "my-run" in offered and set(SHIPPED_PROFILES) <= set(offered)


def test_bash_completes_targets_from_the_ssh_config(shell_env: dict[str, str], tmp_path: Path) -> None:
    offered = bash_completions("cockpit connect ", shell_env, tmp_path / "work")
    # `local`, then every Host name in order (the Included file's too); no pattern, no negation.
    assert offered == ["local", "login-a", "head-1", "head-2", "gpu-box", "included-host"]
    assert bash_completions("cockpit status he", shell_env, tmp_path / "work") == ["head-1", "head-2"]


def test_bash_reads_the_ssh_config_the_command_line_names(shell_env: dict[str, str], tmp_path: Path) -> None:
    other = tmp_path / "other_config"
    other.write_text("Host only-here\n")
    line = f"cockpit connect --ssh-config {other} "
    assert bash_completions(line, shell_env, tmp_path / "work") == ["local", "only-here"]


def test_bash_completes_layout_names(shell_env: dict[str, str], tmp_path: Path) -> None:
    offered = bash_completions("cockpit connect --layout ", shell_env, tmp_path / "work")
    assert offered == known_layouts() and "wide" in offered


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_completes_commands_profiles_and_hosts(shell_env: dict[str, str], tmp_path: Path) -> None:
    work = tmp_path / "work"
    assert fish_completions("cockpit conn", shell_env, work) == ["connect"]
    assert sorted(fish_completions("cockpit submit local ", shell_env, work)) == SHIPPED_PROFILES
    # fish sorts what it offers.
    assert sorted(fish_completions("cockpit connect ", shell_env, work)) == sorted(
        ["local", "login-a", "head-1", "head-2", "gpu-box", "included-host"]
    )


@pytest.mark.skipif(
    shutil.which("zsh") is None or shutil.which("tmux") is None, reason="zsh or tmux is not installed"
)
def test_zsh_completes_in_a_real_terminal(shell_env: dict[str, str], tmp_path: Path) -> None:
    term = Terminal(f"cockpit-zsh-{os.getpid()}", 100, 20)
    try:
        exports = " ".join(f"{k}={shlex.quote(shell_env[k])}" for k in ("HOME", "PATH", "XDG_CONFIG_HOME"))
        term.type(f"cd {tmp_path / 'work'} && env {exports} zsh -f", "Enter")
        term.type('autoload -Uz compinit && compinit -u && eval "$(cockpit completion zsh)"', "Enter")
        term.type("echo zsh-ready", "Enter")
        term.wait_for(lambda s: "\nzsh-ready" in s, timeout=60)
        term.type("clear", "Enter")
        term.type("cockpit conn", "Tab")
        term.wait_for(lambda s: "cockpit connect" in s, timeout=60)
        term.type("C-u")
        term.type("cockpit submit local demo-cr", "Tab")
        term.wait_for(lambda s: "cockpit submit local demo-crash" in s, timeout=60)
        term.type("C-u")
        term.type("cockpit connect gpu-", "Tab")
        term.wait_for(lambda s: "cockpit connect gpu-box" in s, timeout=60)
    finally:
        term.close()


def test_completion_loads_no_network_client(shell_env: dict[str, str], tmp_path: Path) -> None:
    """The whole answer to `cockpit connect <TAB>` in one process: the targets, and not a module that
    could reach a cluster (aiohttp, asyncssh, Ray) among those it loaded."""
    code = (
        "import io, json, sys\n"
        "from cockpit.cli import build_parser, completion\n"
        "out = io.StringIO()\n"
        "completion.answer(build_parser(), output_stream=out, exit_method=lambda code: None)\n"
        "print(json.dumps([out.getvalue(), sorted(sys.modules)]))\n"
    )
    env = {**shell_env, "_ARGCOMPLETE": "1", "COMP_LINE": "cockpit connect ", "COMP_POINT": "16"}
    env["_ARGCOMPLETE_IFS"] = "\n"
    env["PYTHONPATH"] = f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tmp_path / "work", capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    answer, modules = json.loads(done.stdout.splitlines()[-1])
    assert answer.split() == ["local", "login-a", "head-1", "head-2", "gpu-box", "included-host"]
    assert not {"aiohttp", "asyncssh", "ray", "textual"} & set(modules)


def test_without_slurm_there_are_no_slurm_targets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no squeue on PATH
    assert completion.slurm_targets() == []


@pytest.mark.slurm
def test_targets_include_the_users_slurm_jobs(slurm: SlurmCluster, tmp_path: Path) -> None:
    """`slurm:ID` and `slurm:NAME` of each of the user's jobs, from the real squeue; a job name that
    `slurm:NAME` could not take (a space) is offered by its id only."""
    named = slurm.sbatch("sleep 600\n", "--hold", "--job-name", "cockpit-complete-me")
    spaced = slurm.sbatch("sleep 600\n", "--hold", "--job-name", "two words")
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        env.update(SLURM_CONF=str(slurm.conf), HOME=str(tmp_path), COCKPIT_CONFIG=str(tmp_path / "none.yaml"))
        checkout_cockpit(tmp_path / "bin")
        env["PATH"] = path_with(tmp_path / "bin")
        offered = bash_completions("cockpit connect slurm:", env, tmp_path)
        # bash breaks words at `:`, so the candidates come back without the `slurm:` already typed.
        assert named in offered and spaced in offered and "cockpit-complete-me" in offered
        assert not any("two" in word for word in offered)
    finally:
        slurm.cancel(named)
        slurm.cancel(spaced)


@pytest.mark.slurm
def test_a_slurm_controller_that_never_answers_costs_at_most_the_bound(
    slurm: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """squeue asking a controller that takes its connection and never answers (squeue itself would wait
    an hour here) is killed at the bound; no squeue is left behind."""
    silent = socket.socket()
    silent.bind((slurm.node_addr, 0))
    silent.listen(8)
    conf = tmp_path / "slurm.conf"
    lines = [line for line in slurm.conf.read_text().splitlines() if not line.startswith("MessageTimeout=")]
    port = silent.getsockname()[1]
    lines = [f"SlurmctldPort={port}" if line.startswith("SlurmctldPort=") else line for line in lines]
    conf.write_text("\n".join([*lines, "MessageTimeout=3600", ""]))
    monkeypatch.setenv("SLURM_CONF", str(conf))
    answers: list[list[str]] = []
    asking = threading.Thread(target=lambda: answers.append(completion.slurm_targets(timeout=1.0)))
    asking.start()
    connection = None
    try:
        silent.settimeout(60)
        connection, _ = silent.accept()  # squeue reached the controller and waits for its answer
        asking.join(timeout=120)  # not a speed check: without the bound this is an hour
        assert not asking.is_alive(), "squeue was not cut off at the bound"
        assert answers == [[]]
        deadline = time.monotonic() + 10
        while squeues_reading(conf) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert squeues_reading(conf) == []
    finally:
        for pid in squeues_reading(conf):
            os.kill(pid, signal.SIGKILL)
        asking.join(timeout=30)
        if connection is not None:
            connection.close()
        silent.close()


def squeues_reading(conf: Path) -> list[int]:
    """Live squeue processes whose environment names CONF."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "comm").read_text().strip() != "squeue":
                continue
            if f"SLURM_CONF={conf}".encode() in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_ssh_hosts_leave_out_patterns_and_follow_includes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "extra").write_text('Host from-include\nHost "quoted name" plain\n')
    config = tmp_path / ".ssh" / "config"
    config.write_text(
        "Host a b?c *.x !neg\n"
        "  Hostname 1.2.3.4   # comment\n"
        "HOST upper\n"
        "Include extra\n"
        "Include extra\n"  # included twice: each name once
        'Host "unbalanced\n'
        "Host\n"
    )
    assert completion.ssh_hosts(config) == ["a", "upper", "from-include", "quoted name", "plain"]
    assert completion.ssh_hosts(tmp_path / "missing") == []


def test_every_target_profile_and_layout_argument_has_its_completer() -> None:
    from cockpit.cli import build_parser

    parser = build_parser()
    completion.attach_completers(parser)
    wanted = {
        "target": completion.complete_target,
        "profile": completion.complete_profile,
        "layout": completion.complete_layout,
    }
    seen = set()
    for command, action in completion.arguments(parser):
        if action.dest in wanted:
            assert getattr(action, "completer", None) is wanted[action.dest], command.prog
            seen.add((command.prog.removeprefix(parser.prog).strip(), action.dest))
    assert {
        ("connect", "target"),
        ("status", "target"),
        ("check", "target"),
        ("submit", "profile"),
        ("slurm up", "profile"),
        ("demo", "profile"),
        ("connect", "layout"),
    } <= seen
