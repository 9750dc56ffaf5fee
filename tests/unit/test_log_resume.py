"""The log tail's position keeping: replays from byte 0, cut anywhere and dropped anywhere, deliver each
byte of the file once; the start at the last N lines is the one Ray's own `lines=N` picks."""

from __future__ import annotations

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ray.dashboard.modules.log.log_agent import find_start_offset_last_n_lines_from_offset

from cockpit.core.logs.position import CHECKED_BYTES, FileReplaced, LastLines, Ledger

# Bytes that make lines, repeated blocks and CRs likely, plus anything at all.
content = st.one_of(
    st.lists(st.sampled_from([b"\n", b"a", b"loss=1.0\n", b"\r", b"\xff"]), max_size=400).map(b"".join),
    st.binary(max_size=3000),
)
cuts = st.lists(st.integers(min_value=1, max_value=700), min_size=1, max_size=12)


def replay(ledger: Ledger, file: bytes, sizes: list[int], stop_after: int | None = None) -> bytes:
    """Feed one read of `file` from byte 0, cut into `sizes` (cycled), dropped after `stop_after` chunks."""
    ledger.replay()
    out, position, count = bytearray(), 0, 0
    while position < len(file) and (stop_after is None or count < stop_after):
        size = sizes[count % len(sizes)]
        out += ledger.feed(file[position : position + size])
        position += size
        count += 1
    return bytes(out)


@given(
    start=content,
    steps=st.lists(st.tuples(content, cuts, st.integers(min_value=0, max_value=30)), min_size=1, max_size=8),
    last_cuts=cuts,
)
def test_replays_dropped_anywhere_deliver_the_file_exactly_once(
    start: bytes, steps: list[tuple[bytes, list[int], int]], last_cuts: list[int]
) -> None:
    file, ledger, delivered = start, Ledger(), bytearray()
    for appended, sizes, stop_after in steps:
        delivered += replay(ledger, file, sizes, stop_after)
        assert ledger.offset == len(delivered)
        file += appended  # the file grows while the stream is down
    delivered += replay(ledger, file, last_cuts)
    assert bytes(delivered) == file
    assert ledger.caught_up and ledger.offset == len(file)


@given(file=content, placed=st.integers(min_value=0), grown=content, sizes=cuts, stop_after=st.integers(0, 9))
def test_a_start_placed_mid_file_delivers_from_there_on(
    file: bytes, placed: int, grown: bytes, sizes: list[int], stop_after: int
) -> None:
    """The start at the last N lines: the ledger begins at the end of the first read."""
    placed %= len(file) + 1
    ledger = Ledger(offset=placed, recent=file[:placed])
    delivered = replay(ledger, file, sizes, stop_after)
    delivered += replay(ledger, file + grown, sizes)
    assert delivered == (file + grown)[placed:]


def test_repeated_blocks_resume_at_the_exact_byte() -> None:
    """Content search cannot place this (every block is the same); counting can."""
    block = b"rollout step\nreward 0.5\nupdate ok\n"
    first = block * 20 + block[:7]
    whole = block * 20 + block[:13] + b"loss=nan\n" + block[24:] + block * 29
    ledger = Ledger()
    delivered = replay(ledger, first, [4096])
    delivered += replay(ledger, whole, [100])
    assert delivered == whole and delivered.count(b"loss=nan") == 1


@given(
    original=st.binary(min_size=1, max_size=9000),
    other=st.binary(max_size=9000),
    at=st.integers(min_value=1),
    sizes=cuts,
)
def test_a_replaced_file_is_caught_never_cut_into(
    original: bytes, other: bytes, at: int, sizes: list[int]
) -> None:
    at = 1 + (at - 1) % len(original)
    ledger = Ledger()
    replay(ledger, original, [at], stop_after=1)
    assert ledger.offset == at
    checked = original[max(0, at - CHECKED_BYTES) : at]
    try:
        new = replay(ledger, other, sizes)
    except FileReplaced:
        assert other[max(0, at - CHECKED_BYTES) : at] != checked
        return
    if len(other) < at:
        assert new == b"" and not ledger.caught_up  # the tail sees the file end before its offset
    else:
        assert other[max(0, at - CHECKED_BYTES) : at] == checked
        assert new == other[at:]


def ray_start(file: bytes, n: int) -> int:
    """Where the dashboard starts `lines=n` (the agent's own function)."""
    return find_start_offset_last_n_lines_from_offset(io.BytesIO(file), offset=-1, n=n)


@given(file=content, n=st.integers(min_value=0, max_value=40), sizes=cuts)
def test_last_lines_start_where_ray_starts_lines_n(file: bytes, n: int, sizes: list[int]) -> None:
    last = LastLines(n, limit=1 << 30)
    position, count = 0, 0
    while position < len(file):
        size = sizes[count % len(sizes)]
        last.feed(file[position : position + size])
        position, count = position + size, count + 1
    assert last.take() == file[ray_start(file, n) :]


@pytest.mark.parametrize("n", [1, 3, 1000])
def test_last_lines_keep_little_memory_and_honour_the_byte_limit(n: int) -> None:
    line = b"step 123456 loss=0.5 " + b"x" * 80 + b"\n"
    last = LastLines(n, limit=50_000)
    for _ in range(40_000):  # 4 MB in 100-byte lines
        last.feed(line)
    assert len(last._buffer) < 4 << 20  # trimmed as it went
    assert last.take() == (line * n)[-50_000:]
    last.feed(b"x" * 120_000)  # one runaway line: the last 50 000 bytes of it
    assert last.take() == b"x" * 50_000
