"""The keyed table (`cockpit.ui.widgets.keyed_table`) in a Pilot app: a refresh writes only the cells that
changed (counted at `write_cells` and `update_cell`, and the table's own row and cell objects compared),
renders them alone again and draws exactly what a table rendered from scratch draws, a change of style
alone is redrawn, rows come, go and move by key with the cursor kept on its row, a row given as None stays
as shown, and hostile text shows as text. On the Jobs screen (fixture state): a new job at the top leaves
the cursor on the job it was on, so `s` stops the job the user chose."""

from __future__ import annotations

import io
import random
import time
from collections.abc import Mapping
from dataclasses import replace

import pytest
from rich.console import Console
from rich.text import Text, TextType
from textual.app import App, ComposeResult
from textual.widgets.data_table import ColumnKey, RowKey

from cockpit.ui.app import CockpitApp
from cockpit.ui.screens.jobs import JobsScreen
from cockpit.ui.state import StateChanged
from cockpit.ui.widgets.keyed_table import Cell, KeyedTable
from tests.ui.test_fixture_state import fixture_state

COLUMNS = (("name", "Name"), ("state", "State"), ("age", "Age"))
Rows = list[tuple[str, Mapping[str, Cell]]]


def name_of(key: RowKey | ColumnKey | str) -> str:
    return key if isinstance(key, str) else str(key.value)


class CountingTable(KeyedTable):
    """Counts what a refresh writes."""

    def __init__(self) -> None:
        super().__init__(COLUMNS, id="table")
        self.updates: list[tuple[str, str]] = []
        self.added: list[str] = []
        self.removed: list[str] = []

    def update_cell(
        self, row_key: RowKey | str, column_key: ColumnKey | str, value: Text, *, update_width: bool = False
    ) -> None:
        self.updates.append((name_of(row_key), name_of(column_key)))
        super().update_cell(row_key, column_key, value, update_width=update_width)

    def write_cells(self, cells: Mapping[tuple[str, str], Text]) -> None:
        self.updates.extend(cells)
        super().write_cells(cells)

    def add_row(
        self, *cells: Text, height: int | None = 1, key: str | None = None, label: TextType | None = None
    ) -> RowKey:
        self.added.append(str(key))
        return super().add_row(*cells, height=height, key=key, label=label)

    def remove_row(self, row_key: RowKey | str) -> None:
        self.removed.append(name_of(row_key))
        super().remove_row(row_key)

    def forget(self) -> None:
        self.updates.clear()
        self.added.clear()
        self.removed.clear()


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield CountingTable()


def rows(*names: str, age: str = "1s") -> Rows:
    return [(name, {"name": Text(name, style="bold"), "state": "ALIVE", "age": age}) for name in names]


def shown(table: KeyedTable) -> list[str]:
    """The names as drawn, top to bottom."""
    return [str(table.get_row_at(index)[0]) for index in range(table.row_count)]


def screen_text(app: App[None]) -> str:
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), record=True, force_terminal=True)
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text(styles=False)


async def test_a_refresh_writes_only_the_cells_that_changed() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 12)) as pilot:
        table = app.query_one(CountingTable)
        table.show_rows(rows("a", "b", "c"))
        await pilot.pause()
        assert table.added == ["a", "b", "c"] and shown(table) == ["a", "b", "c"]
        row_objects = {key: table.rows[RowKey(key)] for key in "abc"}
        cells = {key: table.get_row(key) for key in "abc"}
        table.forget()

        table.show_rows(rows("a", "b", "c"))  # the same again: nothing written
        assert (table.updates, table.added, table.removed) == ([], [], [])

        changed = rows("a", "b", "c")
        changed[1] = ("b", {**changed[1][1], "age": "2s"})
        table.show_rows(changed)
        await pilot.pause()
        assert table.updates == [("b", "age")] and (table.added, table.removed) == ([], [])
        assert str(table.get_cell("b", "age")) == "2s"
        for key in "abc":  # the same rows, and every other cell the very object first written
            assert table.rows[RowKey(key)] is row_objects[key]
            for column, (old, new) in enumerate(zip(cells[key], table.get_row(key), strict=True)):
                assert (new is old) != (key == "b" and column == 2)


def table_text(table: KeyedTable) -> str:
    """The table's lines as the screen draws them."""
    lines = screen_text(table.app).splitlines()
    region = table.region
    return "\n".join(line[region.x : region.right] for line in lines[region.y : region.bottom])


async def test_a_written_cell_is_rendered_alone_and_drawn() -> None:
    """A cell written in place renders that cell again, not the header or the other rows' cells."""
    app = TableApp()
    async with app.run_test(size=(60, 12)) as pilot:
        table = app.query_one(CountingTable)
        table.show_rows(rows("a", "b", "c"))
        await pilot.pause()
        assert "1s" in table_text(table)
        count, rendered = table._update_count, dict.fromkeys(table._cell_render_cache.keys())
        table.show_rows([*rows("a"), *rows("b", age="2s"), *rows("c")])
        await pilot.pause()
        text = table_text(table).splitlines()
        assert [line.split() for line in text[1:4]] == [
            ["a", "ALIVE", "1s"],
            ["b", "ALIVE", "2s"],
            ["c", "ALIVE", "1s"],
        ]
        assert table._update_count == count  # no cache of the table's was dropped whole
        kept = {key for key in rendered if key in table._cell_render_cache}
        assert {(str(k[0].value), str(k[1].value)) for k in set(rendered) - kept} == {("b", "age")}


async def test_cells_written_in_place_draw_what_a_table_rendered_from_scratch_draws() -> None:
    """The oracle for the caches `write_cells` drops: after each of many random refreshes (cells changed,
    rows come, go and move, the cursor and the scroll moved, a cell wider than its column), the table as
    drawn is the table drawn again with every cache dropped."""
    chooser = random.Random(28)
    app = TableApp()
    async with app.run_test(size=(50, 10)) as pilot:
        table = app.query_one(CountingTable)
        names = [f"n{index:02d}" for index in range(20)]
        in_place = 0  # steps whose writes all went in place (the path under test), no cache dropped whole
        for step in range(60):
            count, written = table._update_count, len(table.updates)
            keys = chooser.sample(names, chooser.randint(5, 20)) if step % 10 == 9 else names[:12]
            table.show_rows(
                (
                    key,
                    {
                        "name": key,
                        "state": chooser.choice(["ALIVE", "DEAD", "ALIVE"]),
                        "age": f"{chooser.randint(1, 30 if step < 50 else 300)}s",
                    },
                )
                for key in keys
            )
            in_place += table._update_count == count and len(table.updates) > written
            if step % 7 == 3:
                table.move_cursor(row=chooser.randrange(table.row_count), animate=False)
            if step % 5 == 1:
                table.scroll_to(y=chooser.randint(0, 6), animate=False)
            await pilot.pause()
            drawn = table_text(table)
            table._update_count += 1  # every render cache's key: all of them dropped
            table.refresh()
            await pilot.pause()
            assert drawn == table_text(table), f"step {step}"
        assert in_place >= 30, in_place


async def test_a_change_of_style_alone_is_redrawn() -> None:
    """`Text.__eq__` ignores the base style: a cell that only turned red must still be written."""
    app = TableApp()
    async with app.run_test(size=(60, 12)) as pilot:
        table = app.query_one(CountingTable)
        table.show_rows([("a", {"name": "a", "state": Text("ALIVE", style="green")})])
        table.forget()
        table.show_rows([("a", {"name": "a", "state": Text("ALIVE", style="bold red")})])
        await pilot.pause()
        assert table.updates == [("a", "state")]
        assert table.get_cell("a", "state").style == "bold red"


async def test_the_cursor_stays_on_its_row_when_rows_move_come_and_go() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 12)) as pilot:
        table = app.query_one(CountingTable)
        table.show_rows(rows("a", "b", "c", "d"))
        await pilot.pause()
        assert table.select("c") and table.current_key() == "c" and table.cursor_row == 2
        table.forget()

        table.show_rows(rows("e", "d", "c", "a"))  # b gone, e new at the top, the rest reversed
        await pilot.pause()
        assert shown(table) == ["e", "d", "c", "a"] and table.keys == ("e", "d", "c", "a")
        assert table.current_key() == "c" and table.cursor_row == 2
        assert table.added == ["e"] and table.removed == ["b"] and table.updates == []
        lines = [line for line in screen_text(app).splitlines() if line.strip()]
        assert [line.split()[0] for line in lines[1:5]] == ["e", "d", "c", "a"]  # drawn in that order

        table.show_rows(rows("c", "a"))  # the rows above it gone
        await pilot.pause()
        assert table.current_key() == "c" and table.cursor_row == 0

        table.show_rows(rows("a", "f"))  # its own row gone: the cursor stays in the table
        await pilot.pause()
        assert table.current_key() in ("a", "f")

        table.show_rows([])
        await pilot.pause()
        assert table.current_key() is None and table.row_count == 0
        assert not table.select("a")


async def test_hostile_text_shows_as_text() -> None:
    app = TableApp()
    async with app.run_test(size=(80, 12)) as pilot:
        table = app.query_one(CountingTable)
        hostile = {
            "[/]": {"name": "[/]", "state": "[bold red]x[/]"},
            "esc": {"name": "\x1b[31mred\x1b[0m", "state": "a\x00b\x07c\nd"},
        }
        table.show_rows(hostile.items())  # would raise MarkupError if "[/]" were read as markup
        await pilot.pause()
        assert all(isinstance(cell, Text) for key in hostile for cell in table.get_row(key))
        assert str(table.get_cell("[/]", "name")) == "[/]"
        assert str(table.get_cell("[/]", "state")) == "[bold red]x[/]"
        assert str(table.get_cell("esc", "name")) == "red"  # the escape gone, not a colour
        assert str(table.get_cell("esc", "state")) == "a\ufffdb\ufffdc d"
        text = screen_text(app)
        assert "[/]" in text and "[bold red]x[/]" in text and "\x1b" not in text


async def test_a_row_given_as_none_stays_as_shown_and_keeps_its_place() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 12)) as pilot:
        table = app.query_one(CountingTable)
        table.show_rows(rows("a", "b", "c"))
        await pilot.pause()
        cells = table.get_row("b")
        table.forget()
        table.show_rows([("c", None), ("b", None), rows("a", age="2s")[0]])  # moved; a's age changed
        await pilot.pause()
        assert shown(table) == ["c", "b", "a"] and table.keys == ("c", "b", "a")
        assert table.updates == [("a", "age")] and (table.added, table.removed) == ([], [])
        assert all(new is old for new, old in zip(table.get_row("b"), cells, strict=True))
        assert table.shown_cells("b") is not None and table.shown_cells("d") is None
        with pytest.raises(ValueError, match="not shown"):
            table.show_rows([("d", None)])


async def test_a_key_given_twice_or_an_unknown_column_is_a_bug() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 12)):
        table = app.query_one(CountingTable)
        with pytest.raises(ValueError, match="given twice"):
            table.show_rows(rows("a", "a"))
        with pytest.raises(ValueError, match="no column"):
            table.show_rows([("a", {"nmae": "a"})])
        assert table.row_count == 0


async def test_a_new_job_leaves_the_jobs_screen_cursor_on_its_job() -> None:
    state = fixture_state()
    snapshot = state.snapshot
    assert snapshot is not None
    app = CockpitApp(state.target, state=state, offline=True)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.press("4")
        screen = app.screen
        assert isinstance(screen, JobsScreen)
        table = screen.query_one("#jobs-table", KeyedTable)
        await pilot.press("down")
        chosen = screen.current_job()
        assert chosen is not None and table.cursor_row == 1
        newest = replace(snapshot.jobs[0], submission_id="cockpit-test-new", start_time=time.time())
        state.snapshot = replace(snapshot, jobs=(newest, *snapshot.jobs))
        app.post_message(StateChanged("snapshot"))
        await pilot.pause()
        assert table.keys == ("cockpit-test-new", *(job.key for job in snapshot.jobs))
        assert screen.current_job() == chosen and table.cursor_row == 2
