"""Provides `cockpit submit`, `cockpit jobs`, `cockpit stop` and `cockpit logs`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from dataclasses import asdict
from typing import TYPE_CHECKING

from cockpit.cli.common import (
    EXIT_FAIL,
    EXIT_OK,
    add_connect_options,
    colour_wanted,
    connect_options,
    err,
    print_checklist,
    user_config,
    whole,
)
from cockpit.core.cluster.selectors import ACTOR_SELECTOR, NODE_SELECTOR
from cockpit.core.text import clean, cut

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from cockpit.core.cluster.dashboard import DashboardClient
    from cockpit.core.connect.connection import ConnectOptions
    from cockpit.core.jobs.launch import LaunchPlan
    from cockpit.core.jobs.overrides import Override
    from cockpit.core.jobs.profiles import Profile
    from cockpit.core.snapshots import JobRow
    from cockpit.core.targets import Target

DRY_RUN_TIMEOUT = 5.0
"""Seconds a dry run waits for one answer from the dashboard before it says it could not check."""


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("submit", help="submit a job from a profile")
    add_connect_options(p)
    p.add_argument("profile", metavar="PROFILE", help="profile name or path")
    p.add_argument(
        "overrides", nargs="*", metavar="KEY=VALUE", help="extra overrides appended to the entrypoint"
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="check against the target (read-only) and print the request (secrets masked); submit nothing",
    )
    p.add_argument("--follow", action="store_true", help="print the driver log until the job ends")
    p.add_argument("--force", action="store_true", help="submit even when a pre-flight check fails")
    p.add_argument(
        "--nodes", type=whole(1), metavar="N", help="run on N nodes (default: the profile's cluster.nodes)"
    )
    p.add_argument(
        "--gpus-per-node",
        type=whole(0),
        metavar="G",
        help="GPUs per node (default: the profile's cluster.gpus_per_node)",
    )
    p.set_defaults(handler=submit)

    p = sub.add_parser("jobs", help="list jobs")
    add_connect_options(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=jobs)

    p = sub.add_parser("stop", help="stop a job")
    add_connect_options(p)
    p.add_argument("job", metavar="JOB", help="submission id")
    p.set_defaults(handler=stop)

    p = sub.add_parser("logs", help="print or follow a driver, actor or node log")
    add_connect_options(p)
    p.add_argument("job", nargs="?", metavar="JOB", help="submission id: the job's driver log")
    p.add_argument("--actor", metavar="ACTOR", help=f"an actor's output: {ACTOR_SELECTOR}")
    p.add_argument("--err", action="store_true", help="with --actor: stderr instead of stdout")
    p.add_argument("--node", metavar="NODE", help=f"a node, with --file: {NODE_SELECTOR}")
    p.add_argument("--file", metavar="NAME", help="a log file of --node (e.g. raylet.out)")
    p.add_argument(
        "--follow", "-f", action="store_true", help="keep printing (a job's log ends with the job)"
    )
    p.add_argument("--lines", "-n", type=int, default=1000, metavar="N", help="start with the last N lines")
    p.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="the log's own colours (ANSI escapes): auto keeps them only on a terminal without NO_COLOR",
    )
    p.set_defaults(handler=logs)


# -- jobs / stop ---------------------------------------------------------------------------------


def jobs(args: argparse.Namespace) -> int:
    from cockpit.core.connect.connection import open_dashboard
    from cockpit.core.targets import parse_target

    target = parse_target(args.target)

    async def run() -> int:
        async with open_dashboard(target, connect_options(args)) as client:
            rows = await client.jobs()
        if args.json:
            print(json.dumps([asdict(job) for job in rows], indent=2, default=dict))
            return EXIT_OK
        for line in job_lines(rows, time.time()):
            print(line)
        return EXIT_OK

    return asyncio.run(run())


def job_lines(rows: Sequence[JobRow], now: float) -> list[str]:
    """`cockpit jobs`' table: a header, then a line a job, its id, status and entrypoint (the cluster's
    text) cleaned (one line, no escape, no control character) and cut to their columns."""
    from cockpit.core.units import ago

    lines = [f"{'JOB':32} {'STATUS':10} {'STARTED':>12}  ENTRYPOINT"]
    for job in rows:
        started = ago(now - job.start_time) if job.start_time else "-"
        status = cut(job.status, 10)
        lines.append(f"{cut(job.key, 32):32} {status:10} {started:>12}  {cut(job.entrypoint, 80)}")
    return lines


def stop(args: argparse.Namespace) -> int:
    from cockpit.core.connect.connection import open_dashboard
    from cockpit.core.targets import parse_target

    target = parse_target(args.target)

    async def run() -> int:
        async with open_dashboard(target, connect_options(args)) as client:
            stopped = await client.stop_job(args.job)
        print(clean(f"{args.job}: {'stop requested' if stopped else 'already finished'}"))
        return EXIT_OK

    return asyncio.run(run())


# -- submit --------------------------------------------------------------------------------------


def submit(args: argparse.Namespace) -> int:
    from cockpit.core.jobs import profiles
    from cockpit.core.jobs.launch import parse_overrides
    from cockpit.core.targets import parse_target

    profile = profiles.load(profiles.find(args.profile, warn=err, dirs=user_config().profile_dirs))
    profile = profiles.with_shape(profile, args.nodes, args.gpus_per_node)
    overrides = parse_overrides(args.overrides)
    target = parse_target(args.target)
    if args.dry_run:
        options = connect_options(args, timeout=DRY_RUN_TIMEOUT)
        return asyncio.run(_dry_run(target, options, profile, overrides))
    return asyncio.run(_submit(target, connect_options(args), profile, overrides, args.force, args.follow))


async def _dry_run(
    target: Target, options: ConnectOptions, profile: Profile, overrides: tuple[Override, ...]
) -> int:
    """The checklist against the target's nodes (only GETs; none when it cannot be reached) and the
    request, secrets masked. Nothing is submitted."""
    from cockpit.core.connect.connection import open_dashboard
    from cockpit.core.errors import CockpitError
    from cockpit.core.jobs.launch import plan

    ray_version = ""
    try:
        async with open_dashboard(target, options) as client:
            nodes = await client.nodes()
            ray_version = (await client.version()).get("ray_version", "")
        header = f"pre-flight for {profile.name} against {target.raw}:"
    except CockpitError as exc:
        nodes = None
        header = f"pre-flight for {profile.name}: not checked against {target.raw}: {exc}"
    dry = plan(profile, overrides, nodes, at_submit=False, ray_version=ray_version)
    print(header, file=sys.stderr)
    print_checklist(dry.checks)
    print(json.dumps(dry.request, indent=2, ensure_ascii=False))
    return EXIT_OK


async def _submit(
    target: Target,
    options: ConnectOptions,
    profile: Profile,
    overrides: tuple[Override, ...],
    force: bool,
    follow: bool,
) -> int:
    from cockpit.core.connect.connection import open_dashboard
    from cockpit.core.jobs.errors import LaunchBlocked
    from cockpit.core.jobs.launch import plan, submit, with_cluster_checks

    async with open_dashboard(target, options) as client:
        launch: LaunchPlan = plan(profile, overrides, await client.nodes())
        if profile.post_mortem:
            print("checking that the cluster's workers can load debugpy ...", file=sys.stderr)
        launch = await with_cluster_checks(client, launch)
        print(f"pre-flight for {profile.name}:", file=sys.stderr)
        print_checklist(launch.checks)
        try:
            submission_id = await submit(client, launch, force=force)
        except LaunchBlocked as exc:
            err(f"not submitted: {exc} (fix it, or pass --force)")
            return EXIT_FAIL
        print(clean(f"submitted {submission_id}"))
        if not follow:
            return EXIT_OK
        return await follow_job(client, submission_id, colour=colour_wanted())


def log_writer(colour: bool) -> tuple[Callable[[bytes], object], Callable[[], None]]:
    """(write, end) for log bytes on stdout, as text a terminal only shows: with COLOUR the log's colour
    codes are kept, never its other escapes (a title, a clipboard write, a cleared screen)."""
    from cockpit.core.logs.terminal import TerminalText

    out = sys.stdout.buffer
    text = TerminalText(colour)

    def end() -> None:
        out.write(text.end().encode())
        out.flush()

    return lambda chunk: out.write(text.feed(chunk).encode()), end


async def follow_job(
    client: DashboardClient, submission_id: str, lines: int = -1, colour: bool = False
) -> int:
    """Stream the driver log until the job ends; exit 0 only if it SUCCEEDED.

    One log stream is held (it counts against the dashboard's request limit); when it drops it resumes
    with no line lost or repeated (LogTail). The end is read from the file once the job is over.
    """
    from cockpit.core.cluster.errors import DashboardError
    from cockpit.core.errors import is_permanent
    from cockpit.core.logs.sources import LogSource, LogTail

    write, end = log_writer(colour)
    job = await _job_when_driver_starts(client, submission_id)
    if job.driver_node_id:
        tail = LogTail(client, LogSource.driver(job), lines=lines, on_event=lambda m: err(m))
        done = asyncio.Event()

        async def watch_status() -> None:
            nonlocal job
            while not job.terminal:
                await asyncio.sleep(2.0)
                try:
                    job = await client.job(submission_id)
                except DashboardError as exc:
                    if is_permanent(exc):  # the one rule: a refusal ends the follow, a drop is ridden out
                        raise
            done.set()

        async def stream() -> None:
            async for chunk in tail.chunks():
                write(chunk)
                sys.stdout.flush()

        streamer = asyncio.ensure_future(stream())
        watcher = asyncio.ensure_future(watch_status())
        await asyncio.wait({streamer, watcher}, return_when=asyncio.FIRST_COMPLETED)
        streamer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await streamer
        if streamer.done() and not streamer.cancelled() and streamer.exception() is not None:
            watcher.cancel()
            raise streamer.exception()  # type: ignore[misc]
        await watcher
        # The stream polls the file about once a second: deliver what it had not sent yet.
        async for chunk in tail.rest():
            write(chunk)
        end()
    if job.status == "SUCCEEDED":
        print(clean(f"{submission_id}: SUCCEEDED"))
        return EXIT_OK
    message = " ".join(job.message.split())[:500] or "no message"
    err(f"job {submission_id} {job.status}: {message}")
    return EXIT_FAIL


async def _job_when_driver_starts(client: DashboardClient, submission_id: str) -> JobRow:
    while True:
        job = await client.job(submission_id)
        if job.driver_node_id or job.terminal:
            return job
        await asyncio.sleep(1.0)


# -- logs ----------------------------------------------------------------------------------------


def logs(args: argparse.Namespace) -> int:
    from cockpit.core.connect.connection import open_dashboard
    from cockpit.core.errors import CockpitError
    from cockpit.core.targets import parse_target

    chosen = [bool(args.job), bool(args.actor), bool(args.node or args.file)]
    if sum(chosen) != 1:
        raise CockpitError("give exactly one of JOB, --actor ACTOR, or --node NODE --file NAME.")
    if (args.node is None) != (args.file is None):
        raise CockpitError("--node and --file go together (e.g. --node 3f2a --file raylet.out).")
    target = parse_target(args.target)
    colour = colour_wanted(args.color)

    async def run() -> int:
        from cockpit.core.cluster.selectors import find_actor, find_node
        from cockpit.core.logs.sources import LogSource, LogTail

        async with open_dashboard(target, connect_options(args)) as client:
            if args.job:
                job = await client.job(args.job)
                if args.follow:
                    return await follow_job(client, job.key, lines=args.lines, colour=colour)
                if not job.driver_node_id:
                    raise CockpitError(f"{job.key} has no driver log yet ({job.status}).")
                source = LogSource.driver(job)
            elif args.actor:
                source = LogSource.actor(await find_actor(client, args.actor), "err" if args.err else "out")
            else:
                source = LogSource.file((await find_node(client, args.node)).node_id, args.file)
            write, end = log_writer(colour)
            if not args.follow:
                write(await client.log_bytes(source.params(), lines=args.lines))
                end()
                return EXIT_OK
            async for chunk in LogTail(client, source, lines=args.lines, on_event=err).chunks():
                write(chunk)
                sys.stdout.flush()
            end()
        return EXIT_OK

    return asyncio.run(run())
