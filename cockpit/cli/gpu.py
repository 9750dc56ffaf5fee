"""Provides `cockpit gpu-agent`: this machine's GPUs as JSON lines (what high-resolution mode runs)."""

from __future__ import annotations

import argparse
import sys

from cockpit.cli.common import EXIT_OK


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("gpu-agent", help="print one JSON line per sample of this machine's GPUs")
    p.add_argument(
        "--interval", type=float, default=1.0, metavar="S", help="seconds between samples (default 1)"
    )
    p.add_argument("--count", type=int, metavar="N", help=argparse.SUPPRESS)
    p.set_defaults(handler=gpu_agent)


def gpu_agent(args: argparse.Namespace) -> int:
    from cockpit.core.errors import CockpitError
    from cockpit.core.gpu import detect
    from cockpit.core.gpu.agent import run

    if args.interval <= 0:
        raise CockpitError("--interval must be more than 0 seconds.")
    run(detect(), sys.stdout, interval=args.interval, count=args.count)
    return EXIT_OK
