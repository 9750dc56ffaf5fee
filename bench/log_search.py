"""Provides the log-search benchmark: the Logs screen's `/` search and `&` filter over a full ring.

A `LineBuffer` holds 200,000 lines of Ray-style driver output (about 120 bytes each: nine in ten a
worker's, its prefix coloured as Ray writes it), sealed in batches as the Logs screen keeps them. Measured,
as the CPU time of one call (`time.process_time`, median of the rounds, interleaved with the baseline):

- `/` search for a term no line holds, ignoring case (the UI's search): every line is looked at, the
  worst case of a keystroke's Enter; also the same search as a regex (which the ring searches line by
  line, decoding each batch into lines: the path every search took before plain text went a batch at a
  time);
- `&` filter on a term one line in 64 holds: the pass that builds the filtered view.

The baseline is the same lines as a `list` of `str`, each stripped of its escapes and searched with the
same compiled pattern, line by line (what a pane keeping one string a line does: the cockpit's ring
before it was sealed, Textual's `Log`). Both must find the same lines, or the run fails.
"""

from __future__ import annotations

import re
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from common import Row, ratio

from cockpit.core.logs.buffer import LineBuffer
from cockpit.core.text import strip_ansi

NAME = "log_search"
LINES = 200_000
ABSENT = "loss=nan"
FILTERED = "pid=1063)"
"""One line in 64 of the workers'."""


def _log() -> str:
    lines = []
    for i in range(LINES):
        # A worker's line with its prefix coloured, as Ray writes it into the driver's output; one line
        # in 10 the driver's own.
        prefix = "" if i % 10 == 0 else f"\x1b[36m(RolloutWorker pid={1000 + i % 64})\x1b[0m "
        lines.append(
            f"{prefix}2026-11-26 12:00:{i % 60:02d} INFO step {i} loss=0.1234 reward=0.5678 kl=0.01 "
            f"tokens/s={100_000 + i}\n"
        )
    return "".join(lines)


def _cpu_ms(call: Callable[[], object]) -> tuple[float, object]:
    started = time.process_time()
    result = call()
    return (time.process_time() - started) * 1000, result


def run(quick: bool) -> tuple[dict[str, Any], list[Row]]:
    """Measure; return the JSON document and the table rows."""
    rounds = 5 if quick else 15
    ring = LineBuffer(max_lines=LINES)
    ring.feed("driver", _log())
    texts = list(ring.texts())  # the baseline's list: the same texts, one `str` each
    absent = re.compile(re.escape(ABSENT), re.IGNORECASE)
    filtered = re.compile(re.escape(FILTERED), re.IGNORECASE)

    def list_search() -> int | None:
        search = absent.search
        return next((i for i, text in enumerate(texts) if search(strip_ansi(text))), None)

    def list_filter() -> list[int]:
        search = filtered.search
        return [i for i, text in enumerate(texts) if search(strip_ansi(text))]

    grouped = re.compile(f"(?:{absent.pattern})", re.IGNORECASE)  # not plain text to it: line by line
    calls: dict[str, Callable[[], object]] = {
        "search_ring": lambda: ring.search(absent, -1),
        "search_ring_by_line": lambda: ring.search(grouped, -1),
        "search_list": list_search,
        "filter_ring": lambda: ring.matching(filtered),
        "filter_list": list_filter,
    }
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        found: dict[str, object] = {}
        for name, call in calls.items():
            samples[name].append((took := _cpu_ms(call))[0])
            found[name] = took[1]
        if (
            not found["search_ring"] == found["search_ring_by_line"] == found["search_list"]
            or found["filter_ring"] != found["filter_list"]
        ):
            raise RuntimeError("the ring and the list found different lines")
    median = {name: statistics.median(values) for name, values in samples.items()}
    shown = len(found["filter_ring"])  # type: ignore[arg-type]
    result = {
        "lines": LINES,
        "rounds": rounds,
        "filtered_lines": shown,
        "samples_ms": samples,
        "median_ms": median,
    }
    rows = [
        Row(
            NAME,
            f"/ search, {LINES:,} lines, no match, any case",
            f"{median['search_ring']:.1f} ms",
            f"list of str line by line: {median['search_list']:.1f} ms, "
            f"{ratio(median['search_list'], median['search_ring']):.1f}x faster; the ring line by line "
            f"(a regex): {median['search_ring_by_line']:.1f} ms",
        ),
        Row(
            NAME,
            f"& filter, {LINES:,} lines, {shown:,} shown",
            f"{median['filter_ring']:.1f} ms",
            f"list of str line by line: {median['filter_list']:.1f} ms, "
            f"{ratio(median['filter_list'], median['filter_ring']):.1f}x faster",
        ),
    ]
    return result, rows


if __name__ == "__main__":
    document, table = run("--quick" in sys.argv)
    for row in table:
        print(f"{row.what}: {row.value} ({row.detail})")
