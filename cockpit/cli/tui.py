"""Provides the commands that open the TUI: `cockpit connect` and `cockpit demo`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import signal
from collections.abc import Iterator
from typing import TYPE_CHECKING

from cockpit.cli.common import (
    EXIT_OK,
    EXIT_USAGE,
    add_connect_options,
    connect_options,
    err,
    say,
    user_config,
    whole,
)

if TYPE_CHECKING:
    from cockpit.core.cluster.dashboard import DashboardClient
    from cockpit.core.jobs.profiles import Profile


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("connect", help="open the cockpit on a cluster")
    add_connect_options(p, target_optional=True)
    p.add_argument("--expect-nodes", type=whole(1), metavar="N", help="nodes the job needs (join progress)")
    p.add_argument("--expect-gpus", type=whole(0), metavar="G", help="GPUs the job needs (join progress)")
    p.add_argument(
        "--layout", metavar="NAME", help="layout of the cockpit screen (key 0): layouts/NAME.yaml (or config)"
    )
    p.set_defaults(handler=connect)

    p = sub.add_parser("demo", help="start a local 3-node cluster, run the demo job, open the cockpit")
    p.add_argument("--nodes", type=whole(1), default=3)
    p.add_argument("--gpus-per-node", type=whole(0), default=2)
    p.add_argument("--profile", default="demo", help="profile to submit (demo, demo-crash, demo-hang)")
    p.add_argument("--keep", action="store_true", help="leave the cluster running on exit")
    p.set_defaults(handler=demo)


def connect(args: argparse.Namespace) -> int:
    from cockpit.core.targets import parse_target

    settings = user_config()
    raw = args.target or settings.target
    if not raw:
        err("connect: no TARGET given and no `target` in the config (cockpit config show)")
        return EXIT_USAGE
    target = parse_target(raw)
    from cockpit.core import heap

    heap.for_a_long_run()
    with gc_paused():
        from cockpit.core.runs.recent import remember
        from cockpit.ui.app import CockpitApp

        remember(raw)  # for `cockpit runs`

        # The TUI asks its own questions (host key, passphrase) in dialogs, not on the terminal.
        app = CockpitApp(
            target,
            connect_options(args, interactive=False),
            expect_nodes=args.expect_nodes,
            expect_gpus=args.expect_gpus,
            layout=args.layout,
            config=settings,
        )
        app.run()
    return app.return_code or EXIT_OK


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic GC off from the TUI's imports to its first screen: they make about a million objects
    and no garbage, and its passes over them were a tenth of the start-up. The app turns it on again,
    with its own thresholds, once it is up (`ui.app.tune_gc`); it is on again here in any case."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


async def submit_demo_job(client: DashboardClient, profile: Profile, submission_id: str | None = None) -> str:
    """The demo's job, through the one launch path: the static checks (the cluster it just started is
    not held to the profile's shape), a local working_dir uploaded once, no double submit, and the
    profile recorded in the job's metadata. Returns the submission id.

    Raises:
        LaunchBlocked: a static check failed (a secret not set, an RLinf placement that does not add up).
    """
    from cockpit.core.jobs import launch

    return await launch.submit(client, launch.plan(profile, submission_id=submission_id))


def demo(args: argparse.Namespace) -> int:
    from cockpit.core.connect.connection import ConnectOptions, open_dashboard
    from cockpit.core.jobs import profiles
    from cockpit.core.local import processes, record
    from cockpit.core.targets import Target

    # A skipped unsafe file says so.
    profile = profiles.load(profiles.find(args.profile, warn=err, dirs=user_config().profile_dirs))
    existing = record.load()
    started_here = existing is None or not processes.is_running(existing)
    try:
        if started_here:
            say(f"starting a local Ray cluster: {args.nodes} nodes x {args.gpus_per_node} logical GPUs ...")
            processes.up(args.nodes, args.gpus_per_node, progress=lambda m: say(f"  {m}"))
        else:
            say("using the local cluster that is already running (it is left running on exit)")
        target = Target(kind="local", raw="local")

        async def submit() -> str:
            async with open_dashboard(target) as client:
                return await submit_demo_job(client, profile)

        submission_id = asyncio.run(submit())
        say(f"submitted the {profile.name} job: {submission_id}")
        from cockpit.core import heap
        from cockpit.ui.app import CockpitApp

        heap.for_a_long_run()

        stop_here = started_here and not args.keep
        app = CockpitApp(
            target,
            ConnectOptions(),
            expect_nodes=args.nodes,
            expect_gpus=args.nodes * args.gpus_per_node,
            title_suffix="demo",
            config=user_config(),
            # A closed terminal whose exit never ends still stops the cluster before the process ends.
            before_forced_exit=processes.down if stop_here else None,
        )
        app.run()
    finally:
        # Every way out comes here: q, Ctrl+C, SIGTERM, and a terminal closed under the app (SIGHUP, then
        # EIO on every write). What the demo started is stopped whatever the terminal can still show, and
        # a second signal does not cut the stopping short.
        if started_here and not args.keep:
            say("stopping the local Ray cluster ...")
            with signals_ignored():
                processes.down()
    return app.return_code or EXIT_OK  # 128 + the signal that ended it (SIGTERM, SIGHUP), as `connect`


@contextlib.contextmanager
def signals_ignored() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP ignored for the length of the block (a bounded teardown)."""
    wanted = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    before = {sig: signal.signal(sig, signal.SIG_IGN) for sig in wanted}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
