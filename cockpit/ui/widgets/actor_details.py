"""Provides the words of the Actors screen's details pane: one actor's `ActorDetails` as labelled lines.

`detail_pairs` words each value ("not placed", "12m05s ago (2026-11-26 14:03:21)", "0: 87%, 1: N/A",
"my_pg (5b7a2df6) · CREATED · 2 x {CPU: 0.1} · bundles #0, #1 on this node") in reading order, each cut
at a few hundred characters, as any cluster string may be huge, and cleaned of control characters;
`details_text` lays the pairs out as the pane's `Text`, labels aligned, every value shown as text (never
markup).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Sequence

from rich.text import Text

from cockpit.core.actors.details import ActorDetails, ActorPlace, GroupPlace
from cockpit.core.actors.pending import format_bundle
from cockpit.core.text import shortened
from cockpit.core.units import duration
from cockpit.ui.widgets.safe_text import clean

MAX_VALUE_CHARS = 300
"""A value is cut here (a 10 MB class name from the cluster must not freeze the pane); the runtime env,
of several lines, is bounded by the core's masking instead."""
MAX_PART_CHARS = 80
"""A name inside a value of several parts (a node's host, a group's name) is cut here, so that a long one
does not push the rest of the value past MAX_VALUE_CHARS."""


def cut(text: str, limit: int = MAX_VALUE_CHARS) -> str:
    """TEXT `shortened` to LIMIT characters (a value of the details pane, already clean)."""
    return shortened(text, limit)


def short_id(ident: str) -> str:
    """The first 8 characters: Ray's actor, node and group ids differ there (the tail is the job id)."""
    return ident[:8]


def detail_pairs(details: ActorDetails) -> tuple[tuple[str, str], ...]:
    """(label, value) pairs for the details pane, in reading order: values plain text to show as text,
    cleaned, one line each but the runtime env's."""
    d = details
    pairs: list[tuple[str, str]] = [
        ("Actor id", cut(d.actor_id) or "unknown"),
        ("Class", cut(d.class_name) or "unknown"),
        ("Name", cut(d.name) or "none"),
    ]
    if d.repr_name:
        pairs.append(("Repr name", cut(d.repr_name)))
    pairs += [
        ("Role", cut(d.role) if d.role else "unknown (class shown)"),
        ("State", cut(d.state) or "unknown"),
    ]
    if d.death_cause is not None:
        pairs.append(("Death cause", cut(d.death_cause) or "none given"))
    pairs += [
        ("Restarts", str(d.restarts)),
        ("Job", cut(d.job_id) or "unknown"),
        ("Node", node_text(d.node)),
        ("PID", str(d.pid) if d.pid else "none"),
        ("Started", started_text(d.started, d.age)),
        ("Resources", cut(format_bundle(d.resources)) if d.resources else "none"),
        ("GPUs", cut(gpus_text(d.gpus, d.gpus_requested))),
        ("Placement group", placement_group_text(d.placement_group)),
    ]
    # One line each (a newline in a class name must not forge a line of the pane); the runtime env's
    # lines come cleaned one by one from the core's masking.
    return (*((label, clean(value)) for label, value in pairs), ("Runtime env", d.runtime_env))


def details_text(pairs: Sequence[tuple[str, str]]) -> Text:
    """PAIRS as the pane shows them: bold labels in a column, a value of several lines indented under its
    first line."""
    text = Text()
    width = max((len(label) for label, _ in pairs), default=0)
    for n, (label, value) in enumerate(pairs):
        if n:
            text.append("\n")
        text.append(f"{label:<{width}}  ", style="bold")
        text.append("\n  ".join(clean(line) for line in value.split("\n")))
    return text


def node_text(place: ActorPlace | None) -> str:
    """ "host · IP · short id", "(dead)" after a dead node; "not placed" without a node."""
    if place is None:
        return "not placed"
    if not place.listed:
        parts = [cut(place.host, MAX_PART_CHARS), short_id(place.node_id), "(not in the node table)"]
        return " · ".join(part for part in parts if part)
    parts = [
        cut(place.host, MAX_PART_CHARS),
        cut(place.ip, MAX_PART_CHARS) if place.ip != place.host else "",
        short_id(place.node_id),
    ]
    text = " · ".join(part for part in parts if part)
    return text if place.alive else f"{text} (dead)"


def started_text(started: float | None, age: float | None) -> str:
    """ "12m05s ago (2026-11-26 14:03:21)", in local time; "unknown" without a readable time."""
    if started is None or age is None:
        return "unknown"
    try:
        clock = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started))
    except (OverflowError, OSError, ValueError):
        return "unknown"
    return f"{duration(age)} ago ({clock})"


def gpus_text(gpus: Sequence[tuple[int, float | None]], requested: float) -> str:
    """ "0: 87%, 1: N/A" from telemetry; "logical only" when the actor asks for GPUs no telemetry maps
    to it (`ray start --num-gpus` without hardware, or the reporter has not seen its process yet)."""
    if gpus:
        return ", ".join(f"{index}: {_percent(util)}" for index, util in gpus)
    return f"logical only ({requested:g} requested)" if requested > 0 else "none"


def _percent(util: float | None) -> str:
    return f"{util:.0f}%" if util is not None and math.isfinite(util) else "N/A"


def placement_group_text(place: GroupPlace | None) -> str:
    """ "my_pg (5b7a2df6) · CREATED · 2 x {CPU: 0.1} · bundles #0, #1 on this node"; "none"."""
    if place is None:
        return "none"
    group, group_id = place.group, place.group_id
    if group is None:
        return f"{short_id(group_id)} (not in the placement group list)"
    label = f"{cut(group.name, MAX_PART_CHARS)} ({short_id(group_id)})" if group.name else short_id(group_id)
    shapes = Counter(format_bundle(bundle) for bundle in group.bundles)
    shown = ", ".join(f"{n} x {shape}" for shape, n in shapes.items())
    parts = [label, cut(group.state, MAX_PART_CHARS) or "unknown", cut(shown, MAX_PART_CHARS)]
    if place.bundles_here is not None:
        parts.append(bundles_text(place.bundles_here))
    return cut(" · ".join(part for part in parts if part))


def bundles_text(indices: Sequence[int]) -> str:
    """ "bundles #0, #2 on this node", runs of three or more shortened ("#0-#7"); "no bundle on this node"."""
    if not indices:
        return "no bundle on this node"
    runs: list[list[int]] = []
    for index in indices:
        if runs and index == runs[-1][-1] + 1:
            runs[-1].append(index)
        else:
            runs.append([index])
    text = ", ".join(
        f"#{run[0]}-#{run[-1]}" if len(run) > 2 else ", ".join(f"#{i}" for i in run) for run in runs
    )
    return f"{'bundle' if len(indices) == 1 else 'bundles'} {cut(text)} on this node"
