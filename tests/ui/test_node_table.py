"""The node table (`cockpit.ui.widgets.node_table`) in a Pilot app, poll after poll: a row is built again
only when its node, its silence or its "joined" age changed (counted at `node_cells` and `update_cell`),
an age that moved rewrites that one cell, and after every poll each row shows exactly what building it
afresh would (rows in the snapshot's order, dead nodes kept, "not answering", hostile text as text)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest
from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets.data_table import ColumnKey, RowKey

from cockpit.core.snapshots import NodeSnapshot
from cockpit.ui.widgets import node_table
from cockpit.ui.widgets.keyed_table import same_cell
from cockpit.ui.widgets.node_table import COLUMNS, NodeTable
from tests.harness.synthetic import T0, synthetic_nodes

NODES = 40


class CountingNodeTable(NodeTable):
    """Counts the cells a poll writes."""

    def __init__(self) -> None:
        super().__init__(id="nodes")
        self.updates: list[tuple[str, str]] = []

    def update_cell(
        self, row_key: RowKey | str, column_key: ColumnKey | str, value: Text, *, update_width: bool = False
    ) -> None:
        row = row_key if isinstance(row_key, str) else str(row_key.value)
        column = column_key if isinstance(column_key, str) else str(column_key.value)
        self.updates.append((row, column))
        super().update_cell(row_key, column_key, value, update_width=update_width)

    def write_cells(self, cells: Mapping[tuple[str, str], Text]) -> None:
        self.updates.extend(cells)
        super().write_cells(cells)


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield CountingNodeTable()


def shows_afresh(
    table: NodeTable, nodes: tuple[NodeSnapshot, ...], now: float, silent: Mapping[str, float]
) -> None:
    """Each row is drawn as `node_cells` would build it now, in the snapshot's order."""
    assert table.keys == tuple(node.node_id for node in nodes)
    assert [str(table.get_row_at(index)[0]) for index in range(table.row_count)] == [
        table.get_cell(node.node_id, "node").plain for node in nodes
    ]
    for node in nodes:
        expected = BUILD(node, now, silent.get(node.node_id))
        for column, _label in COLUMNS:
            cell = table.get_cell(node.node_id, column)
            assert same_cell(cell, expected[column]), (node.node_id, column, cell, expected[column])


BUILD = node_table.node_cells


async def test_a_poll_builds_only_the_rows_that_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []

    def counted(
        node: NodeSnapshot, now: float, silent_for: float | None = None, memory: Any = None
    ) -> dict[str, Text]:
        built.append(node.node_id)
        return BUILD(node, now, silent_for, memory)

    monkeypatch.setattr(node_table, "node_cells", counted)
    # Joined hours ago (ages in minutes), one dead.
    nodes = [replace(node, start_time=T0 - 7200 - 60 * n) for n, node in enumerate(synthetic_nodes(NODES, 2))]
    nodes[5] = replace(nodes[5], start_time=T0 - 30)  # joined 30 s ago: its age moves every second
    dead = next(node for node in nodes if not node.alive)
    keys = [node.node_id for node in nodes]
    app = TableApp()
    async with app.run_test(size=(160, 30)) as pilot:
        table = app.query_one(CountingNodeTable)

        def poll(nodes: tuple[NodeSnapshot, ...], now: float, silent: Mapping[str, float] = {}) -> None:
            built.clear()
            table.updates.clear()
            table.show(nodes, silent, now=now)
            shows_afresh(table, nodes, now, silent)

        first = tuple(nodes)
        poll(first, T0)
        assert len(built) == NODES

        poll(first, T0)  # the same poll again: nothing built, nothing written
        assert (built, table.updates) == ([], [])
        poll(tuple(replace(node) for node in first), T0)  # equal nodes, new objects (a new answer)
        assert (built, table.updates) == ([], [])

        nodes[3] = replace(nodes[3], cpu_percent=99.0)  # one node's reading moved
        poll(tuple(nodes), T0)
        assert built == [keys[3]] and table.updates == [(keys[3], "cpu")]

        poll(tuple(nodes), T0 + 1)  # a second later: only the young node's age moved
        assert built == [] and table.updates == [(keys[5], "joined")]
        assert table.get_cell(keys[5], "joined").plain == "31s ago"

        silent = {keys[7]: 25.0}
        poll(tuple(nodes), T0 + 1, silent)  # one node stopped answering
        assert built == [keys[7]] and table.updates == [(keys[7], "state")]
        assert table.get_cell(keys[7], "state").plain == "not answering (25s)"
        silent = {keys[7]: 30.0}
        poll(tuple(nodes), T0 + 1, silent)
        assert built == [keys[7]] and table.get_cell(keys[7], "state").plain == "not answering (30s)"

        moved = (nodes[0], *reversed(nodes[1:]))  # the order is the snapshot's, rows unchanged
        poll(moved, T0 + 1, silent)
        assert built == [] and table.updates == [] and table.keys == tuple(node.node_id for node in moved)
        assert table.get_cell(dead.node_id, "state").plain == "DEAD"  # dead nodes stay listed

        hostile = replace(nodes[9], node_id="[/]new", hostname="[bold red]x[/]", state_message="\x1b[31m")
        later = (*nodes[:9], hostile, *nodes[10:])  # one node left, one joined with hostile names
        poll(later, T0 + 1, silent)
        await pilot.pause()
        assert built == ["[/]new"] and table.updates == []
        assert table.get_cell("[/]new", "host").plain == "[bold red]x[/]"
        assert keys[9] not in table.keys and dead.node_id in table.keys


def test_the_joined_age_is_in_seconds_then_minutes_then_hours() -> None:
    node = synthetic_nodes(1, 2)[0]
    ages = {
        age: node_table.joined(replace(node, start_time=T0 - age), T0) for age in (0, 59, 60, 185, 3599, 7385)
    }
    assert ages == {
        0: "0s ago",
        59: "59s ago",
        60: "1m ago",
        185: "3m ago",
        3599: "59m ago",
        7385: "2h03m ago",
    }
    assert node_table.joined(replace(node, start_time=0), T0) == "?"


def test_an_age_is_worked_out_again_only_when_its_text_can_have_changed() -> None:
    node = replace(synthetic_nodes(1, 2)[0], start_time=T0 - 7230)  # 2h00m30s: "2h00m ago" until T0 + 30
    assert node_table.joined_until(node, T0) == ("2h00m ago", T0 + 30)
    young = replace(node, start_time=T0 - 30.5)
    assert node_table.joined_until(young, T0) == ("30s ago", T0 + 0.5)
    assert node_table.joined_until(replace(node, start_time=0), T0) == ("?", float("inf"))
