"""Pilot tests of the log pane on its own: a tiny app holding one LogView, no Ray cluster."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from rich.console import Console
from rich.text import Text
from textual.app import App, ComposeResult
from textual.message import Message
from textual.pilot import Pilot

from cockpit.ui.widgets.log_text import display_plain, display_width, line_text
from cockpit.ui.widgets.log_view import CONTEXT_ROWS, LogView
from tests.harness.hostile import controls

SIZE = (100, 30)
TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/app/rollout.py", line 40, in step',
    "    out = model(batch)",
    "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB",
]


class LogApp(App[None]):
    def __init__(self, max_lines: int = 200_000) -> None:
        super().__init__()
        self.max_lines = max_lines
        self.messages: list[Message] = []

    def compose(self) -> ComposeResult:
        yield LogView(max_lines=self.max_lines, id="log")

    def on_log_view_follow_changed(self, message: LogView.FollowChanged) -> None:
        self.messages.append(message)

    def on_log_view_first_error(self, message: LogView.FirstError) -> None:
        self.messages.append(message)


def numbered(count: int, start: int = 0, word: str = "line") -> str:
    return "".join(f"{word} {i}\n" for i in range(start, start + count))


def screen_text(view: LogView) -> list[str]:
    return [view.render_line(y).text.rstrip() for y in range(view.scrollable_content_region.height)]


async def started(pilot: Pilot[None]) -> LogView:
    view = pilot.app.query_one(LogView)
    view.focus()
    await pilot.pause()
    return view


async def test_chunks_cut_anywhere_show_as_lines() -> None:
    app = LogApp()
    async with app.run_test(size=SIZE) as pilot:
        view = await started(pilot)
        data = "first line\nsecond ünï\ncödé line\nthird".encode()
        for i in range(0, len(data), 3):
            view.append("driver", data[i : i + 3])
        await pilot.pause()
        assert screen_text(view)[:4] == ["first line", "second ünï", "cödé line", ""]
        view.flush("driver")
        await pilot.pause()
        assert screen_text(view)[3] == "third"
        assert view.virtual_size.height == 4


async def test_follow_keeps_the_last_line_visible_and_scrolling_up_pauses_it() -> None:
    app = LogApp()
    async with app.run_test(size=SIZE) as pilot:
        view = await started(pilot)
        view.append("driver", numbered(100))
        await pilot.pause()
        assert view.follow
        assert screen_text(view)[-1] == "line 99"
        view.append("driver", numbered(50, start=100))
        await pilot.pause()
        assert screen_text(view)[-1] == "line 149"

        await pilot.press("pageup")
        await pilot.pause()
        assert not view.follow
        assert [type(m) for m in app.messages] == [LogView.FollowChanged]
        top = screen_text(view)[0]
        view.append("driver", numbered(50, start=150))
        await pilot.pause()
        assert screen_text(view)[0] == top  # paused: new lines do not move the view

        await pilot.press("f")
        await pilot.pause()
        assert view.follow
        assert screen_text(view)[-1] == "line 199"
        assert [m.follow for m in app.messages if isinstance(m, LogView.FollowChanged)] == [False, True]


async def test_scrolling_back_to_the_end_resumes_follow() -> None:
    app = LogApp()
    async with app.run_test(size=SIZE) as pilot:
        view = await started(pilot)
        view.append("driver", numbered(100))
        await pilot.pause()
        await pilot.press("up")
        await pilot.pause()
        assert not view.follow
        await pilot.press("end")
        await pilot.pause()
        assert view.follow


async def test_filter_shows_matching_lines_and_keeps_up_with_new_ones() -> None:
    app = LogApp()
    async with app.run_test(size=SIZE) as pilot:
        view = await started(pilot)
        view.append(
            "driver", "".join(f"step {i} {'reward' if i % 10 == 0 else 'loss'}={i}\n" for i in range(100))
        )
        await pilot.pause()
        assert view.set_filter("REWARD") == 10
        await pilot.pause()
        shown = [row for row in screen_text(view) if row]
        assert shown == [f"step {i} reward={i}" for i in range(0, 100, 10)]
        view.append("driver", "step 100 loss=1\nstep 101 reward=2\n")
        await pilot.pause()
        assert view.line_count == 11
        assert [row for row in screen_text(view) if row][-1] == "step 101 reward=2"
        with pytest.raises(re.error):
            view.set_filter("(unclosed")
        assert view.filter_pattern == "REWARD"  # a bad pattern leaves the filter as it was
        view.set_filter(None)
        await pilot.pause()
        assert view.line_count == 102


async def test_search_then_n_and_shift_n_move_between_matches() -> None:
    app = LogApp()
    async with app.run_test(size=SIZE) as pilot:
        view = await started(pilot)
        view.append(
            "driver", "".join(f"{'needle' if i in (10, 50, 90) else 'hay'} {i}\n" for i in range(120))
        )
        await pilot.pause()
        found = view.search("NEEDLE")
        await pilot.pause()
        assert found is not None and found.text == "needle 90"  # following: the newest match
        assert not view.follow
        assert "needle 90" in screen_text(view)
        await pilot.press("n")
        await pilot.pause()
        assert view.cursor is not None and view.cursor.text == "needle 10"  # wrapped around
        assert "needle 10" in screen_text(view)
        await pilot.press("n")
        await pilot.pause()
        assert view.cursor is not None and view.cursor.text == "needle 50"
        assert "needle 50" in screen_text(view)
        await pilot.press("N")
        await pilot.pause()
        assert view.cursor is not None and view.cursor.text == "needle 10"
        await pilot.press("shift+n")
        await pilot.pause()
        assert view.cursor is not None and view.cursor.text == "needle 90"

        row = screen_text(view).index("needle 90")
        highlighted = [seg for seg in view.render_line(row) if seg.text == "needle"]
        plain = [seg for seg in view.render_line(row) if seg.text.startswith(" 90")]
        assert highlighted and plain and highlighted[0].style != plain[0].style
        assert view.search_term == "NEEDLE"
        assert view.search("") is None and view.search_term == ""


async def test_e_jumps_to_the_first_line_of_the_next_traceback() -> None:
    app = LogApp()
    async with app.run_test(size=SIZE) as pilot:
        view = await started(pilot)
        text = numbered(40) + "\n".join(TRACEBACK) + "\n" + numbered(40, 40) + "\n".join(TRACEBACK) + "\n"
        view.append("driver", text + numbered(40, 80))
        await pilot.pause()
        await pilot.press("home")
        await pilot.pause()
        assert not view.follow
        await pilot.press("e")
        await pilot.pause()
        rows = screen_text(view)
        assert rows[CONTEXT_ROWS] == TRACEBACK[0]
        assert rows[CONTEXT_ROWS - 1] == "line 39"
        assert view.cursor is not None and view.cursor.number == 40
        await pilot.press("e")  # past the frames and the RuntimeError line: the next block
        await pilot.pause()
        assert view.cursor is not None and view.cursor.number == 40 + len(TRACEBACK) + 40
        assert screen_text(view)[CONTEXT_ROWS] == TRACEBACK[0]
        await pilot.press("E")
        await pilot.pause()
        assert view.cursor is not None and view.cursor.number == 40
        assert view.first_error_index() == 40


async def test_errors_warnings_and_tracebacks_are_styled() -> None:
    app = LogApp()
    async with app.run_test(size=SIZE) as pilot:
        view = await started(pilot)
        view.append("driver", "plain\nWARNING slow\n" + "\n".join(TRACEBACK) + "\n")
        await pilot.pause()
        styles = [next(iter(view.render_line(y))).style for y in range(6)]
        assert styles[0] is not None and all(s is not None for s in styles)
        plain, warning, tb_start, frame = styles[0], styles[1], styles[2], styles[3]
        assert warning.color != plain.color
        assert tb_start.color != plain.color and tb_start.color != warning.color  # the error colour
        assert frame.bgcolor != plain.bgcolor  # the traceback background
        assert frame.color == plain.color


async def test_wrap_toggle_changes_the_virtual_height() -> None:
    app = LogApp()
    async with app.run_test(size=SIZE) as pilot:
        view = await started(pilot)
        view.append("driver", "x" * 250 + "\nshort\n")
        await pilot.pause()
        assert view.virtual_size.height == 2
        assert view.virtual_size.width == 250
        columns = view.scrollable_content_region.width
        await pilot.press("w")
        await pilot.pause()
        assert view.wrap
        assert view.virtual_size.height == math.ceil(250 / columns) + 1
        assert screen_text(view)[: math.ceil(250 / columns) + 1][-1] == "short"
        view.append("driver", "y" * (columns + 1) + "\n")
        await pilot.pause()
        assert view.virtual_size.height == math.ceil(250 / columns) + 1 + 2
        await pilot.press("w")
        await pilot.pause()
        assert view.virtual_size.height == 3


async def test_wrap_index_survives_eviction_and_filtering() -> None:
    app = LogApp(max_lines=50)
    async with app.run_test(size=SIZE) as pilot:
        view = await started(pilot)
        await pilot.press("w")
        for i in range(30):
            view.append("driver", "".join(f"{i}.{j} " + "z" * (i * 7 + j * 13) + "\n" for j in range(5)))
        await pilot.pause()
        incremental = view.virtual_size.height
        view.wrap = False
        view.wrap = True  # rebuilt from scratch
        await pilot.pause()
        assert view.virtual_size.height == incremental
        view.set_filter(r"^\d+\.[03] ")
        for i in range(30, 40):
            view.append("driver", "".join(f"{i}.{j} " + "z" * (i * 11 + j) + "\n" for j in range(5)))
        await pilot.pause()
        incremental = view.virtual_size.height
        assert view.line_count == 20
        view.wrap = False
        view.wrap = True
        await pilot.pause()
        assert view.virtual_size.height == incremental
        assert screen_text(view)[-1].endswith("z")


async def test_first_error_is_posted_once() -> None:
    app = LogApp()
    async with app.run_test(size=SIZE) as pilot:
        view = await started(pilot)
        view.append("driver", numbered(5))
        view.append("driver", "\n".join(TRACEBACK) + "\n")
        view.append("driver", "ERROR again\n" + "\n".join(TRACEBACK) + "\n" + numbered(100))
        await pilot.pause()
        errors = [m for m in app.messages if isinstance(m, LogView.FirstError)]
        assert len(errors) == 1
        assert errors[0].index == 5 and errors[0].line.text == TRACEBACK[0]
        assert view.go_to(errors[0].index)
        await pilot.pause()
        assert screen_text(view)[CONTEXT_ROWS] == TRACEBACK[0]


async def test_sources_get_a_tag_column_and_ansi_can_be_stripped() -> None:
    app = LogApp()
    async with app.run_test(size=SIZE) as pilot:
        view = await started(pilot)
        view.append("driver", "\x1b[32mgreen\x1b[0m text\n")
        await pilot.pause()
        assert screen_text(view)[0] == "green text"
        green = next(iter(view.render_line(0))).style
        view.append("RolloutWorker_0", "worker line\n")
        await pilot.pause()
        assert screen_text(view)[:2] == [
            "[driver]          green text",
            "[RolloutWorker_0] worker line",
        ]
        await pilot.press("a")
        await pilot.pause()
        assert not view.show_ansi
        assert screen_text(view)[0] == "[driver]          green text"
        assert green is not None
        assert all(seg.style is None or seg.style.color != green.color for seg in view.render_line(0))


async def test_save_writes_the_filtered_lines(tmp_path: Path) -> None:
    app = LogApp()
    async with app.run_test(size=SIZE) as pilot:
        view = await started(pilot)
        view.append("driver", "keep \x1b[1mone\x1b[0m\ndrop\nkeep two\n")
        view.set_filter("keep")
        path = tmp_path / "filtered.log"
        assert view.save(path) == 2
        assert path.read_text() == "keep one\nkeep two\n"
        # Only its owner reads it (a log may hold a secret a script printed), and nothing is written over.
        assert path.stat().st_mode & 0o777 == 0o600
        view.set_filter(None)
        with pytest.raises(FileExistsError):
            view.save(path)
        assert path.read_text() == "keep one\nkeep two\n"
        assert view.save(tmp_path / "all.log") == 3


async def test_eviction_keeps_the_view_in_step() -> None:
    app = LogApp(max_lines=100)
    async with app.run_test(size=SIZE) as pilot:
        view = await started(pilot)
        view.set_filter("even")
        for batch in range(10):
            view.append(
                "driver",
                "".join(
                    f"{'even' if i % 2 == 0 else 'odd'} {i}\n" for i in range(batch * 50, batch * 50 + 50)
                ),
            )
        await pilot.pause()
        assert len(view.buffer) == 100 and view.dropped == 400
        assert view.line_count == 50
        assert screen_text(view)[-1] == "even 498"


@pytest.mark.parametrize(
    "raw",
    [
        "no escapes at all",
        "\x1b[36m(RolloutWorker pid=123)\x1b[0m step 1 reward=0.5",
        "\x1b[1m\x1b[31mbold red\x1b[0m plain \x1b[38;5;208morange\x1b[39m default",
        "\x1b[1;4;38;2;10;20;30mrgb underlined\x1b[0m after",
        "\x1b[31mtab\there\x1b[0m and\tafter",
        "\x1b[2Kcleared then \x1b[32mgreen to the end",
        "\x1b[33m中文 wide \x1b[0m🚀",
    ],
)
def test_line_text_reads_colours_as_rich_does(raw: str) -> None:
    console = Console()
    mine, theirs = line_text(raw), Text.from_ansi(raw)
    theirs.expand_tabs()
    assert mine.plain == theirs.plain == display_plain(raw)
    assert display_width(raw) == mine.cell_len
    for offset in range(len(mine.plain)):
        assert mine.get_style_at_offset(console, offset) == theirs.get_style_at_offset(console, offset)
    assert line_text(raw, colours=False).spans == []


async def test_search_and_errors_stay_within_the_filter() -> None:
    app = LogApp()
    async with app.run_test(size=SIZE) as pilot:
        view = await started(pilot)
        body = "".join(f"{'rollout' if i % 2 else 'trainer'} step {i}\n" for i in range(60))
        view.append("driver", body + "trainer ERROR lost rank 3\nrollout ERROR cuda error\n" + body)
        await pilot.press("f")
        view.set_filter("^rollout")
        await pilot.pause()
        found = view.search("step 1")
        assert found is not None and found.text.startswith("rollout step 1")
        await pilot.press("n")
        assert view.cursor is not None and view.cursor.text == "rollout step 11"
        await pilot.press("e")
        assert view.cursor is not None and view.cursor.text == "rollout ERROR cuda error"
        await pilot.press("e")  # the trainer's error is filtered out: back to the same one
        assert view.cursor is not None and view.cursor.text == "rollout ERROR cuda error"


HOSTILE_LINES = [
    "\x1b[K",
    "\x1b[A\x1b[A 3/10 [00:01<00:02]",
    "10%|█   |\r20%|██  |",
    "\x1b]0;owned\x07title changed",
    "half an escape \x1b[",
    "lone escape \x1b",
    "\x9b31m C1 CSI \x85 \x90",
    "surrogate \ud800 here",
    "[b]not bold[/b] [/0] [red]",
    "\x1b[31mred\x1b[K then \tTab and wide 中文🚀 " + "x" * 150,
]


async def test_hostile_lines_and_sources_render_as_text() -> None:
    app = LogApp()
    async with app.run_test(size=(120, 60)) as pilot:
        view = await started(pilot)
        for source in ("w[/0]", "evil\x1b]0;owned\x07\x9b2J", "driver"):
            view.append(source, "\n".join(HOSTILE_LINES) + "\n")
        view.append("driver", b"\xff\xfe bad bytes \xc2\x9b\n")
        view.follow = False
        for wrap, scroll_x in ((False, 0), (False, 7), (True, 0)):
            view.wrap = wrap
            view.scroll_to(x=scroll_x, y=0, animate=False)
            await pilot.pause()
            assert view.virtual_size.height <= view.scrollable_content_region.height  # every row on screen
            for y in range(view.virtual_size.height):
                text = view.render_line(y).text
                assert controls(text) == [], (wrap, scroll_x, y, text)
        assert screen_text(view)[0].startswith("[w[/0]]")
