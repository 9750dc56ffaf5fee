"""Provides `cockpit check TARGET`: what will and will not work on a cluster, one line per check."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import replace

from cockpit.cli.common import EXIT_FAIL, EXIT_OK, add_connect_options, connect_options, say, user_config

DESCRIPTION = (
    "Checks what the cockpit needs on TARGET before you need it: SSH to the head and its host key (never "
    "accepted silently: --accept-new records an unknown one), the token, the dashboard and its Ray "
    "version (and the job fields of your profiles it refuses); then on every machine at once, through "
    "the head as the GPU agents and stacks go: SSH from the head, the workers' Python, py-spy and whether "
    "the kernel lets it attach to Ray's processes (ptrace scope, CAP_SYS_PTRACE, the uid Ray runs as), "
    "debugpy, the GPUs Ray schedules against those NVML or amdsmi see, and the node's clock against this "
    "machine's. One line per check: PASS, FAIL, WARN or SKIP, the host, what was found and the fix."
)
EPILOG = (
    "Exit status: 0 when no check failed (warnings and skipped checks are printed, and do not count), "
    "1 when at least one check failed (or TARGET could not be understood), 2 on a usage error."
)


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "check",
        help="what will and will not work on the cluster: SSH, token, py-spy, debugpy, GPUs, clocks",
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    add_connect_options(p)
    p.add_argument("--json", action="store_true", help="machine-readable output (cluster text as is)")
    p.add_argument(
        "--deadline",
        type=float,
        default=30.0,
        metavar="S",
        help="seconds each check may take: connecting, a dashboard answer, a machine's checks (default 30)",
    )
    p.add_argument(
        "--clock-tolerance",
        type=float,
        default=1.0,
        metavar="S",
        help="seconds a node's clock may differ from this machine's before it warns (default 1)",
    )
    p.set_defaults(handler=check)


def check(args: argparse.Namespace) -> int:
    from cockpit.core.check.findings import render_lines, summary
    from cockpit.core.check.run import check as run_checks
    from cockpit.core.check.run import profile_fields
    from cockpit.core.errors import CockpitError
    from cockpit.core.targets import parse_target
    from cockpit.core.text import clean

    if not 1 <= args.deadline <= 600:
        raise CockpitError("--deadline must be within 1..600 seconds.")
    if not 0 < args.clock_tolerance <= 3600:
        raise CockpitError("--clock-tolerance must be within 0..3600 seconds.")
    target = parse_target(args.target)
    # Never a host-key question here: an unknown key is a failed check with its fingerprint, and
    # --accept-new is the one way to record it.
    options = replace(
        connect_options(args, timeout=min(args.deadline, 10.0)), confirm_host_key=None
    )
    profiles = profile_fields(user_config().profile_dirs)
    progress = _Progress()
    try:
        report = asyncio.run(
            run_checks(
                target,
                options,
                deadline=args.deadline,
                tolerance=args.clock_tolerance,
                profiles=profiles,
                on_progress=progress.show,
            )
        )
    finally:
        progress.done()
    if args.json:
        print(json.dumps(report.as_json(), indent=2))
    else:
        for line in render_lines(report, clean):
            say(line)
        say(summary(report), sys.stderr)
    return EXIT_FAIL if report.failed else EXIT_OK


class _Progress:
    """What the check waits for, on stderr, rewritten in place on a terminal (nothing elsewhere)."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.shown = False

    def show(self, text: str) -> None:
        if not self.tty:
            return
        from cockpit.core.text import clean

        sys.stderr.write(f"\rcheck: {clean(text)[:200]}…\x1b[K")
        sys.stderr.flush()
        self.shown = True

    def done(self) -> None:
        if self.shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
