"""Provides the log-ingest benchmark: the cockpit's LogView vs Textual's stock Log, fed the same stream.

Each widget runs alone in a fresh process (`python bench/log_ingest.py --child WIDGET`): a headless app
(`run_test`, 200x50) whose only widget is a LogView or a `Log`. A producer thread posts a batch every
50 ms at 20,000 lines/s (100-byte lines of Ray-style driver output: coloured worker prefixes, INFO,
some WARNING and ERROR lines, a traceback every 500 lines) for 60 s (10 s with --quick); the app
ingests each batch in its message handler, as the cockpit's log poller would. LogView gets the raw
bytes cut at arbitrary points (100,000 bytes a batch, never on a line boundary; it decodes, splits and
classifies); `Log` gets the batch as decoded lines through `write_lines` (its own API), so decoding and
splitting are not charged to it. `Log()` is unbounded (its `max_lines` stops showing new lines in
textual 8.2.8); LogView keeps 200,000 lines.

Measured per widget: lines ingested and lines/s, the backlog of posted batches when the feed stops, how
long a batch waited before it was handled, the gaps of a 50 ms `set_interval` heartbeat (50 ms when the
loop is free; a longer gap is a stall), CPU time of the process (all threads) over the feed, RSS at the
end, the full (generation 2) cyclic-GC collections and how long they took, and whether the newest line
is on screen. Headless, so frames are composed (`render_line` runs) but never written to a terminal:
the terminal's own cost is not in these figures.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from common import PYTHON, REPO, Row, percentile, ratio, rss_mib, run_child

NAME = "log_ingest"
RATE = 20_000
"""Lines per second fed."""
INTERVAL = 0.05
"""Seconds between batches, and the heartbeat's period."""
LINE_BYTES = 100
SIZE = (200, 50)
WIDGETS = ("logview", "log")
LABELS = {"logview": "LogView", "log": "Textual Log"}
TARGET_STALL_S = 0.050
"""The target: no stall over 50 ms, i.e. no heartbeat gap longer than its 50 ms period plus 50 ms."""


def _pad(text: str) -> str:
    """TEXT cut or padded to LINE_BYTES bytes with its newline."""
    data = text.encode()[: LINE_BYTES - 1].decode(errors="ignore")
    return data + " " * (LINE_BYTES - 1 - len(data.encode())) + "\n"


def log_lines(count: int, seed: int = 7) -> list[str]:
    """COUNT lines of a Ray RL job's driver log, LINE_BYTES bytes each with their newline."""
    rng = random.Random(seed)
    lines: list[str] = []
    step = 0
    while len(lines) < count:
        worker = rng.randrange(16)
        prefix = f"\x1b[36m(RolloutWorker pid={31000 + worker})\x1b[0m "
        stamp = f"2026-11-26 01:{step // 600 % 60:02d}:{step // 10 % 60:02d},{rng.randrange(1000):03d}"
        roll = rng.random()
        if len(lines) % 500 == 499:
            frames = [
                "Traceback (most recent call last):",
                '  File "/app/verl/workers/rollout.py", line 212, in generate_sequences',
                "    output = self.inference_engine.generate(prompts, sampling_params)",
                '  File "/app/vllm/engine/llm_engine.py", line 1388, in step',
                "    raise RuntimeError(f'bad token id {token_id}')",
                f"RuntimeError: bad token id {rng.randrange(10**6)}",
            ]
            lines += [_pad(prefix + frame) for frame in frames]
            continue
        if roll < 0.03:
            text = (
                f"{prefix}{stamp} WARNING rollout.py:88 -- slow generation: {rng.random() * 9:.2f}s for batch"
            )
        elif roll < 0.04:
            text = f"{prefix}{stamp} ERROR rollout.py:97 -- NCCL error on rank {worker}: unhandled cuda error"
        elif roll < 0.10:
            text = f"{stamp} INFO trainer.py:143 -- iteration {step} actor/pg_loss={rng.random():.4f}"
        else:
            text = (
                f"{prefix}{stamp} INFO rollout.py:212 -- step={step} reward={rng.random():.4f} "
                f"kl={rng.random() / 50:.5f} tokens={rng.randrange(10**5)} lr=1e-6 clip=0.2 ent=0.81"
            )
        lines.append(_pad(text))
        step += 1
    return lines[:count]


# -- the measured process -----------------------------------------------------------------------------


def _child(widget: str, seconds: float) -> dict[str, Any]:
    from textual.app import App, ComposeResult
    from textual.message import Message
    from textual.widgets import Log

    from cockpit.core.text import strip_ansi
    from cockpit.ui.widgets.log_view import LogView

    per_batch = round(RATE * INTERVAL)
    pool = log_lines(RATE)  # one second of output, fed round and round
    raw = "".join(pool).encode()
    batch_bytes = per_batch * LINE_BYTES

    @dataclass
    class Batch(Message):
        payload: bytes | list[str]
        posted: float

    class IngestApp(App[None]):
        def __init__(self) -> None:
            super().__init__()
            self.beats: list[float] = []
            self.waits: list[float] = []
            self.ingested = 0
            self.handled = 0
            self.last_handled = 0.0

        def compose(self) -> ComposeResult:
            yield LogView(id="log") if widget == "logview" else Log(id="log")

        def on_mount(self) -> None:
            self.set_interval(INTERVAL, lambda: self.beats.append(time.monotonic()))

        def on_batch(self, message: Batch) -> None:
            self.waits.append(time.monotonic() - message.posted)
            view = self.query_one("#log")
            if isinstance(view, LogView):
                assert isinstance(message.payload, bytes)
                self.ingested += view.append("driver", message.payload)
            else:
                assert isinstance(view, Log) and isinstance(message.payload, list)
                view.write_lines(message.payload)
                self.ingested += len(message.payload)
            self.handled += 1
            self.last_handled = time.monotonic()

    app = IngestApp()
    collections: list[tuple[int, float, float]] = []
    """Cyclic-GC runs: (generation, when, seconds); a full collection stops the loop like any handler."""
    gc_started = [0.0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            gc_started[0] = time.perf_counter()
        else:
            collections.append((info["generation"], time.monotonic(), time.perf_counter() - gc_started[0]))

    gc.callbacks.append(on_gc)
    posted = 0
    stop = threading.Event()

    def produce(started: float) -> None:
        nonlocal posted
        offset = 50  # so that no batch starts or ends on a line boundary
        index = 0
        while not stop.is_set():
            due = started + (posted + 1) * INTERVAL
            if due - started > seconds:
                return
            time.sleep(max(0.0, due - time.monotonic()))
            payload: bytes | list[str]
            if widget == "logview":
                start = offset % len(raw)
                chunk = raw[start : start + batch_bytes]
                if len(chunk) < batch_bytes:
                    chunk += raw[: batch_bytes - len(chunk)]
                payload, offset = chunk, offset + batch_bytes
            else:
                payload = [line.rstrip("\n") for line in pool[index : index + per_batch]]
                index = (index + per_batch) % len(pool)
            app.post_message(Batch(payload, time.monotonic()))
            posted += 1

    async def drive() -> dict[str, Any]:
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            idle_from = time.monotonic()
            await pilot.pause(1.0)
            idle_beats = [b for b in app.beats if b >= idle_from]
            started = time.monotonic()
            cpu_start = time.process_time()
            producer = threading.Thread(target=produce, args=(started,), name="producer", daemon=True)
            producer.start()
            while producer.is_alive():
                await pilot.pause(0.1)
            feed_end = time.monotonic()
            backlog = posted - app.handled
            while app.handled < posted and time.monotonic() - feed_end < 30:
                await pilot.pause(0.05)
            window_end = app.last_handled  # the last batch handled: the feed's end as the UI saw it
            cpu, cpu_wall = time.process_time() - cpu_start, time.monotonic() - started
            await pilot.pause(0.2)
            view = app.query_one("#log")
            height = view.scrollable_content_region.height
            shown = [strip_ansi(view.render_line(y).text).rstrip() for y in range(height)]
            shown = [row for row in shown if row]
            newest = view.buffer[-1].text if isinstance(view, LogView) else view.lines[-1]
            beats = [b for b in app.beats if started <= b <= window_end]
            gaps = [b - a for a, b in pairwise(beats)]
            idle_gaps = [b - a for a, b in pairwise(idle_beats)]
            return {
                "widget": widget,
                "seconds": seconds,
                "rate_fed": RATE,
                "batches_posted": posted,
                "batches_handled": app.handled,
                "backlog_batches_at_feed_end": backlog,
                "lines_ingested": app.ingested,
                "lines_per_s": app.ingested / (window_end - started),
                "window_s": window_end - started,
                "batch_wait_s": {
                    "p50": statistics.median(app.waits),
                    "p95": percentile(app.waits, 0.95),
                    "max": max(app.waits),
                },
                "gap_s": {
                    "p50": statistics.median(gaps),
                    "p95": percentile(gaps, 0.95),
                    "max": max(gaps),
                    "n": len(gaps),
                    "over_100ms": sum(1 for g in gaps if g > INTERVAL + TARGET_STALL_S),
                },
                "idle_gap_s": {"p50": statistics.median(idle_gaps), "max": max(idle_gaps)},
                "gc_full_collections": {
                    "n": len(full := [d for g, t, d in collections if g == 2 and started <= t <= window_end]),
                    "max_s": max(full, default=0.0),
                    "total_s": sum(full),
                },
                "cpu_s": cpu,
                "cpu_percent_of_one_core": 100 * cpu / cpu_wall,
                "rss_mib_end": rss_mib(),
                "newest_line_on_screen": bool(shown) and shown[-1] == strip_ansi(newest).rstrip(),
                "last_rows": shown[-2:],
            }

    return asyncio.run(drive())


# -- the runner's side --------------------------------------------------------------------------------


def _measure(widget: str, seconds: float) -> dict[str, Any]:
    command = [PYTHON, str(REPO / "bench" / "log_ingest.py"), "--child", widget, "--seconds", str(seconds)]
    return run_child(command, timeout=seconds + 120)


def run(quick: bool) -> tuple[dict[str, Any], list[Row]]:
    """Measure; return the JSON document and the table rows."""
    seconds = 10.0 if quick else 60.0
    results = {widget: _measure(widget, seconds) for widget in WIDGETS}
    view, log = results["logview"], results["log"]
    ratios = {
        "gap_max": ratio(view["gap_s"]["max"], log["gap_s"]["max"]),
        "gap_p95": ratio(view["gap_s"]["p95"], log["gap_s"]["p95"]),
        "cpu": ratio(view["cpu_percent_of_one_core"], log["cpu_percent_of_one_core"]),
        "lines_per_s": ratio(view["lines_per_s"], log["lines_per_s"]),
    }
    met = {
        widget: r["lines_per_s"] >= 0.98 * RATE and r["gap_s"]["max"] <= INTERVAL + TARGET_STALL_S
        for widget, r in results.items()
    }
    doc = {
        "seconds": seconds,
        "rate": RATE,
        "interval_s": INTERVAL,
        "line_bytes": LINE_BYTES,
        "size": SIZE,
        "results": results,
        "ratio_logview_over_log": ratios,
        "target_met": met,
    }
    rows = []
    for widget in WIDGETS:
        r = results[widget]
        gap, wait = r["gap_s"], r["batch_wait_s"]
        rows.append(
            Row(
                NAME,
                f"{LABELS[widget]}: {RATE:,} lines/s for {seconds:.0f} s, heartbeat gap",
                f"p50 {gap['p50'] * 1000:.0f} / p95 {gap['p95'] * 1000:.0f} / max {gap['max'] * 1000:.0f} ms",
                f"{r['lines_per_s']:,.0f} lines/s ingested; {gap['over_100ms']} gaps > 100 ms of {gap['n']}; "
                f"CPU {r['cpu_percent_of_one_core']:.0f}% of a core; "
                f"batch wait p95 {wait['p95'] * 1000:.0f} ms; "
                f"RSS {r['rss_mib_end']:.0f} MiB; target {'met' if met[widget] else 'NOT met'}",
            )
        )
    rows.append(
        Row(
            NAME,
            "ratio LogView / Log",
            f"max gap {ratios['gap_max']:.2f}x, CPU {ratios['cpu']:.2f}x",
            f"p95 gap {ratios['gap_p95']:.2f}x; lines/s {ratios['lines_per_s']:.2f}x",
        )
    )
    return doc, rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--child", choices=WIDGETS, help="run one measured app and print its JSON")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--quick", action="store_true", help="10 s per widget instead of 60 s")
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.child, args.seconds)))
        return 0
    doc, rows = run(args.quick)
    print(json.dumps(doc, indent=2))
    for row in rows:
        print(f"{row.what}: {row.value}  ({row.detail})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
