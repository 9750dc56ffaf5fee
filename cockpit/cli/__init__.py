"""Provides the `cockpit` command line: the contract in ARCHITECTURE.md.

One module per command group holds its subparsers and their handlers (`cluster`: status, wait, local;
`jobs`: submit, jobs, stop, logs; `actors`: actors, actors --pending; `debug`: paused workers and their
console; `doctor`: stacks, watch; `metrics`: a job's training curves; `profiles`; `tui`: connect, demo;
`slurm`: slurm up; `gpu`: gpu-agent; `config`: config show, config keys); `common` holds the connect
options, the prompts, `err` and the exit codes (0 ok, 1 failure with one line on stderr, 2 usage error,
3 timeout, 4 stuck, 5 hang). Start-up stays light: the modules import only argparse at the top and each
handler imports what it needs when it runs, so `cockpit status --help` imports neither Textual nor Ray,
and `cockpit status` neither Textual, Ray nor asyncssh (tests/unit/test_import_hygiene.py).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence

from cockpit.cli import actors, cluster, config, debug, doctor, gpu, jobs, metrics, profiles, slurm, tui
from cockpit.cli.common import EXIT_BROKEN_PIPE, EXIT_FAIL, EXIT_INTERRUPTED, err, say

GROUPS = (tui, cluster, jobs, actors, debug, doctor, metrics, slurm, gpu, profiles, config)
"""In the order `cockpit --help` lists their commands."""


def build_parser() -> argparse.ArgumentParser:
    from cockpit import __version__

    parser = argparse.ArgumentParser(
        prog="cockpit", description="A terminal cockpit for Ray clusters running multi-node RL training."
    )
    parser.add_argument("--version", action="version", version=f"ray-cockpit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for group in GROUPS:
        group.add_parsers(sub)
    return parser


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    # A closed terminal (SIGHUP) or a kill (SIGTERM) unwinds like Ctrl+C, so tunnels and sockets are
    # removed on the way out.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)
    args = build_parser().parse_args(argv)
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
