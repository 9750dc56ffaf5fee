"""Provides the run doctor's commands: `cockpit stacks` (every worker's stack, grouped) and `cockpit watch`
(the hang detector, headless: exit 5 on a hang, with the grouped stacks saved)."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from typing import TYPE_CHECKING

from cockpit.cli.common import EXIT_FAIL, EXIT_OK, add_connect_options, connect_options, err, user_config

if TYPE_CHECKING:
    from cockpit.core.connect.connection import Connection
    from cockpit.core.doctor.stacks import Collector, StacksReport
    from cockpit.core.snapshots import JobRow


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "stacks", help="the Python stack of every worker, all nodes at once, grouped by identical stack"
    )
    add_connect_options(p)
    from cockpit.core.cluster.selectors import ACTOR_SELECTOR, NODE_SELECTOR

    which = p.add_mutually_exclusive_group()
    which.add_argument("--job", metavar="ID", help="the job's driver, actors and running tasks")
    which.add_argument("--actor", metavar="ACTOR", help=f"one alive actor: {ACTOR_SELECTOR}")
    which.add_argument("--node", metavar="NODE", help=f"every worker of one alive node: {NODE_SELECTOR}")
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

    w = sub.add_parser(
        "watch",
        help="watch a running job for progress; on a hang, save the grouped stacks and exit 5",
        description=(
            "Follows JOB's driver log and the cluster's GPUs. Progress is a driver-log line (or one matching "
            "the profile's `progress:` regex) or GPU activity; after --hang-after without any (the profile's "
            "`hang_after`, default 10m) the grouped stacks of every process of the job are written to --out "
            "and the command exits 5. Exits 0 when the job succeeds, 1 when it fails or is stopped."
        ),
    )
    add_connect_options(w)
    w.add_argument("job", metavar="JOB", help="the job's submission id or Ray job id (or a prefix)")
    w.add_argument(
        "--hang-after", metavar="DURATION", help="e.g. 90s, 10m, 1h30m (default: the profile's, or 10m)"
    )
    w.add_argument("--progress", metavar="REGEX", help="only driver-log lines this finds count as progress")
    w.add_argument(
        "--out",
        metavar="FILE",
        help="where the stacks go on a hang (default ./cockpit-hang-JOB-TIME.txt; .json: JSON)",
    )
    w.add_argument("--native", action="store_true", help="native frames in the saved stacks too")
    w.add_argument(
        "--interval", type=float, default=5.0, metavar="S", help="seconds between checks (default 5)"
    )
    w.set_defaults(handler=watch)


def stacks(args: argparse.Namespace) -> int:
    from cockpit.core.connect.connection import open_connection
    from cockpit.core.doctor.gather import take
    from cockpit.core.doctor.selection import SelectionError, select
    from cockpit.core.errors import CockpitError
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
    from cockpit.core.doctor.stacks import merge_failures, render_text, report_json
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
        from cockpit.core.text import clean

        self.total = processes
        if self.tty:
            sys.stderr.write(f"\rstacks of {clean(what)}: {processes} processes on {nodes} node(s)…\x1b[K")
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


def _flags(args: argparse.Namespace) -> tuple[float | None, re.Pattern[str] | None]:
    """--hang-after and --progress, checked before anything is asked of the cluster."""
    from cockpit.core.errors import CockpitError
    from cockpit.core.units import parse_duration

    override = None
    if args.hang_after is not None:
        try:
            override = parse_duration(args.hang_after)
        except ValueError as exc:
            raise CockpitError(f"--hang-after: {exc}") from None
    progress = None
    if args.progress is not None:
        try:
            progress = re.compile(args.progress)
        except re.error as exc:
            raise CockpitError(f"--progress: not a regular expression ({exc}).") from None
    return override, progress


def watch(args: argparse.Namespace) -> int:
    from cockpit.cli.common import EXIT_HANG
    from cockpit.core.connect.connection import open_connection
    from cockpit.core.errors import CockpitError
    from cockpit.core.targets import parse_target

    if not 0.2 <= args.interval <= 300:
        raise CockpitError("--interval must be within 0.2..300 seconds.")
    _flags(args)
    target = parse_target(args.target)

    async def run() -> int:
        async with open_connection(target, connect_options(args)) as connection:
            return await _watch(connection, args, target.kind == "local")

    code = asyncio.run(run())
    return EXIT_HANG if code == EXIT_HANG else code


async def _watch(connection: Connection, args: argparse.Namespace, local: bool) -> int:
    """The flags and the file checked, then the core's watch (`watch_job`); what it says, printed."""
    import time
    from pathlib import Path

    from cockpit.cli.common import EXIT_HANG
    from cockpit.core.actors.roles import load_role_rules
    from cockpit.core.doctor.progress import describe_policy, watch_policy
    from cockpit.core.doctor.watch import save_evidence, take_evidence, watch_job
    from cockpit.core.errors import CockpitError
    from cockpit.core.snapshots import match_job
    from cockpit.core.text import clean
    from cockpit.core.units import duration

    client = connection.client
    job = match_job(await client.jobs(), args.job)
    if job.terminal:
        raise CockpitError(f"job {job.key} has ended ({job.status}): nothing to watch.")
    settings = user_config()
    policy, problem = watch_policy(
        job, *_flags(args), profile_dirs=settings.profile_dirs, default_hang_after=settings.hang_after
    )
    if problem:
        err(clean(problem))
    rules, roles_problem = load_role_rules(configured=settings.roles)
    if roles_problem:
        err(clean(roles_problem))
    out = (
        Path(args.out)
        if args.out
        else Path(f"cockpit-hang-{_safe_name(job.key)}-{time.strftime('%Y%m%d-%H%M%S')}.txt")
    )
    if out.exists():
        raise CockpitError(
            f"{out} exists already: give another --out (the evidence of a hang is never overwritten)."
        )
    if not out.parent.is_dir():
        raise CockpitError(f"{out.parent} is not a directory: give another --out.")
    err(
        clean(
            f"watching {job.key}: progress is {describe_policy(policy)}; a hang after "
            f"{duration(policy.hang_after)} without it saves the stacks to {out}"
        )
    )
    end = await watch_job(
        client, job, policy, rules, interval=args.interval, say=lambda line: err(clean(line))
    )
    verdict = end.verdict
    if verdict is None:
        return _ended(end.job)
    err(clean(f"hang: {job.key}: {verdict.line}; taking the stacks of the job…"))
    try:
        report = await take_evidence(connection, job, native=args.native, local=local)
    except CockpitError as exc:
        raise CockpitError(f"hang: {verdict.line}; no stacks taken ({exc})") from None
    save_evidence(out, report, f"{job.key}: {verdict.line}")
    err(clean(f"hang: {report.processes} stacks in {len(report.groups)} groups saved to {out}"))
    return EXIT_HANG


def _ended(job: JobRow) -> int:
    """The watch's end with its job: 0 when it succeeded, else one line and 1."""
    from cockpit.core.errors import CockpitError
    from cockpit.core.text import clean

    said = f"job {job.key} ended: {job.status}"
    if job.status == "SUCCEEDED":
        err(clean(said))
        return EXIT_OK
    raise CockpitError(said + (f" ({job.message[:200]})" if job.message else ""))


def _safe_name(key: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in key)[:80] or "job"
