"""Provides the `cockpit` command line: the contract in ARCHITECTURE.md.

One module per command group holds its subparsers and their handlers (`cluster`: status, wait, local;
`jobs`: submit, jobs, stop, logs; `actors`: actors, actors --pending; `debug`: paused workers and their
console; `doctor`: stacks, watch; `alerts`: alerts headless; `metrics`: a job's training curves;
`profiles`; `tui`: connect, demo;
`slurm`: slurm up; `check`: what will and will not work on a cluster; `gpu`: gpu-agent; `config`: config
show, config keys; `completion`: the shell scripts, and the answers to a TAB); `common` holds the connect
options, the prompts, `err` and the exit codes (0 ok, 1 failure with one line on stderr, 2 usage error,
3 timeout, 4 stuck, 5 hang). Start-up stays light: the modules import only argparse at the top and each
handler imports what it needs when it runs, so `cockpit status --help` imports neither Textual nor Ray,
and `cockpit status` neither Textual, Ray nor asyncssh (tests/unit/test_import_hygiene.py). `cockpit`
alone shows what to run first (`first_run`), never argparse's bare usage.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence

from cockpit.cli import (
    actors,
    alerts,
    check,
    cluster,
    completion,
    config,
    debug,
    doctor,
    gpu,
    jobs,
    memory,
    metrics,
    profiles,
    runs,
    slurm,
    tui,
)
from cockpit.cli.common import EXIT_BROKEN_PIPE, EXIT_FAIL, EXIT_INTERRUPTED, EXIT_OK, err, say

GROUPS = (
    tui,
    runs,
    cluster,
    check,
    jobs,
    actors,
    memory,
    debug,
    doctor,
    alerts,
    metrics,
    slurm,
    gpu,
    profiles,
    config,
    completion,
)
"""In the order `cockpit --help` lists their commands."""


class ShowVersion(argparse.Action):
    """`--version`: the installed version, read only when asked (importlib.metadata costs tens of ms, and
    every command builds this parser)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **_: object) -> None:
        super().__init__(option_strings, dest, default=argparse.SUPPRESS, nargs=0, help="show the version")

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        from cockpit import __version__

        say(f"ray-cockpit {__version__}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cockpit", description="A terminal cockpit for Ray clusters running multi-node RL training."
    )
    parser.add_argument("--version", action=ShowVersion)
    # Not required: `cockpit` alone is the first-run screen (`first_run`), not argparse's usage error.
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for group in GROUPS:
        group.add_parsers(sub)
    return parser


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    # A closed terminal (SIGHUP) or a kill (SIGTERM) unwinds like Ctrl+C, so tunnels and sockets are
    # removed on the way out; a signal ignored when the cockpit started stays ignored (`nohup cockpit
    # alerts ...` is asked to outlive its terminal).
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, _interrupt)
    parser = build_parser()
    if argv is None and "_ARGCOMPLETE" in os.environ:
        completion.answer(parser)  # the shell asks for completions on TAB: answers and exits
    args = parser.parse_args(argv)
    if args.command is None:
        first_run()
        return EXIT_OK
    from cockpit.core.errors import CockpitError
    from cockpit.core.text import clean

    try:
        return int(args.handler(args))
    except CockpitError as exc:
        err(str(exc))
        details = getattr(exc, "details", None)
        for line in details() if callable(details) else ():
            say(f"  {clean(line)}", sys.stderr)
        return EXIT_FAIL
    except KeyboardInterrupt:
        err("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `cockpit jobs local | head`: the reader left; end quietly as other command-line tools do.
        # (SIGPIPE stays ignored: a network write to a dropped peer must raise, not kill the process.)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


def first_run() -> None:
    """What `cockpit` alone prints: what to run next, and where the settings are."""
    from cockpit import __version__
    from cockpit.core.config.settings import config_path

    path = config_path()
    state = "" if path.exists() else " (not there yet: every setting has its default)"
    say(
        f"ray-cockpit {__version__}: a terminal cockpit for Ray clusters running multi-node RL training.\n"
        "\n"
        "Try it on this machine (a local 3-node Ray cluster and an RL-style job, stopped when you quit):\n"
        "  cockpit demo\n"
        "Open it on your cluster (a Host of ~/.ssh/config, user@host, slurm:JOBID or http://HOST:PORT):\n"
        "  cockpit connect HOST\n"
        "  cockpit status HOST           one-shot summary, no TUI\n"
        "  cockpit runs                  every run of yours on one screen\n"
        "  cockpit alerts HOST...        alerts when you are not looking (JSON, your command)\n"
        "Job profiles to submit (cockpit submit HOST PROFILE):\n"
        "  cockpit profiles list\n"
        "\n"
        f"Settings: {path}{state}\n"
        "  cockpit config show           every setting, its value and where it came from\n"
        "Shell completion: cockpit completion bash|zsh|fish. Every command: cockpit --help."
    )
