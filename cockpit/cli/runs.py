"""Provides `cockpit runs`: every target of the user on one screen (the local cluster, their Slurm jobs
holding a Ray cluster, `runs.hosts` of the config, the targets used recently), each with its state, its
nodes, the newest running job and what is wrong now. In a terminal, a list where Enter opens the cockpit
on a target and quitting it comes back; `--json` (or no terminal) prints one look and ends."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import TYPE_CHECKING

from cockpit.cli.common import EXIT_OK, add_connection_flags, connect_options, say, user_config

if TYPE_CHECKING:
    from cockpit.core.connect.connection import ConnectOptions
    from cockpit.core.runs.overview import RunRow


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("runs", help="every target of yours on one screen: state, running job, alerts")
    add_connection_flags(p, expose=False)
    p.add_argument("--json", action="store_true", help="one look at every target as JSON, then end")
    p.add_argument("--plain", action="store_true", help="one look as a table, then end (no TUI)")
    p.set_defaults(handler=runs)


async def look_at_all(options: ConnectOptions) -> list[RunRow]:
    """Every target of the user, each looked at once."""
    from cockpit.core.local import record
    from cockpit.core.runs.overview import gather_targets, my_slurm_clusters, overview
    from cockpit.core.runs.recent import recent

    local, slurm_jobs = await asyncio.gather(asyncio.to_thread(record.load), my_slurm_clusters())
    targets = gather_targets(local is not None, slurm_jobs, user_config().run_hosts, recent())
    return await overview(targets, options)


def runs(args: argparse.Namespace) -> int:
    options = connect_options(args, interactive=False)
    if args.json or args.plain or not (sys.stdin.isatty() and sys.stdout.isatty()):
        rows = asyncio.run(look_at_all(options))
        if args.json:
            say(json.dumps([row.as_json() for row in rows], indent=2))
        else:
            print_rows(rows)
        return EXIT_OK
    return _browse(args, options)


def _browse(args: argparse.Namespace, options: ConnectOptions) -> int:
    from cockpit.core.runs.recent import remember
    from cockpit.core.targets import parse_target
    from cockpit.ui.app import CockpitApp
    from cockpit.ui.runs import RunsApp

    config = user_config()
    while True:
        chosen = RunsApp(load=lambda: look_at_all(options), theme=config.theme).run()
        if not chosen:
            return EXIT_OK
        remember(chosen)
        app = CockpitApp(parse_target(chosen), options, config=config)
        app.run()


def print_rows(rows: list[RunRow]) -> None:
    from cockpit.core.text import clean
    from cockpit.core.units import duration

    if not rows:
        say("no targets: start one (`cockpit local up`, `cockpit slurm up`) or list hosts in `runs.hosts`")
        return
    width = max(len(r.target) for r in rows)
    for row in rows:
        nodes = f"{row.nodes_alive} nodes" if row.nodes_alive is not None else ""
        job = f"{row.job} for {duration(row.job_age)}" if row.job and row.job_age is not None else row.job
        job += f", step {row.step}" if row.step is not None else ""
        left = f"{duration(row.time_left)} left" if row.time_left is not None else ""
        what = " · ".join(p for p in (nodes, job or row.detail, left) if p)
        say(clean(f"{row.target:<{width}}  {row.state:<11}  {what}"))
        for alert in row.alerts:
            say(clean(f"{'':<{width}}  ✖ {alert}"))
