"""Provides `cockpit memory`: each node's memory against Ray's kill threshold, the biggest processes of the
fullest nodes, and every out-of-memory kill with its node, process, role and Ray's message."""

from __future__ import annotations

import argparse
import asyncio
import json
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from cockpit.cli.common import EXIT_OK, add_connect_options, connect_options, err, user_config

if TYPE_CHECKING:
    from cockpit.core.memory.report import MemoryReport


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "memory", help="node memory against Ray's OOM kill threshold, the biggest processes, and OOM kills"
    )
    add_connect_options(p)
    p.add_argument("--job", metavar="ID", help="only this Ray job's kills and actors (e.g. 02000000)")
    p.add_argument("--json", action="store_true", help="machine-readable output (cluster text as is)")
    p.add_argument(
        "--nodes", type=int, default=8, metavar="N", help="list the processes of the N fullest nodes (1..64)"
    )
    p.set_defaults(handler=memory)


def memory(args: argparse.Namespace) -> int:
    from cockpit.core.actors.roles import load_role_rules
    from cockpit.core.connect.connection import open_dashboard
    from cockpit.core.errors import CockpitError
    from cockpit.core.memory.report import local_kernel_log, memory_report
    from cockpit.core.targets import parse_target

    if not 0 < args.nodes <= 64:
        raise CockpitError("--nodes must be within 1..64 (each is one request to the head).")
    target = parse_target(args.target)
    rules, problem = load_role_rules(configured=user_config().roles)
    if problem:
        err(problem)

    async def run() -> MemoryReport:
        async with open_dashboard(target, connect_options(args)) as client:
            return await memory_report(
                client,
                job=args.job or "",
                rules=rules,
                top_nodes=args.nodes,
                kernel_log=local_kernel_log if target.kind == "local" else None,
            )

    report = asyncio.run(run())
    if args.json:
        print(json.dumps(report_json(report), indent=2, default=_not_available))
    else:
        print_report(report)
    return EXIT_OK


def _not_available(value: object) -> None:
    """N/A (a figure the cluster did not report) is null in JSON; nothing else should reach here."""
    from cockpit.core.snapshots import NA

    if value is NA:
        return None
    raise TypeError(f"not JSON: {type(value).__name__}")


def report_json(report: MemoryReport) -> dict[str, Any]:
    def node(n: Any) -> dict[str, Any]:
        doc = asdict(n)
        doc["used_fraction"] = n.used_fraction
        doc["warning"] = n.warning()
        doc["age_s"] = round(report.time - n.sample_time, 1) if n.sample_time else None
        return doc

    return {
        "time": report.time,
        "units": "bytes, seconds; gpu_memory_bytes is GPU memory allocated (NVML/amdsmi)",
        "nodes": [node(n) for n in report.nodes],
        "processes": [asdict(p) for p in report.processes],
        "kills": [asdict(k) for k in report.kills],
        "kernel_log": report.kernel_log,
        "warnings": list(report.warnings),
    }


def _actor_words(class_name: str, name: str) -> str:
    """An actor as its class and its name (once, when they are the same); "-" for none."""
    if not class_name:
        return name or "-"
    return class_name if not name or name == class_name else f"{class_name} {name}"


def _table(rows: list[tuple[str, ...]]) -> None:
    from cockpit.core.text import clean

    cells = [[clean(cell)[:60] for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    for row in cells:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


def print_report(report: MemoryReport) -> None:
    from cockpit.core.snapshots import NA
    from cockpit.core.text import clean
    from cockpit.core.units import ago, duration, human_bytes

    now = report.time
    rows: list[tuple[str, ...]] = [
        ("NODE", "ID", "IP", "USED / TOTAL", "KILL THRESHOLD", "TREND", "OBJECT STORE", "READ", "")
    ]
    for n in sorted(report.nodes, key=lambda n: (not n.alive, -(n.used_fraction or 0.0))):
        threshold = "-"
        if n.threshold is not None:
            t = n.threshold
            where = f" of {t.where}" if t.where else ""
            threshold = f"{human_bytes(t.bytes)} ({t.fraction:.1%}; {t.source}{where})"
        trend = "-"
        if n.slope_bytes_per_s is not None:
            sign = "+" if n.slope_bytes_per_s >= 0 else "-"
            trend = f"{sign}{human_bytes(abs(n.slope_bytes_per_s) * 60)}/min"
        store = (
            f"{human_bytes(n.object_store_used_bytes)} / {human_bytes(n.object_store_total_bytes)}"
            if n.object_store_total_bytes is not NA
            else "-"
        )
        flag = {"over": "OVER THRESHOLD", "near": "NEAR THRESHOLD", "rising": "RISING"}.get(n.flag, "")
        if not n.alive:
            flag = "dead"
        rows.append(
            (
                n.hostname or "-",
                n.node_id[:8],
                n.ip,
                f"{human_bytes(n.used_bytes)} / {human_bytes(n.total_bytes)}",
                threshold,
                trend,
                store,
                ago(now - n.sample_time) if n.sample_time else "-",
                flag,
            )
        )
    _table(rows)
    for n in report.nodes:
        if n.flag:
            print(clean(n.warning()))
    if report.processes:
        print()
        print("Biggest processes of the fullest nodes (RSS; GPU MEM: GPU memory allocated, NVML/amdsmi):")
        prows: list[tuple[str, ...]] = [("NODE", "PID", "PROCESS", "ACTOR", "ROLE", "JOB", "RSS", "GPU MEM")]
        for p in report.processes:
            prows.append(
                (
                    p.node_id[:8],
                    str(p.pid),
                    p.name,
                    _actor_words(p.class_name, p.actor_name),
                    p.role or "-",
                    p.job_id or "-",
                    human_bytes(p.rss_bytes),
                    human_bytes(p.gpu_memory_bytes) if p.gpu_memory_bytes is not NA else "-",
                )
            )
        _table(prows)
    print()
    if not report.kills:
        print("No out-of-memory kill in the cluster's worker table.")
    else:
        print(f"Out-of-memory kills, newest first ({len(report.kills)}):")
        krows: list[tuple[str, ...]] = [("WHEN", "KIND", "NODE", "PID", "WHAT", "ROLE", "JOB", "LAST RSS")]
        for k in report.kills:
            what = _actor_words(k.class_name, k.actor_name) if k.class_name else k.task_name or "-"
            krows.append(
                (
                    f"{duration(now - k.time)} ago" if k.time else "-",
                    k.label,
                    f"{k.ip} {k.node_id[:8]}".strip(),
                    str(k.pid or "-"),
                    what,
                    k.role or "-",
                    k.job_id or "-",
                    human_bytes(k.rss_bytes) if k.rss_bytes is not None else "-",
                )
            )
        _table(krows)
        for k in report.kills:
            print(f"  pid {k.pid}: {clean(k.message)[:300]}")
    print(f"Kernel OOM kills: {clean(report.kernel_log)}.")
    for warning in report.warnings:
        err(clean(warning))
