"""Provides the node table: one keyed row per node, updated in place; dead nodes stay listed.

A poll hands the table every node (2,020 rows at 2,000 nodes, every 5 s), and most rows have not changed
since the last: a row's cells are built again only when what they are built from changed (its node, how
long it has been silent, its "joined" age as written), and a row whose age alone moved gets that one
cell. Building and comparing every row's cells on every poll cost most of the cockpit's idle CPU there.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from rich.text import Text

from cockpit.core.memory.watch import NodeMemory
from cockpit.core.snapshots import NA, NodeSnapshot
from cockpit.core.text import cut
from cockpit.core.units import ago, duration, human_bytes, percent
from cockpit.ui.widgets.keyed_table import KeyedTable
from cockpit.ui.widgets.safe_text import plain

COLUMNS = (
    ("node", "Node"),
    ("host", "Host"),
    ("ip", "IP"),
    ("state", "State"),
    ("cpu", "CPU"),
    ("mem", "Memory"),
    ("gpus", "GPUs"),
    ("store", "Object store"),
    ("joined", "Joined"),
    ("reason", "Death reason"),
)


HOST_CHARS, IP_CHARS, STATE_CHARS, REASON_CHARS = 40, 39, 24, 200
"""The most of a host name, an IP (an IPv6 address is at most 39), a state and a death reason a cell
shows, cut with "…": the cluster's text can be any length, and a column is as wide as its widest cell
(one 10,000-character host name pushed every other column out of sight)."""

TREND_SHOWN = 64 * 2**20
"""A node's memory trend is shown from this many bytes a minute (either way)."""


def memory_cell(node: NodeSnapshot, memory: NodeMemory | None) -> Text:
    """Used/total, then the trend where it moves (+1.2 GiB/min); red near or over Ray's kill threshold,
    yellow rising toward it (`core.memory.watch`)."""
    if node.mem_total_bytes is NA:
        return Text("N/A")
    text = f"{human_bytes(node.mem_used_bytes)}/{human_bytes(node.mem_total_bytes)}"
    slope = memory.slope_bytes_per_s if memory is not None else None
    if slope is not None and abs(slope) * 60 >= TREND_SHOWN:
        text += f" {'+' if slope > 0 else '-'}{human_bytes(abs(slope) * 60)}/min"
    flag = memory.flag if memory is not None else ""
    return Text(text, style={"over": "bold red", "near": "bold red", "rising": "bold yellow"}.get(flag, ""))


def node_cells(
    node: NodeSnapshot, now: float, silent_for: float | None = None, memory: NodeMemory | None = None
) -> dict[str, Text]:
    """The cells of one node's row, by column key: all `Text`, since a `str` cell is read as markup and
    the ids, names, states and death causes came from the cluster. SILENT_FOR: seconds the node, still
    ALIVE to Ray, has sent nothing new (`ClusterSnapshot.silent`): it is not answering. MEMORY: its
    memory against Ray's kill threshold, with its trend (`MemoryWatch`), where known."""
    state = plain(cut(node.state, STATE_CHARS), "bold green" if node.alive else "bold red")
    if node.alive and silent_for is not None:
        state = plain(f"not answering ({duration(silent_for)})", "bold yellow")
    gpus = f"{node.logical_gpus:g}"
    if node.logical_gpus and not node.has_gpu_telemetry:
        gpus += " (logical)"
    elif node.gpus:
        gpus = f"{len(node.gpus)} phys"
    store = (
        "N/A"
        if node.object_store_total_bytes is NA
        else f"{human_bytes(node.object_store_used_bytes)}/{human_bytes(node.object_store_total_bytes)}"
    )
    return {
        "node": plain(f"{node.node_id[:8]}{' ★' if node.is_head else ''}"),
        "host": plain(cut(node.hostname, HOST_CHARS)),
        "ip": plain(cut(node.ip, IP_CHARS)),
        "state": state,
        "cpu": Text(percent(node.cpu_percent) if node.alive else "-"),
        "mem": memory_cell(node, memory) if node.alive else Text("-"),
        "gpus": Text(gpus),
        "store": Text(store if node.alive else "-"),
        "joined": Text(joined(node, now)),
        "reason": plain(cut(node.state_message, REASON_CHARS), "red") if not node.alive else Text(),
    }


def joined(node: NodeSnapshot, now: float) -> str:
    """The "Joined" cell's text: how long ago the node joined, as of NOW: seconds in its first minute,
    then whole minutes, then hours and minutes. Minutes, not `3m05s`: a column of 2,000 ages in seconds
    changed every cell on every poll (each a cell to write and a table to repaint)."""
    return joined_until(node, now)[0]


def joined_until(node: NodeSnapshot, now: float) -> tuple[str, float]:
    """`joined`'s text, and the time (posix seconds) it next changes: a poll before then need not
    work it out again (at 2,000 nodes, each poll did, for every row)."""
    if not node.start_time:
        return "?", float("inf")
    age = max(0, int(now - node.start_time))
    step = 1 if age < 60 else 60
    until = node.start_time + (age // step + 1) * step
    return (f"{age // 60}m ago" if 60 <= age < 3600 else ago(age)), until


class NodeTable(KeyedTable):
    """Nodes keyed by node id, in the snapshot's order (head first, then by start); dead nodes stay."""

    DEFAULT_CSS = """
    NodeTable { height: 1fr; }
    NodeTable.stale { opacity: 60%; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:  # noqa: A002
        super().__init__(COLUMNS, id=id, classes=classes)
        self._built_from: dict[str, tuple[NodeSnapshot, float | None, NodeMemory | None, str, float]] = {}
        """Per node id: what its row shows was built from (the node, seconds silent, its memory, the
        joined text, and when that text next changes)."""

    def show(
        self,
        nodes: tuple[NodeSnapshot, ...],
        silent: Mapping[str, float] | None = None,
        now: float | None = None,
        memory: Mapping[str, NodeMemory] | None = None,
    ) -> None:
        """Show NODES in their order; SILENT: seconds each silent node has sent nothing new (by node id);
        NOW: the time the ages are counted to (posix seconds; the clock's by default); MEMORY: each node's
        memory against Ray's kill threshold (by node id)."""
        now = time.time() if now is None else now
        silent = silent or {}
        memory = memory or {}
        before, built_from = self._built_from, {}
        rows: list[tuple[str, Mapping[str, Text] | None]] = []
        for node in nodes:
            key, silent_for = node.node_id, silent.get(node.node_id)
            mem = memory.get(key)
            last, shown = before.get(key), self.shown_cells(key)
            if last is None or shown is None or last[:3] != (node, silent_for, mem):  # `is`, else `==`
                age, until = joined_until(node, now)
                rows.append((key, node_cells(node, now, silent_for, mem)))
            elif now < last[4]:  # its age's text cannot have changed yet
                age, until = last[3], last[4]
                rows.append((key, None))  # unchanged: neither built nor compared
            else:
                age, until = joined_until(node, now)
                rows.append((key, {**shown, "joined": Text(age)} if age != last[3] else None))
            built_from[key] = (node, silent_for, mem, age, until)
        self.show_rows(rows)
        self._built_from = built_from

    def select(self, key: str, focus: bool = True) -> bool:
        """Put the cursor on node KEY's row and focus the table; False if it is not listed."""
        return super().select(key, focus)
