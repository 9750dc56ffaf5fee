"""Provides the metrics-parse benchmark: `MetricsParser` + `SeriesStore` over a 1,000,000-line driver log on
disk, beside a plain `re.finditer` pass over the same file, in the same run.

The log (written once per run into a private temp directory, deterministic): 10% metric lines, half of
them the demo driver's `step=N reward=... kl=... throughput=... tok/s`, half verl's console line from its
TaskRunner actor (`(TaskRunner pid=N)` in colour, 24 keys, `np.float64(...)` values); 90% noise as a
driver log holds it: coloured `(RolloutWorker pid=N)` and `(PolicyTrainer pid=N)` prefixes, the demo
actors' own `... step=N ...` prints (5% of all lines: they must be looked at and rejected), INFO and
WARNING lines, a vLLM progress bar, a traceback now and then, Ray's `[repeated Nx across cluster]`.

Each measured pass runs alone in a fresh process (`python bench/metrics_parse.py --child KIND FILE`) that
reads the file in 1 MiB chunks, as `cockpit metrics` reads a log:

- `cockpit`: `MetricsParser("auto")` (every format tried on each candidate line) fed the raw bytes, its
  samples kept in a `SeriesStore` (the command's `--max-points` default); the samples are counted and
  checked against the number the generator wrote, so a fast wrong answer cannot pass.
- `finditer`: the floor a one-off script pays: decode, carry the partial last line, and
  `re.finditer(r"step[=:](\\d+)", text)` over each chunk, counting matches (no keys, no values, no
  prefixes: it also counts the actors' `step=` lines).
- `every_line`: the same parser with its word scan turned off, so every line goes through the formats in
  Python (as a profile's regex format does): what the scan saves.

Measured per pass: wall time (lines/s, MB/s), CPU time, the peak RSS of the process (`VmHWM`: unlike
`ru_maxrss`, which after fork and exec keeps the parent's high-water mark, it is this program's own) and its
RSS before the file was opened (the interpreter and imports), so the increment is what parsing holds.
Passes alternate (cockpit, finditer, every_line) for 3 rounds (1 with --quick); medians are reported.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import PYTHON, REPO, Row, ratio, rss_mib, run_child

NAME = "metrics_parse"
LINES = 1_000_000
CHUNK = 1 << 20
KINDS = ("cockpit", "finditer", "every_line")
LABELS = {
    "cockpit": "MetricsParser (auto)",
    "finditer": "re.finditer floor",
    "every_line": "MetricsParser (auto), no word scan",
}
VERL_KEYS = (
    "actor/entropy",
    "actor/pg_loss",
    "actor/pg_clipfrac",
    "actor/ppo_kl",
    "actor/grad_norm",
    "actor/lr",
    "critic/score/mean",
    "critic/score/max",
    "critic/score/min",
    "critic/rewards/mean",
    "critic/advantages/mean",
    "critic/advantages/max",
    "critic/returns/mean",
    "response_length/mean",
    "response_length/max",
    "response_length/clip_ratio",
    "prompt_length/mean",
    "timing_s/gen",
    "timing_s/ref",
    "timing_s/update_actor",
    "timing_s/step",
    "perf/throughput",
    "perf/time_per_step",
    "training/global_step",
)
CYAN, GREEN, RESET = "\x1b[36m", "\x1b[32m", "\x1b[0m"


def write_log(path: Path, lines: int = LINES, seed: int = 15) -> dict[str, int]:
    """Write the benchmark's driver log; returns what it holds (lines, metric lines, samples, bytes)."""
    rng = random.Random(seed)
    metric_lines = samples = 0
    demo_step = verl_step = 0
    with path.open("w", encoding="utf-8") as out:
        buffer: list[str] = []
        for index in range(lines):
            roll = rng.random()
            worker = f"{CYAN}(RolloutWorker_{index % 4} pid={31000 + index % 4}){RESET} "
            if index % 10 == 0:  # 10% metric lines, alternating the demo's and verl's
                metric_lines += 1
                if index % 20 == 0:
                    demo_step += 1
                    line = (
                        f"step={demo_step} reward={rng.random():.3f} kl={rng.random() / 50:.4f} "
                        f"throughput={rng.randrange(30000, 70000)} tok/s"
                    )
                    samples += 3
                else:
                    verl_step += 1
                    fields = [f"step:{verl_step}"] + [
                        f"{key}:np.float64({rng.random() * 10:.17g})" for key in VERL_KEYS[:-1]
                    ]
                    fields.append(f"{VERL_KEYS[-1]}:{verl_step}")
                    line = f"{CYAN}(TaskRunner pid=2109){RESET} " + " - ".join(fields)
                    samples += len(VERL_KEYS)
            elif roll < 0.05:  # the demo actors' prints that hold `step=` but are not metric lines
                line = (
                    worker
                    + f"rollout rank={index % 4} step={demo_step} generated {rng.randrange(10**4)} tokens"
                )
            elif roll < 0.08:
                line = (
                    f"{CYAN}(PolicyTrainer pid=31010){RESET} policy update step={demo_step} "
                    f"loss={rng.random():.4f} version={demo_step}"
                    + f"{GREEN} [repeated 3x across cluster]{RESET}"
                )
            elif roll < 0.12:
                line = (
                    worker
                    + f"WARNING 11-26 01:02:03 [scheduler.py:1089] Sequence group {rng.randrange(10**6)} "
                    "is preempted by PreemptionMode.RECOMPUTE mode: not enough KV cache space."
                )
            elif roll < 0.14:
                line = (
                    worker + f"Processed prompts: {rng.randrange(100)}%|████      | {rng.randrange(256)}/256 "
                    "[00:12<00:03, 20.1it/s, est. speed input: 1234.56 toks/s, output: 567.89 toks/s]"
                )
            elif roll < 0.145:
                line = worker + '  File "/app/verl/workers/rollout/vllm_rollout.py", line 212, in generate'
            else:
                line = (
                    worker + f"2026-11-26 01:02:{rng.randrange(60):02d},{rng.randrange(1000):03d} INFO "
                    f"rollout.py:{rng.randrange(900)} -- generated {rng.randrange(10**5)} tokens for "
                    f"{rng.randrange(64)} prompts in {rng.random() * 9:.2f}s"
                )
            buffer.append(line)
            if len(buffer) >= 10_000:
                out.write("\n".join(buffer) + "\n")
                buffer = []
        if buffer:
            out.write("\n".join(buffer) + "\n")
    return {"lines": lines, "metric_lines": metric_lines, "samples": samples, "bytes": path.stat().st_size}


# -- the measured process ------------------------------------------------------------------------------


def _child(kind: str, path: Path) -> dict[str, Any]:
    from cockpit.core.metrics.lines import MetricsParser
    from cockpit.core.metrics.series import SeriesStore

    rss_before = rss_mib()
    cpu_start, started = time.process_time(), time.perf_counter()
    found = 0
    looked_at = 0
    keys = 0
    if kind == "finditer":
        pattern = re.compile(r"step[=:](\d+)")
        pending = ""
        with path.open("rb") as fh:
            while chunk := fh.read(CHUNK):
                text = pending + chunk.decode("utf-8", "replace")
                cut = text.rfind("\n") + 1
                text, pending = text[:cut], text[cut:]
                for _match in pattern.finditer(text):
                    found += 1
    else:
        parser = MetricsParser("auto")
        if kind == "every_line":
            parser._words = None  # the scan off: every line through the formats (a bench-only switch)
        store = SeriesStore(max_points=100_000)
        with path.open("rb") as fh:
            while chunk := fh.read(CHUNK):
                found += len(store.extend(parser.feed(chunk)))
        found += len(store.extend(parser.flush()))
        looked_at, keys = parser.looked_at, len(store)
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu_start
    peak = rss_mib("VmHWM")
    return {
        "kind": kind,
        "wall_s": wall,
        "cpu_s": cpu,
        "found": found,
        "lines_looked_at_in_python": looked_at,
        "keys": keys,
        "rss_mib_before": rss_before,
        "peak_rss_mib": peak,
    }


# -- the runner's side ------------------------------------------------------------------------------------


def _measure(kind: str, path: Path) -> dict[str, Any]:
    command = [PYTHON, str(REPO / "bench" / "metrics_parse.py"), "--child", kind, str(path)]
    return run_child(command, timeout=900)


def run(quick: bool) -> tuple[dict[str, Any], list[Row]]:
    """Measure; return the JSON document and the table rows."""
    rounds = 1 if quick else 3
    workdir = Path(tempfile.mkdtemp(prefix="cockpit-bench-metrics-"))
    try:
        path = workdir / "job-driver-bench.log"
        started = time.perf_counter()
        content = write_log(path)
        written_s = time.perf_counter() - started
        samples: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
        for round_index in range(rounds):
            order = KINDS[round_index % len(KINDS) :] + KINDS[: round_index % len(KINDS)]
            for kind in order:
                samples[kind].append(_measure(kind, path))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    expected = {"cockpit": content["samples"], "every_line": content["samples"]}
    summary: dict[str, dict[str, float]] = {}
    for kind, runs in samples.items():
        if kind in expected:
            wrong = [r["found"] for r in runs if r["found"] != expected[kind]]
            if wrong:
                raise RuntimeError(f"{kind} found {wrong[0]} samples, not {expected[kind]}")
        wall = statistics.median(r["wall_s"] for r in runs)
        summary[kind] = {
            "wall_s": wall,
            "lines_per_s": content["lines"] / wall,
            "mb_per_s": content["bytes"] / wall / 1e6,
            "cpu_s": statistics.median(r["cpu_s"] for r in runs),
            "peak_rss_mib": max(r["peak_rss_mib"] for r in runs),
            "rss_mib_before": statistics.median(r["rss_mib_before"] for r in runs),
            "found": runs[0]["found"],
            "lines_looked_at_in_python": runs[0]["lines_looked_at_in_python"],
        }
    cockpit, floor = summary["cockpit"], summary["finditer"]
    doc = {
        "file": content,
        "chunk_bytes": CHUNK,
        "rounds": rounds,
        "written_s": written_s,
        "runs": samples,
        "summary": summary,
        "ratio_cockpit_over_finditer_time": ratio(cockpit["wall_s"], floor["wall_s"]),
        "ratio_cockpit_over_finditer_cpu": ratio(cockpit["cpu_s"], floor["cpu_s"]),
        "ratio_no_word_scan_over_cockpit_time": ratio(summary["every_line"]["wall_s"], cockpit["wall_s"]),
        "ratio_no_word_scan_over_cockpit_cpu": ratio(summary["every_line"]["cpu_s"], cockpit["cpu_s"]),
    }
    rows = []
    for kind in KINDS:
        s = summary[kind]
        rows.append(
            Row(
                NAME,
                f"{LABELS[kind]}: {content['lines']:,} lines ({content['bytes'] / 1e6:.0f} MB) from disk",
                f"{s['lines_per_s']:,.0f} lines/s ({s['wall_s']:.2f} s)",
                f"{s['mb_per_s']:.0f} MB/s; CPU {s['cpu_s']:.2f} s; peak RSS {s['peak_rss_mib']:.0f} MiB "
                f"({s['rss_mib_before']:.0f} before reading); {s['found']:,} found; "
                f"{s['lines_looked_at_in_python']:,} lines looked at in Python",
            )
        )
    rows.append(
        Row(
            NAME,
            "ratio MetricsParser / re.finditer floor",
            f"{doc['ratio_cockpit_over_finditer_time']:.1f}x the time "
            f"(CPU {doc['ratio_cockpit_over_finditer_cpu']:.1f}x)",
            f"without the word scan: {doc['ratio_no_word_scan_over_cockpit_time']:.2f}x the parser's time "
            f"(CPU {doc['ratio_no_word_scan_over_cockpit_cpu']:.2f}x)",
        )
    )
    return doc, rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--child", choices=KINDS, help="run one measured pass over FILE and print its JSON")
    parser.add_argument("file", nargs="?", help="with --child: the log to read")
    parser.add_argument("--quick", action="store_true", help="1 round instead of 3")
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.child, Path(args.file))))
        return 0
    doc, rows = run(args.quick)
    print(json.dumps({k: v for k, v in doc.items() if k != "runs"}, indent=2))
    for row in rows:
        print(f"{row.what}: {row.value}  ({row.detail})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
