"""Provides shell completion for bash, zsh and fish: `cockpit completion SHELL` prints the script to load,
and `answer` replies when the shell asks (argcomplete's protocol: on TAB the script runs `cockpit` with
`_ARGCOMPLETE` set and reads the candidates back on file descriptor 8).

Commands, subcommands and flags come from the parser itself. Values: a TARGET is `local`, a Host entry of
the user's OpenSSH config (`--ssh-config`, else `ssh_config` in config, else `~/.ssh/config`, with the
files it Includes; patterns are left out) or `slurm:` with the id or the name of one of the user's Slurm
jobs (`squeue --me`, only where Slurm is installed, and given at most a second); a PROFILE is a name the
cockpit finds (`cockpit profiles list`) or a file; `--layout` a layout name. Completion reads files and
asks squeue, and never connects to a cluster.
"""

from __future__ import annotations

import argparse
import glob
import os
import shlex
import shutil
import subprocess
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from cockpit.cli.common import EXIT_OK, say

SHELLS = ("bash", "zsh", "fish")
SQUEUE_SECONDS = 1.0
"""The most a TAB waits for `squeue` (a slurmctld that is down or busy answers late or never)."""
_INCLUDE_DEPTH = 8
"""How deep `Include` is followed (OpenSSH's own limit is 16)."""
_NOT_IN_A_NAME = "/\\'\""
"""What `slurm:NAME` refuses in a job name (`targets.parse_target`); whitespace too."""


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "completion",
        help="print the shell completion script (bash, zsh or fish)",
        description="Print the completion script for SHELL. Load it from your shell's start-up file: "
        'bash, in ~/.bashrc: eval "$(cockpit completion bash)"; zsh, in ~/.zshrc after compinit: '
        'eval "$(cockpit completion zsh)"; fish: cockpit completion fish > '
        "~/.config/fish/completions/cockpit.fish",
    )
    p.add_argument("shell", choices=SHELLS, metavar="SHELL", help="bash, zsh or fish")
    p.set_defaults(handler=print_script)


def print_script(args: argparse.Namespace) -> int:
    from argcomplete.shell_integration import shellcode

    say(shellcode(["cockpit"], shell=args.shell).rstrip("\n"))
    return EXIT_OK


def answer(parser: argparse.ArgumentParser, **options: Any) -> None:
    """Reply to the shell's completion request and exit (argcomplete's way); returns only when the shell
    did not ask (`_ARGCOMPLETE` not set). OPTIONS go to `argcomplete.autocomplete` (the tests' output
    stream and exit)."""
    import argcomplete

    attach_completers(parser)
    # Flags once a `-` is typed: `cockpit connect <TAB>` offers the hosts, not twelve flags first.
    argcomplete.autocomplete(parser, always_complete_options=False, **options)


# -- which argument completes how -----------------------------------------------------------------


def attach_completers(parser: argparse.ArgumentParser) -> None:
    """Give each TARGET, PROFILE and layout argument of every command its completer."""
    for command, action in arguments(parser):
        completer: Callable[..., Iterable[str]] | None = None
        if action.dest == "target":
            completer = complete_target
        elif action.dest == "profile" or (action.dest == "name" and command.prog.endswith("profiles show")):
            completer = complete_profile
        elif action.dest == "layout":
            completer = complete_layout
        if completer is not None:
            action.completer = completer  # type: ignore[attr-defined]  # argcomplete reads this attribute


def arguments(parser: argparse.ArgumentParser) -> Iterator[tuple[argparse.ArgumentParser, argparse.Action]]:
    """Every argument of PARSER and of its subcommands, with the (sub)parser it belongs to."""
    seen: set[int] = set()
    todo = [parser]
    while todo:
        command = todo.pop()
        if id(command) in seen:
            continue
        seen.add(id(command))
        for action in command._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo.extend(action.choices.values())
            else:
                yield command, action


# -- the completers (argcomplete calls them with prefix=, action=, parser=, parsed_args=) -----------


def complete_target(prefix: str = "", parsed_args: argparse.Namespace | None = None, **_: Any) -> list[str]:
    explicit = getattr(parsed_args, "ssh_config", None)
    return ["local", *ssh_hosts(ssh_config_file(explicit)), *slurm_targets()]


def complete_profile(prefix: str = "", **_: Any) -> list[str]:
    from cockpit.cli.common import user_config
    from cockpit.core.jobs import profiles

    found, _problems = profiles.discover(dirs=user_config().profile_dirs)
    names = [profile.name for profile in found]
    if prefix.startswith(".") or os.sep in prefix:
        names += profile_files(prefix)
    return names


def complete_layout(**_: Any) -> list[str]:
    from cockpit.core.config.layouts import known_layouts

    return known_layouts()


# -- where the values come from -------------------------------------------------------------------


def ssh_config_file(explicit: str | None) -> Path:
    """The OpenSSH config the cockpit would read: `--ssh-config`, else `ssh_config` in config, else
    `~/.ssh/config`."""
    if not explicit:
        from cockpit.cli.common import user_config

        explicit = user_config().ssh_config or None
    return Path(os.path.expanduser(explicit)) if explicit else Path.home() / ".ssh" / "config"


def ssh_hosts(config: Path, _depth: int = 0) -> list[str]:
    """The names of CONFIG's `Host` entries and of the files it `Include`s, in order, once each; a
    pattern (`*`, `?`, a `!` negation) is not a name anyone types, and is left out."""
    try:
        text = config.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    hosts: list[str] = []
    for line in text.splitlines():
        words = _words(line)
        if not words:
            continue
        keyword, _, inline = words[0].partition("=")
        values = [inline, *words[1:]] if inline else words[1:]
        if keyword.lower() == "host":
            hosts += [v for v in values if v.isprintable() and not any(c in v for c in "*?!") and v]
        elif keyword.lower() == "include" and _depth < _INCLUDE_DEPTH:
            for pattern in values:
                path = Path(os.path.expanduser(pattern))
                if not path.is_absolute():
                    path = Path.home() / ".ssh" / path  # as ssh_config(5) reads a user's Include
                for match in sorted(glob.glob(str(path))):
                    hosts += ssh_hosts(Path(match), _depth + 1)
    return list(dict.fromkeys(hosts))


def _words(line: str) -> list[str]:
    try:
        return shlex.split(line, comments=True)
    except ValueError:  # an unbalanced quote: ssh itself would refuse the line
        return []


def slurm_targets(timeout: float = SQUEUE_SECONDS) -> list[str]:
    """`slurm:ID` and `slurm:NAME` for each of the user's jobs; nothing where Slurm is not installed, or
    when squeue fails or takes longer than TIMEOUT seconds (it is killed)."""
    squeue = shutil.which("squeue")
    if squeue is None:
        return []
    try:
        done = subprocess.run(
            [squeue, "--me", "--noheader", "--format=%i|%j"],
            capture_output=True,
            text=True,
            errors="replace",
            stdin=subprocess.DEVNULL,
            timeout=timeout,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    if done.returncode != 0:
        return []
    targets: list[str] = []
    for line in done.stdout.splitlines():
        job_id, _, name = line.strip().partition("|")
        if job_id and job_id.replace("_", "").isdigit():
            targets.append(f"slurm:{job_id}")
        if name and name.isprintable() and not any(c.isspace() or c in _NOT_IN_A_NAME for c in name):
            targets.append(f"slurm:{name}")
    return list(dict.fromkeys(targets))


def profile_files(prefix: str) -> list[str]:
    """YAML files and directories under what PREFIX has typed so far (a profile may be a path)."""
    import argcomplete.completers

    files = argcomplete.completers.FilesCompleter(allowednames=("yaml", "yml"), directories=True)
    return list(files(prefix))
