"""Provides `cockpit actors`: the actors of a cluster with their roles; `--pending`: why some do not run."""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from cockpit.cli.common import EXIT_OK, EXIT_STUCK, add_connect_options, connect_options, err, user_config
from cockpit.core.cluster.selectors import NODE_SELECTOR

if TYPE_CHECKING:
    from cockpit.core.actors.listing import ActorList
    from cockpit.core.actors.pending import PendingReport
    from cockpit.core.snapshots import ActorRow


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("actors", help="list actors with their RL roles; --pending: why some are not running")
    add_connect_options(p)
    p.add_argument("--json", action="store_true", help="machine-readable output (cluster text as is)")
    p.add_argument(
        "--state", metavar="S", help="ALIVE, DEAD, PENDING_CREATION, DEPENDENCIES_UNREADY, RESTARTING"
    )
    p.add_argument("--role", metavar="R", help="rollout, policy, reference, critic, reward, env, learner ...")
    p.add_argument("--job", metavar="ID", help="Ray job id (e.g. 02000000)")
    p.add_argument(
        "--filter",
        metavar="TEXT",
        default="",
        help=(
            "filter terms: 'state:ALIVE role:rollout node:NODE job:ID class:NAME free text'; node: is "
            f"{NODE_SELECTOR} (every node it matches)"
        ),
    )
    p.add_argument("--limit", type=int, default=1000, metavar="N", help="at most N actors (1..10000)")
    p.add_argument(
        "--sort",
        metavar="COLUMN",
        help="state, role, class, name, node, gpus, memory (RSS, biggest first), restarts, age, pid, job, id",
    )
    p.add_argument(
        "--pending",
        action="store_true",
        help="say why pending actors and placement groups do not run; exit 4 when something is stuck",
    )
    p.set_defaults(handler=actors)


def actors(args: argparse.Namespace) -> int:
    from cockpit.core.actors.listing import MAX_LIMIT, actor_memory, list_actors, parse_query, with_memory
    from cockpit.core.actors.pending import fetch_pending
    from cockpit.core.connect.connection import open_dashboard
    from cockpit.core.errors import CockpitError
    from cockpit.core.targets import parse_target

    if not 0 < args.limit <= MAX_LIMIT:
        raise CockpitError(f"--limit must be within 1..{MAX_LIMIT} (the dashboard refuses more).")
    from cockpit.core.actors.table import SORT_COLUMNS

    if args.sort is not None and args.sort not in SORT_COLUMNS:
        raise CockpitError(f"--sort: no column {args.sort!r} (one of {', '.join(SORT_COLUMNS)}).")
    terms = [args.filter]
    for key, value in (("state", args.state), ("role", args.role), ("job", args.job)):
        if value:
            terms.append(f"{key}:{value}")
    query = parse_query(" ".join(terms))
    if query.problems:
        raise CockpitError(f"{query.problems[0]}.")
    target = parse_target(args.target)
    from cockpit.core.actors.roles import load_role_rules

    rules, problem = load_role_rules(configured=user_config().roles)
    if problem:
        err(problem)

    async def run() -> int:
        async with open_dashboard(target, connect_options(args)) as client:
            if args.pending:
                report = await fetch_pending(client, limit=args.limit)
                print_pending(report, args.json)
                return EXIT_STUCK if report.stuck else EXIT_OK
            listed = await list_actors(client, query, limit=args.limit, rules=rules)
            if args.sort == "memory":
                listed = with_memory(listed, await actor_memory(client, listed))
        if args.sort:
            listed = sorted_by(listed, args.sort)
        print_actors(listed, args.json, memory=args.sort == "memory")
        return EXIT_OK

    return asyncio.run(run())


def sorted_by(listed: ActorList, column: str) -> ActorList:
    """LISTED in the order the Actors screen shows for COLUMN."""
    from dataclasses import replace

    from cockpit.core.actors.table import ActorIndex

    order = ActorIndex.build(listed.rows, presort=None).sorted_order(column)
    return replace(listed, rows=tuple(listed.rows[i] for i in order))


def print_actors(listed: ActorList, as_json: bool, memory: bool = False) -> None:
    from cockpit.core.snapshots import NA
    from cockpit.core.units import human_bytes

    if as_json:
        doc = {
            "actors": [
                {
                    **actor_json(view.actor),
                    "role": view.role,
                    "host": view.host,
                    "started": view.started,
                    **({"rss_bytes": None if view.rss_bytes is NA else view.rss_bytes} if memory else {}),
                }
                for view in listed.rows
            ],
            "shown": len(listed.rows),
            "matching": listed.matching,
            "complete": listed.complete,
            "summary": listed.describe(),
            "by_state": dict(listed.by_state),
            "narrow": list(listed.narrow),
            "meta": asdict(listed.meta),
            "warnings": list(listed.warnings),
        }
        print(json.dumps(doc, indent=2, default=dict))
        return
    from cockpit.core.text import clean
    from cockpit.core.units import duration

    now = time.time()
    header: tuple[str, ...] = (
        "ID",
        "CLASS",
        "NAME",
        "ROLE",
        "STATE",
        "HOST",
        "PID",
        "GPUS",
        "RESTARTS",
        "JOB",
        "AGE",
    )
    if memory:
        header += ("RSS",)
    rows: list[tuple[str, ...]] = [header]
    for view in listed.rows:
        actor = view.actor
        rows.append(
            (
                actor.actor_id[:8],
                actor.class_name,
                actor.name,
                view.role or "-",
                actor.state,
                view.host or "-",
                str(actor.pid) if actor.pid else "-",
                f"{actor.gpus:g}",
                str(actor.num_restarts),
                actor.job_id,
                duration(now - view.started) if view.started else "-",
            )
            + ((human_bytes(view.rss_bytes) if view.rss_bytes is not NA else "-",) if memory else ())
        )
    cells = [[clean(cell)[:40] for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for row in cells if len(cells) > 1 else ():
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    print(clean(listed.describe()))
    for warning in listed.warnings:
        err(clean(warning))


def actor_json(actor: ActorRow) -> dict[str, Any]:
    """ACTOR's fields for `--json`, the runtime env left out: its env_vars may hold secrets (API keys,
    tokens), and a listing is often pasted into chats and tickets. The Actors screen shows it masked."""
    doc = asdict(actor)
    del doc["runtime_env"]
    return doc


def print_pending(report: PendingReport, as_json: bool) -> None:
    if as_json:
        doc = {
            "stuck": report.stuck,
            "alive_nodes": report.alive_nodes,
            "largest_free": dict(report.largest_free),
            "items": [asdict(item) for item in report.items],
            "warnings": list(report.warnings),
        }
        print(json.dumps(doc, indent=2))
        return
    from cockpit.core.text import clean

    for line in report.lines():
        print(clean(line))
    for warning in report.warnings:
        err(clean(warning))
