"""Provides the run doctor's commands: `cockpit stacks` (every worker's stack, grouped) and `cockpit watch`
(the hang detector, headless: exit 5 on a hang, with the grouped stacks saved)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import TYPE_CHECKING

from cockpit.cli.common import EXIT_FAIL, EXIT_OK, add_connect_options, connect_options, err

if TYPE_CHECKING:
    from cockpit.core.stacks import Collector, StacksReport


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "stacks", help="the Python stack of every worker, all nodes at once, grouped by identical stack"
    )
    add_connect_options(p)
    which = p.add_mutually_exclusive_group()
    which.add_argument("--job", metavar="ID", help="the job's driver, actors and running tasks")
    which.add_argument("--actor", metavar="ID", help="one actor (id, id prefix or name)")
    which.add_argument("--node", metavar="ID", help="every worker of one node (id prefix, IP or host name)")
    p.add_argument("--native", action="store_true", help="native (C/C++) frames too (slower)")
    p.add_argument("--json", action="store_true", help="machine-readable output (cluster text as is)")
    p.add_argument(
        "--via",
        choices=("auto", "dashboard", "ssh"),
        default="auto",
        help="how: the head's /worker/traceback where it allows it (auto), or py-spy over SSH on the nodes",
    )
    p.add_argument("--brief", action="store_true", help="one line per group, without the stacks")
    p.set_defaults(handler=stacks)


def stacks(args: argparse.Namespace) -> int:
    from cockpit.core.connection import open_connection
    from cockpit.core.errors import CockpitError
    from cockpit.core.stack_gather import SelectionError, select, take
    from cockpit.core.targets import parse_target

    target = parse_target(args.target)
    progress = _Progress()

    async def run() -> StacksReport:
        async with open_connection(target, connect_options(args)) as connection:
            try:
                selection = await select(connection.client, job=args.job, actor=args.actor, node=args.node)
                progress.start(selection.what, len(selection.members), len(selection.nodes))
                return await take(
                    connection,
                    selection,
                    native=args.native,
                    via=args.via,
                    local=target.kind == "local",
                    on_update=progress.update,
                )
            except SelectionError as exc:
                raise CockpitError(str(exc)) from None
            finally:
                progress.done()

    report = asyncio.run(run())
    print_report(report, args.json, full=not args.brief)
    if not report.groups:
        return EXIT_FAIL
    return EXIT_OK


def print_report(report: StacksReport, as_json: bool, full: bool = True) -> None:
    from cockpit.core.stacks import merge_failures, render_text, report_json
    from cockpit.core.text import clean

    if as_json:
        print(json.dumps(report_json(report), indent=2))
    else:
        text = render_text(report, full=full, clean=clean)
        if text:
            print(text)
    if not report.groups:
        reasons = merge_failures(report.failures)
        err(clean(f"no stack taken: {reasons[0]}" if reasons else "no stack taken"))


class _Progress:
    """`stacks: 30 of 41 processes from 2 of 3 nodes…` on stderr, rewritten in place on a terminal."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.total = 0
        self.shown = False

    def start(self, what: str, processes: int, nodes: int) -> None:
        self.total = processes
        if self.tty:
            sys.stderr.write(f"\rstacks of {what}: {processes} processes on {nodes} node(s)…\x1b[K")
            sys.stderr.flush()
            self.shown = True

    def update(self, collector: Collector) -> None:
        if not self.tty:
            return
        taken = len(collector.dumps) + len([f for f in collector.failures if f.pid])
        nodes = len(collector.expected)
        done = len(collector.done_nodes)
        sys.stderr.write(f"\rstacks: {taken} of {self.total} processes, {done} of {nodes} nodes…\x1b[K")
        sys.stderr.flush()

    def done(self) -> None:
        if self.shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
