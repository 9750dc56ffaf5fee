"""The log engine: chunking, eviction, traceback grouping, levels, search and error navigation."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cockpit.core.logs import column
from cockpit.core.logs.buffer import (
    MAX_LINE_CHARS,
    LineBuffer,
    LogLine,
    classify,
    strip_ansi,
    wrapped_order,
)

TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/app/train.py", line 12, in <module>',
    "    main()",
    '  File "/app/train.py", line 8, in main',
    "    step(batch)",
    "    ^^^^^^^^^^^",
    "ValueError: loss is nan",
]

SAMPLE = "\n".join(
    [
        "2026-11-26 01:02:03,456 INFO worker.py:1 -- Connecting to Ray at 10.0.0.1:6379 ✓",
        "\x1b[36m(RolloutWorker pid=123)\x1b[0m step 1 reward=0.51 κλ=0.01 中文 🚀",
        *TRACEBACK,
        "WARNING: gradient norm 1e4 exceeds clip",
        "tab\tseparated\r",
        "progress  10%\rprogress  50%\rprogress 100%",
        "",
        "last line without newline é",
    ]
)


def lines_of(buffer: LineBuffer) -> list[tuple[str, str, str, bool, bool]]:
    return [(ln.source, ln.text, ln.level, ln.in_traceback, ln.traceback_start) for ln in buffer]


def fed_whole(text: str) -> LineBuffer:
    buffer = LineBuffer()
    buffer.feed("driver", text.encode())
    buffer.flush("driver")
    return buffer


@pytest.mark.parametrize("seed", range(20))
def test_chunking_anywhere_gives_the_same_lines(seed: int) -> None:
    data = SAMPLE.encode()
    expected = lines_of(fed_whole(SAMPLE))
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(data)), rng.randint(1, 40)))
    buffer = LineBuffer()
    for start, end in zip([0, *cuts], [*cuts, len(data)], strict=True):
        buffer.feed("driver", data[start:end])
    buffer.flush("driver")
    assert lines_of(buffer) == expected


def test_byte_at_a_time_splits_every_multibyte_character() -> None:
    data = SAMPLE.encode()
    assert any(b >= 0x80 for b in data)
    buffer = LineBuffer()
    added = sum(buffer.feed("driver", data[i : i + 1]) for i in range(len(data)))
    buffer.flush("driver")
    assert lines_of(buffer) == lines_of(fed_whole(SAMPLE))
    assert added == len(buffer) - 1  # the last line came from flush
    assert "\ufffd" not in "".join(line.text for line in buffer)


def test_str_chunks_and_line_endings() -> None:
    buffer = LineBuffer()
    assert buffer.feed("driver", "a\r") == 0
    assert buffer.pending("driver") == "a\r"
    assert buffer.feed("driver", "\nb\n\nc") == 3
    assert [line.text for line in buffer] == ["a", "b", ""]
    assert buffer.pending("driver") == "c"
    assert buffer.flush("driver") == 1
    assert buffer.flush("driver") == 0
    assert buffer[-1].text == "c"


def test_carriage_returns_keep_what_a_terminal_shows() -> None:
    buffer = fed_whole("progress  10%\rprogress  50%\rprogress 100%\n")
    assert [line.text for line in buffer] == ["progress 100%"]


def test_invalid_and_truncated_utf8_become_replacement_characters() -> None:
    buffer = LineBuffer()
    buffer.feed("driver", b"bad \xff byte\n")
    buffer.feed("driver", "é".encode()[:1])  # stream ends in the middle of a character
    buffer.flush("driver")
    assert [line.text for line in buffer] == ["bad \ufffd byte", "\ufffd"]


def test_sources_keep_separate_remainders() -> None:
    buffer = LineBuffer()
    buffer.feed("driver", "dri")
    buffer.feed("RolloutWorker_0", "wor")
    buffer.feed("driver", "ver\n")
    buffer.feed("RolloutWorker_0", "ker\n")
    assert [(line.source, line.text) for line in buffer] == [
        ("driver", "driver"),
        ("RolloutWorker_0", "worker"),
    ]
    assert buffer.sources == ("driver", "RolloutWorker_0")


def test_a_runaway_line_is_cut() -> None:
    buffer = LineBuffer()
    chunk = "x" * (MAX_LINE_CHARS // 4)
    for _ in range(4):
        buffer.feed("driver", chunk)
    assert len(buffer) == 1 and len(buffer[0].text) == MAX_LINE_CHARS
    assert buffer.pending("driver") == ""


def test_ring_evicts_the_oldest_and_counts_them() -> None:
    buffer = LineBuffer(max_lines=5)
    versions = [buffer.version]
    for i in range(12):
        buffer.feed("driver", f"line {i}\n")
        versions.append(buffer.version)
    assert len(buffer) == 5
    assert buffer.dropped == 7
    assert buffer.first_number == 7
    assert buffer.end_number == 12
    assert [line.text for line in buffer] == [f"line {i}" for i in range(7, 12)]
    assert buffer[0].number == 7 and buffer[-1].number == 11
    assert [line.text for line in buffer.lines(3)] == ["line 10", "line 11"]
    assert buffer.by_number(6) is None and buffer.by_number(9) == buffer[2]
    assert versions == sorted(set(versions))  # bumped on every change
    with pytest.raises(IndexError):
        buffer[5]


def test_one_batch_bigger_than_the_ring() -> None:
    buffer = LineBuffer(max_lines=3)
    assert buffer.feed("driver", "".join(f"{i}\n" for i in range(10))) == 10
    assert [line.text for line in buffer] == ["7", "8", "9"]
    assert buffer.dropped == 7


def test_a_200k_ring_stays_at_200k() -> None:
    buffer = LineBuffer()
    block = "".join(f"2026-11-26 INFO step {i} loss=0.1234 reward=0.5678\n" for i in range(50_000))
    for _ in range(5):
        buffer.feed("driver", block)
    assert len(buffer) == 200_000
    assert buffer.dropped == 50_000
    assert buffer[0].number == 50_000
    assert buffer[-1].number == 249_999
    assert buffer[-1].text.startswith("2026-11-26 INFO step 49999 ")


_LINE = st.text(st.characters(exclude_characters="\n\r\x1b", exclude_categories=()), max_size=12)
"""A line as kept: any text but the newline, carriage return and escape the buffer takes apart; lone
surrogates included (a `str` fed in may carry them)."""


@settings(max_examples=150, deadline=None)
@given(
    cap=st.integers(1, 12),
    batches=st.lists(st.lists(_LINE, max_size=9), max_size=14),
    reads=st.lists(st.integers(-14, 14), min_size=1, max_size=6),
    seal=st.tuples(st.integers(1, 5), st.integers(1, 40)),
)
def test_the_ring_keeps_what_a_list_would(
    cap: int, batches: list[list[str]], reads: list[int], seal: tuple[int, int]
) -> None:
    """The texts, sealed in batches as they age, read back as the last CAP lines fed, by index, in order
    from any start, and after a clear (the seal sizes made small, so every path is taken)."""
    saved = column._SEAL_LINES, column._SEAL_CHARS
    column._SEAL_LINES, column._SEAL_CHARS = seal
    try:
        _ring_against_a_list(cap, batches, reads)
    finally:
        column._SEAL_LINES, column._SEAL_CHARS = saved


def _ring_against_a_list(cap: int, batches: list[list[str]], reads: list[int]) -> None:
    ring, fed = LineBuffer(max_lines=cap), []
    for batch in batches:
        ring.feed("driver", "".join(f"{line}\n" for line in batch))
        fed += batch
        kept = fed[-cap:]
        assert [ring.text(i) for i in range(len(ring))] == kept
        assert len(ring) == len(kept) and ring.first_number == len(fed) - len(kept)
        for start in reads:
            assert list(ring.texts(start)) == kept[max(0, start) :]
            assert [line.text for line in ring.lines(start)] == kept[max(0, start) :]
            if -len(kept) <= start < len(kept):
                assert ring[start].text == ring.text(start) == kept[start]
                assert ring.by_number(ring[start].number) == ring[start]
    ring.clear()
    ring.feed("driver", "after\n")
    assert list(ring.texts()) == ["after"] and ring[0].number == len(fed)


_SEARCHED_LINE = st.lists(
    st.sampled_from(["a", "B", "é", "\x1b", "[", "]", "0", "m", ";", "\x07", "\\", " "])
    | st.sampled_from(["\x1b[36m", "\x1b[0m", "\x1b]0;a m\x07", "\x1b]0;a m", "m\x07", "\x1b\\", "\x1bM"]),
    max_size=8,
).map("".join)
"""A line of the few characters that make matches frequent, and whole escapes (colours, an OSC closed or
left open for the next line to close, a two-byte one) among them, cut or stripped."""


@settings(max_examples=200, deadline=None)
@given(
    cap=st.integers(1, 12),
    batches=st.lists(st.lists(_SEARCHED_LINE, max_size=6), min_size=1, max_size=8),
    term=st.text(st.sampled_from(["a", "A", "b", "é", "0", "]", "m", "\\", " "]), min_size=1, max_size=2),
    ignore_case=st.booleans(),
    starts=st.lists(st.integers(-2, 14), min_size=1, max_size=4),
    seal=st.tuples(st.integers(1, 5), st.integers(1, 40)),
)
def test_a_plain_text_search_a_batch_at_a_time_finds_what_line_by_line_does(
    cap: int,
    batches: list[list[str]],
    term: str,
    ignore_case: bool,
    starts: list[int],
    seal: tuple[int, int],
) -> None:
    """`search` and `matching` with a plain-text pattern (looked for in a batch of lines at a time) give
    the indexes the line-by-line path gives for the same pattern in a group (which it cannot tell is
    plain text), from any start, both ways, sealed batches and escapes included."""
    saved = column._SEAL_LINES, column._SEAL_CHARS
    column._SEAL_LINES, column._SEAL_CHARS = seal
    try:
        ring = LineBuffer(max_lines=cap)
        for batch in batches:
            ring.feed("driver", "".join(f"{line}\n" for line in batch))
        flags = re.IGNORECASE if ignore_case else 0
        plain, grouped = re.compile(re.escape(term), flags), re.compile(f"(?:{re.escape(term)})", flags)
        assert column.literal_in_a_line(plain) == term and column.literal_in_a_line(grouped) is None
        for start in starts:
            assert ring.matching(plain, start) == ring.matching(grouped, start)
            for backwards in (False, True):
                assert ring.search(plain, start, backwards) == ring.search(grouped, start, backwards)
    finally:
        column._SEAL_LINES, column._SEAL_CHARS = saved


def test_only_plain_text_without_a_newline_is_searched_a_batch_at_a_time() -> None:
    """What a match in lines joined by newlines could not tell line by line is searched line by line."""
    literal = column.literal_in_a_line
    assert literal(re.compile(re.escape("loss=nan (step 3)"), re.IGNORECASE)) == "loss=nan (step 3)"
    assert literal(re.compile("error")) == "error"
    for pattern in (r"^error", r"a\sb", "a.b", "a\nb", re.escape("a\nb"), "", r"\d", "a|b"):
        assert literal(re.compile(pattern)) is None, pattern
    assert literal(re.compile(re.escape("a b"), re.VERBOSE)) is None


def test_reading_while_it_is_fed_gives_the_lines_there_at_the_first_read() -> None:
    """A reader part way through while lines are fed (and the open batch sealed meanwhile) gets, in
    order and whole, the lines there when it read its first one."""
    saved = column._SEAL_LINES
    column._SEAL_LINES = 4
    try:
        ring = LineBuffer(100)
        ring.feed("driver", "".join(f"L{i}\n" for i in range(6)))
        ring.feed("driver", "L6\nL7\n")
        texts, lines = ring.texts(), ring.lines()
        assert next(texts) == "L0" and next(lines).text == "L0"
        ring.feed("driver", "".join(f"L{i}\n" for i in range(8, 14)))
        want = [f"L{i}" for i in range(1, 8)]
        assert list(texts) == want and [line.text for line in lines] == want
    finally:
        column._SEAL_LINES = saved


def test_traceback_block_without_prefix() -> None:
    buffer = fed_whole("\n".join(["before", *TRACEBACK, "after"]) + "\n")
    flags = [(line.in_traceback, line.traceback_start) for line in buffer]
    assert flags[0] == (False, False)
    assert flags[1] == (True, True)
    assert all(f == (True, False) for f in flags[2 : 1 + len(TRACEBACK)])
    assert flags[-1] == (False, False)
    assert buffer[1].level == "error" and buffer[len(TRACEBACK)].level == "error"
    assert buffer[2].level == "normal"  # a frame line keeps its own level; the block styles it


def test_traceback_with_ray_prefix_interleaved_with_another_worker_and_source() -> None:
    buffer = LineBuffer()
    a, b = "(RolloutWorker pid=123) ", "\x1b[36m(RolloutWorker pid=456, ip=10.0.0.2)\x1b[0m "
    for i, frame in enumerate(TRACEBACK):
        buffer.feed("driver", a + frame + "\n")
        if i == 2:
            buffer.feed("driver", b + "step 7 reward=0.5\n")  # another worker's line in the middle
            buffer.feed("RolloutWorker_1", "  indented but another source\n")
    buffer.feed("driver", a + "step 8 after the traceback\n")
    by_text = {strip_ansi(line.text): line for line in buffer}
    for frame in TRACEBACK:
        assert by_text[a + frame].in_traceback, frame
    assert by_text[a + TRACEBACK[0]].traceback_start
    assert not by_text["(RolloutWorker pid=456, ip=10.0.0.2) step 7 reward=0.5"].in_traceback
    assert not by_text["  indented but another source"].in_traceback
    assert not by_text[a + "step 8 after the traceback"].in_traceback


def test_traceback_per_source() -> None:
    buffer = LineBuffer()
    buffer.feed("RolloutWorker_0", TRACEBACK[0] + "\n" + TRACEBACK[1] + "\n")
    buffer.feed("driver", "INFO unrelated\n")
    buffer.feed("RolloutWorker_0", "\n".join(TRACEBACK[2:]) + "\n")
    assert [line.in_traceback for line in buffer] == [True, True, False, *([True] * (len(TRACEBACK) - 2))]


def test_a_cut_traceback_does_not_swallow_the_next_message() -> None:
    buffer = fed_whole('Traceback (most recent call last):\n  File "x.py", line 1\nINFO 12:00 restarted\n')
    assert [line.in_traceback for line in buffer] == [True, True, False]


def test_chained_exceptions_are_two_blocks() -> None:
    text = "\n".join(
        [
            *TRACEBACK,
            "",
            "The above exception was the direct cause of the following exception:",
            "",
            *TRACEBACK,
        ]
    )
    buffer = fed_whole(text + "\n")
    assert buffer.error_indexes() == [0, len(TRACEBACK) + 3]


@pytest.mark.parametrize(
    ("text", "level"),
    [
        ("2026-11-26 01:02:03 ERROR trainer.py:12 -- step failed", "error"),
        ("[E] ValueError: bad shape", "error"),
        ("Exception in thread Thread-1:", "error"),
        ("nccl-node-3:123:456 [0] NCCL WARN Call to ibv_reg_mr failed", "error"),
        ("misc/socket.cc:50 NCCL error: unhandled system error", "error"),
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "error"),
        ("RuntimeError: CUDA out of memory.", "error"),
        ("Killed", "error"),
        ("(raylet) [2026-11-26] OOM: a worker was killed due to memory pressure", "error"),
        ("FATAL: cannot open shared memory", "error"),
        ("2026-11-26 WARNING worker.py:1 -- slow step", "warning"),
        ("W1126 [WARN] retrying", "warning"),
        ("/usr/lib/python3/site.py:1: UserWarning: deprecated", "warning"),
        ("step 12 errors=0 exceptions=0 killed_workers=0", "normal"),
        ("INFO reward=0.5 TERRORS", "normal"),
        ("", "normal"),
    ],
)
def test_levels(text: str, level: str) -> None:
    assert classify(text) == level
    assert fed_whole(text + "\n")[0].level == level


def test_levels_read_through_ansi_and_prefix() -> None:
    buffer = fed_whole("\x1b[36m(RolloutWorker pid=9)\x1b[0m \x1b[31mERROR\x1b[0m bad\n")
    assert buffer[0].level == "error"
    assert "\x1b[31m" in buffer[0].text  # kept as received
    assert buffer[0].plain == "(RolloutWorker pid=9) ERROR bad"


def test_strip_ansi() -> None:
    assert strip_ansi("\x1b[1;31mred\x1b[0m \x1b]0;title\x07plain\x1b[2K") == "red plain"
    assert strip_ansi("no escapes") == "no escapes"


def test_wrapped_order() -> None:
    assert list(wrapped_order(5, 2)) == [3, 4, 0, 1, 2]
    assert list(wrapped_order(5, 2, backwards=True)) == [1, 0, 4, 3, 2]
    assert list(wrapped_order(5, -1)) == [0, 1, 2, 3, 4]
    assert list(wrapped_order(5, 5, backwards=True)) == [4, 3, 2, 1, 0]
    assert list(wrapped_order(0, 0)) == []


@pytest.fixture
def mixed() -> LineBuffer:
    lines = [
        "INFO start",  # 0
        "INFO loss=0.5",  # 1
        *TRACEBACK,  # 2..8
        "INFO loss=0.4",  # 9
        "ERROR NCCL timeout",  # 10
        "INFO Loss=0.3",  # 11
        *TRACEBACK,  # 12..18
        "INFO done",  # 19
    ]
    return fed_whole("\n".join(lines) + "\n")


def test_find_forward_backward_and_wrapping(mixed: LineBuffer) -> None:
    assert mixed.find("loss=", -1) == 1
    assert mixed.find("loss=", 1) == 9
    assert mixed.find("loss=", 9) == 11  # ignores case by default
    assert mixed.find("loss=", 11) == 1  # wraps
    assert mixed.find("loss=", 9, ignore_case=False) == 1
    assert mixed.find("loss=", 9, backwards=True) == 1
    assert mixed.find("loss=", 1, backwards=True) == 11
    assert mixed.find(r"loss=0\.[34]", -1, regex=True) == 9
    assert mixed.find("loss=0.[34]", -1) is None  # literal unless regex
    assert mixed.find("nothing like this", 0) is None
    with pytest.raises(re.error):
        mixed.find("(", 0, regex=True)


def test_matching(mixed: LineBuffer) -> None:
    assert mixed.matching(re.compile("loss=", re.IGNORECASE)) == [1, 9, 11]
    assert mixed.matching(re.compile("loss=", re.IGNORECASE), start=5) == [9, 11]


def test_errors_count_a_traceback_once(mixed: LineBuffer) -> None:
    assert mixed.error_indexes() == [2, 10, 12]
    assert mixed.first_error() == 2
    assert mixed.next_error(-1) == 2
    assert mixed.next_error(2) == 10  # not the traceback's ValueError line (8)
    assert mixed.next_error(10) == 12
    assert mixed.next_error(12) == 2  # wraps
    assert mixed.next_error(12, backwards=True) == 10
    assert mixed.next_error(2, backwards=True) == 12
    assert mixed.next_error(len(mixed), backwards=True) == 12
    assert all(mixed[i].starts_error for i in mixed.error_indexes())


def test_errors_follow_eviction() -> None:
    buffer = LineBuffer(max_lines=4)
    buffer.feed("driver", "ERROR one\nok\nok\nERROR two\n")
    assert buffer.error_indexes() == [0, 3]
    buffer.feed("driver", "ok\n")
    assert buffer.error_indexes() == [2]
    assert buffer.first_error() == 2
    buffer.feed("driver", "ok\nok\nok\n")
    assert buffer.first_error() is None and buffer.next_error(0) is None


def test_clear_forgets_everything_but_keeps_numbering() -> None:
    buffer = fed_whole("ERROR a\nb\n")
    buffer.feed("driver", "partial")
    buffer.clear()
    assert len(buffer) == 0 and buffer.first_error() is None and buffer.pending("driver") == ""
    assert buffer.sources == ()
    buffer.feed("driver", "c\n")
    assert buffer[0].number == 2 and buffer.dropped == 2


def test_log_line_is_frozen() -> None:
    line = LogLine(0, "driver", "x", "normal")
    with pytest.raises(AttributeError):
        line.text = "y"  # type: ignore[misc]
