"""The log line renderer takes any string a process printed and gives text with no control character left.

Log lines are hostile input: escapes without colours (erase line, cursor up), OSC titles, carriage
returns, C1 controls, partial sequences and lone surrogates all reach `line_text` as they were printed.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.console import Console

from cockpit.core.logs.buffer import LineBuffer
from cockpit.ui.widgets.log_rows import LogRows
from cockpit.ui.widgets.log_text import display_plain, display_width, line_text
from tests.harness.hostile import controls, hostile_text
from tests.harness.properties import examples


def rendered(text: str) -> str:
    console = Console(width=400, color_system="truecolor")
    return "".join(segment.text for segment in console.render(line_text(text), console.options))


@pytest.mark.parametrize(
    "raw",
    [
        "\x1b[K",
        "progress 40%\x1b[K",
        "\x1b[A\x1b[A 3/10 [00:01<00:02]",
        "10%|█         |\r20%|██        |",
        "\x1b]0;my title\x07after the title",
        "\x1b[",
        "text \x1b",
        "\x1b[31",
        "\x1b]0;unterminated title",
        "\x9b31m C1 CSI",
        "a\x85b\x90c\x9fd",
        "lone \ud800 surrogate",
        "\x1b[31mred\x1b[K and \x1b]0;t\x07 more",
        "\x1b[31m中文\x1b[0m\ttab after wide characters",
        "\x1b[K\n\tnewline before a tab",
    ],
)
def test_escapes_without_colours_and_controls_render_as_text(raw: str) -> None:
    for colours in (True, False):
        text = line_text(raw, colours)
        assert controls(text.plain) == []
        assert text.plain == display_plain(raw)
    assert controls(rendered(raw)) == []


def test_a_very_long_line_of_escapes_renders() -> None:
    raw = "\x1b[31mx\x1b[K\x9b" * 50_000
    text = line_text(raw)
    assert controls(text.plain) == []
    assert display_width(raw) == cell_len(text.plain)


@settings(max_examples=examples(300), deadline=None)
@given(hostile_text)
def test_any_line_renders_without_control_characters(raw: str) -> None:
    for colours in (True, False):
        text = line_text(raw, colours)
        assert controls(text.plain) == []
        # The plain text and its width agree with what wrapping measured, so rows line up.
        assert text.plain == display_plain(raw)
    assert display_width(raw) == cell_len(display_plain(raw))
    assert controls(rendered(raw)) == []


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["driver", "w[/0]", "evil\x1b]0;t\x07"]), hostile_text), max_size=12),
    st.integers(min_value=1, max_value=120),
)
def test_log_rows_measure_any_line_as_it_renders(chunks: list[tuple[str, str]], columns: int) -> None:
    buffer = LineBuffer(max_lines=16)
    rows = LogRows(buffer)
    for source, chunk in chunks:
        start = buffer.end_number
        buffer.feed(source, chunk)
        rows.lines_added(start)
    for source in {source for source, _chunk in chunks}:
        start = buffer.end_number
        buffer.flush(source)
        rows.lines_added(start)
    rows.wrap_to(columns)
    widths = [cell_len(line_text(line.text).plain) for line in buffer.lines()]
    assert rows.height == sum(max(1, -(-width // columns)) for width in widths)
    assert all(controls(line_text(line.text).plain) == [] for line in buffer.lines())
