"""Provides `cockpit metrics TARGET JOB`: a job's training curves from its driver log, printed as a table of
each key (first, last, min, max, count), as CSV (one row per step) or as JSON; `--follow` then prints the
new points as they come, until the job ends. `--phases` prints instead each step's time split into the
phases the framework timed (`metrics.phases`), their shares over the last N steps and the checkpoint saves.

The driver log is read once, in chunks, through the dashboard (`LogTail`: the whole file, then the stream
from where that read ended; Ray can only stream from the start of a file, so following reads the history
a second time on the head's side and drops it). Memory: the store's caps (`--max-points` per key, 1,024
keys), never the whole log.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import csv
import json
import sys
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Literal

from cockpit.cli.common import EXIT_FAIL, EXIT_OK, add_connect_options, connect_options, err, user_config

if TYPE_CHECKING:
    from cockpit.core.cluster.dashboard import DashboardClient
    from cockpit.core.logs.sources import LogTail
    from cockpit.core.metrics.lines import Format, MetricsParser, Sample
    from cockpit.core.metrics.phases import PhaseKeys
    from cockpit.core.metrics.series import KeyFilter, SeriesStore
    from cockpit.core.snapshots import JobRow

Mode = Literal["table", "csv", "json"]
Row = tuple[int, dict[str, float]]

DEFAULT_MAX_POINTS = 100_000
"""Points kept per key by the command (the screen keeps fewer): 1.6 MB a key."""
QUIET_S = 1.0
"""A stream quiet this long gives out the step it was assembling (a step's lines come together)."""
STATUS_EVERY_S = 2.0
DEFAULT_LAST = 20
"""Steps --phases shows and takes the shares over."""


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "metrics",
        help="a job's metrics (reward, KL, loss, throughput ...) from its driver log: table, CSV or JSON",
        description=(
            "Reads JOB's driver log and prints each metric key's series against step: a summary table "
            "(first, last, min, max, count), --csv (step,key1,key2,...: one row per step) or --json "
            "({key: [[step, value], ...]}). --follow then prints new steps as they come (CSV rows, JSON "
            "lines, or step lines) until the job ends; exit 0 when it succeeds, 1 when it fails. The "
            "format is the job profile's `metrics:` or `framework:`, else auto (verl, NeMo RL, RLinf, "
            "the demo, or `step=N key=value` lines)."
        ),
    )
    add_connect_options(p)
    p.add_argument("job", metavar="JOB", help="the job's submission id or Ray job id (or a prefix)")
    p.add_argument(
        "--keys", metavar="K,...", help="only these keys, comma-separated; shell patterns work ('critic/*')"
    )
    out = p.add_mutually_exclusive_group()
    out.add_argument("--csv", action="store_true", help="step,key1,key2,...: one row per step")
    out.add_argument(
        "--json", action="store_true", help="{key: [[step, value], ...]}; with --follow, a step per line"
    )
    p.add_argument(
        "--follow", "-f", action="store_true", help="then print new points as they come, until the job ends"
    )
    p.add_argument(
        "--format",
        metavar="NAME|REGEX",
        help="auto, verl, nemo_rl, rlinf, demo, generic, or a regex with (?P<step>...) and a group per key "
        "(default: the job's profile, else auto)",
    )
    p.add_argument(
        "--phases",
        action="store_true",
        help="each step's time split into its phases (generation, update, weight sync, checkpoint ...) from "
        "the timing keys verl, NeMo RL or RLinf print, and each phase's share of the last steps",
    )
    p.add_argument(
        "--last",
        type=int,
        default=DEFAULT_LAST,
        metavar="N",
        help=f"with --phases: the last N steps (default {DEFAULT_LAST}; 0: all)",
    )
    p.add_argument(
        "--max-points",
        type=int,
        default=DEFAULT_MAX_POINTS,
        metavar="N",
        help=f"points kept per key; past it every other step is dropped (default {DEFAULT_MAX_POINTS:,})",
    )
    p.set_defaults(handler=metrics)


def _flags(args: argparse.Namespace) -> tuple[Format | None, list[str]]:
    """--format and --keys, checked before anything is asked of the cluster."""
    from cockpit.core.errors import CockpitError
    from cockpit.core.metrics.lines import parse_format

    form = None
    if args.format is not None:
        try:
            form = parse_format(args.format)
        except ValueError as exc:
            raise CockpitError(f"--format: {exc}") from None
    keys: list[str] = []
    if args.keys is not None:
        keys = [k.strip() for k in args.keys.split(",") if k.strip()]
        if not keys:
            raise CockpitError("--keys: give key names separated by commas (e.g. reward,kl).")
    if args.max_points < 2:
        raise CockpitError("--max-points must be at least 2.")
    if args.phases and (args.follow or keys):
        raise CockpitError("--phases reads the timing keys itself: leave out --follow and --keys.")
    if args.last < 0:
        raise CockpitError("--last must be 0 (all steps) or more.")
    return form, keys


def metrics(args: argparse.Namespace) -> int:
    from cockpit.core.connect.connection import open_dashboard
    from cockpit.core.targets import parse_target

    form, keys = _flags(args)
    target = parse_target(args.target)

    async def run() -> int:
        async with open_dashboard(target, connect_options(args)) as client:
            return await _metrics(client, args, form, keys)

    return asyncio.run(run())


async def _metrics(
    client: DashboardClient, args: argparse.Namespace, form: Format | None, keys: list[str]
) -> int:
    from cockpit.core.doctor.progress import job_profile
    from cockpit.core.errors import CockpitError
    from cockpit.core.logs.sources import LogSource, LogTail
    from cockpit.core.metrics.lines import MetricsParser, format_label, profile_format
    from cockpit.core.metrics.series import KeyFilter, SeriesStore
    from cockpit.core.snapshots import match_job

    job = match_job(await client.jobs(), args.job)
    phase_keys = None
    if args.phases:
        from cockpit.core.metrics.phases import profile_keys

        profile, _ = job_profile(job, profile_dirs=user_config().profile_dirs)
        phase_keys = profile_keys(profile.phases, profile.framework) if profile is not None else None
    if form is None:
        profile, problem = job_profile(job, profile_dirs=user_config().profile_dirs)
        if problem:
            err(f"{problem} (metrics: format auto)")
        form = profile_format(profile.metrics, profile.framework) if profile is not None else "auto"
    if args.follow:
        job = await _when_driver_starts(client, job)
    if not job.driver_node_id:
        raise CockpitError(f"{job.key} has no driver log yet ({job.status}).")
    parser = MetricsParser(form)
    wanted = KeyFilter(keys) if keys else None
    store = SeriesStore(max_points=args.max_points, keys=wanted)
    tail = LogTail(client, LogSource.driver(job), lines=-1, on_event=err)
    async for chunk in tail.rest():
        store.extend(parser.feed(chunk))
    mode: Mode = "csv" if args.csv else "json" if args.json else "table"
    if not args.follow:
        store.extend(parser.flush())
        if not len(store):
            return _nothing(job, format_label(form), wanted)
        if args.phases:
            return _print_phases(store, mode, args.last, job.key, phase_keys)
        _print_whole(store, mode, _columns(store, wanted))
        _notes(store)
        return EXIT_OK
    printer = _Streamer(mode, store, wanted)
    printer.history()
    if not job.terminal:  # else the history read after it ended is the whole log
        job = await _follow(client, job, tail, parser, store, printer)
    printer.done(parser.flush())
    _notes(store)
    if not len(store):
        return _nothing(job, format_label(form), wanted)
    if job.status == "SUCCEEDED":
        err(f"job {job.key} ended: SUCCEEDED")
        return EXIT_OK
    err(f"job {job.key} {job.status}: {' '.join(job.message.split())[:300] or 'no message'}")
    return EXIT_FAIL


def _nothing(job: JobRow, label: str, wanted: KeyFilter | None) -> int:
    which = f"matching --keys {','.join(wanted.names)} " if wanted is not None else ""
    err(f"no metrics {which}in the driver log of {job.key} (format {label}; --format names another).")
    return EXIT_FAIL


def _columns(store: SeriesStore, wanted: KeyFilter | None) -> list[str]:
    """The keys to print: those named in --keys in their order (when all are exact names), else every key
    in the order first seen."""
    if wanted is not None and wanted.exact:
        return [k for k in wanted.names if k in store]
    return store.keys()


def _notes(store: SeriesStore) -> None:
    thinned = store.thinned()
    if thinned:
        err(
            f"{len(thinned)} key(s) had more than {store.max_points:,} steps: one step in "
            f"{max(store[k].stride for k in thinned)} kept (--max-points keeps more)"
        )
    if store.refused:
        err(f"more than {store.max_keys:,} keys: {store.refused:,} values of further keys dropped (--keys)")


async def _when_driver_starts(client: DashboardClient, job: JobRow) -> JobRow:
    while not (job.driver_node_id or job.terminal):
        await asyncio.sleep(1.0)
        job = await client.job(job.key)
    return job


# -- printing -------------------------------------------------------------------------------------------


def _print_whole(store: SeriesStore, mode: Mode, columns: list[str]) -> None:
    from cockpit.core.metrics.series import format_value

    out = sys.stdout
    if mode == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["step", *columns])
        for step, row in store.rows(columns):
            writer.writerow([step, *(format_value(row[k]) if k in row else "" for k in columns)])
    elif mode == "json":
        # Key by key, so the text is never held whole. NaN and Infinity as Python's json writes them.
        out.write("{")
        for index, key in enumerate(columns):
            points = json.dumps([[step, value] for step, value in store[key].points()])
            out.write(f"{', ' if index else ''}{json.dumps(key)}: {points}")
        out.write("}\n")
    else:
        _print_table(store, columns)
    out.flush()


def _print_phases(store: SeriesStore, mode: Mode, last: int, job: str, keys: PhaseKeys | None = None) -> int:
    """--phases: the last LAST steps split into their phases, as a table, CSV or JSON."""
    from cockpit.core.metrics.phases import OTHER, anatomy
    from cockpit.core.metrics.series import format_value
    from cockpit.core.text import clean

    found = anatomy(store, keys, last=last)
    if found is None:
        err(f"no phase timings (verl timing_s/*, NeMo RL Timing, RLinf time/*) in the driver log of {job}.")
        return EXIT_FAIL
    steps = found.steps[-last:] if last > 0 else found.steps
    names = [n for n in found.names if n != OTHER] + ([OTHER] if OTHER in found.names else [])
    out = sys.stdout
    if mode == "json":
        ckpt = found.checkpoints
        doc = {
            "framework": found.keys.framework,
            "prefix": found.keys.prefix,
            "suffix": found.keys.suffix,
            "steps": [
                {
                    "step": s.step,
                    "total": s.total,
                    "total_printed": s.total_printed,
                    "phases": dict(s.phases),
                    "other": s.other,
                }
                for s in steps
            ],
            "window": found.window,
            "shares": {p.name: {"seconds": p.seconds, "share": p.share} for p in found.shares},
            "checkpoints": None
            if ckpt is None
            else {
                "count": ckpt.count,
                "last_step": ckpt.last_step,
                "last_seconds": ckpt.last_seconds,
                "mean_seconds": ckpt.mean_seconds,
                "share": ckpt.share,
                "steps_since": ckpt.steps_since,
                "seconds_since": ckpt.seconds_since,
            },
        }
        out.write(json.dumps(doc) + "\n")
    elif mode == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["step", "total", *names])
        for s in steps:
            row = s.seconds()
            writer.writerow(
                [s.step, format_value(s.total), *(format_value(row[n]) if n in row else "" for n in names)]
            )
    else:
        width = max(len(clean(n)) for n in [*names, "PHASE"])
        print(
            f"{found.keys.framework} phases ({found.keys.pattern}), last {found.window} steps "
            f"{steps[0].step}-{steps[-1].step}:"
        )
        print(f"{'PHASE':{width}}  {'SECONDS':>11}  {'SHARE':>6}")
        for p in found.shares:
            print(f"{clean(p.name):{width}}  {p.seconds:>11.2f}  {p.share:>6.1%}")
        ckpt = found.checkpoints
        if ckpt is not None:
            print(
                f"checkpoint: {ckpt.count} saves, last at step {ckpt.last_step} ({ckpt.last_seconds:.2f}s, "
                f"mean {ckpt.mean_seconds:.2f}s, {ckpt.share:.1%} of the last {found.window} steps); "
                f"{ckpt.steps_since} steps ({ckpt.seconds_since:.1f}s) since"
            )
    out.flush()
    return EXIT_OK


def _print_table(store: SeriesStore, columns: list[str]) -> None:
    from cockpit.core.text import clean

    def shown(value: float | None) -> str:
        return "-" if value is None else f"{value:.6g}"

    summaries = [store[key].summary() for key in columns]
    width = max([len("KEY"), *(len(clean(s.key)) for s in summaries)])
    head = ("STEPS", 13), ("COUNT", 6), ("FIRST", 11), ("LAST", 11), ("MIN", 11), ("MAX", 11)
    print(f"{'KEY':{width}}" + "".join(f"  {name:>{size}}" for name, size in head))
    for s in summaries:
        steps = f"{s.first_step}-{s.last_step}"
        print(
            f"{clean(s.key):{width}}  {steps:>13}  {s.count:>6}  {shown(s.first):>11}  {shown(s.last):>11}  "
            f"{shown(s.minimum):>11}  {shown(s.maximum):>11}"
        )
    for alarm in store.nonfinite():
        if alarm.key in columns:
            print(f"! {clean(alarm.line)}")


class _Streamer:
    """--follow's output: the history first (CSV rows, JSON lines, or the table), then a row per step."""

    def __init__(self, mode: Mode, store: SeriesStore, wanted: KeyFilter | None) -> None:
        from cockpit.core.metrics.series import StepRows

        self.mode = mode
        self.store = store
        self.wanted = wanted
        self.columns: list[str] | None = None
        self.rows = StepRows()
        self.writer = csv.writer(sys.stdout, lineterminator="\n")
        self.left_out = False

    def history(self) -> None:
        """What the log held before following: the CSV header (the --keys named, else the keys seen so
        far; with neither, the keys of the first row) and a row per step, or the table."""
        seen = _columns(self.store, self.wanted)
        named = self.wanted is not None and self.wanted.exact
        if self.mode == "csv" and (named or seen):
            self._start(self.wanted.names if self.wanted is not None and named else seen)
        if self.mode == "table":
            if seen:
                _print_table(self.store, seen)
        else:
            for row in self.store.rows(seen):
                self._row(row)
        sys.stdout.flush()

    def _start(self, columns: list[str]) -> None:
        self.columns = columns
        if self.mode == "csv":
            self.writer.writerow(["step", *columns])

    def new(self, kept: list[Sample]) -> None:
        self._rows(self.rows.add(kept))

    def quiet(self) -> None:
        self._rows(self.rows.flush())

    def done(self, last: list[Sample]) -> None:
        self._rows(self.rows.add(self.store.extend(last)) + self.rows.flush())

    def _rows(self, rows: list[Row]) -> None:
        for row in rows:
            self._row(row)
        if rows:
            sys.stdout.flush()

    def _row(self, row: Row) -> None:
        from cockpit.core.metrics.series import format_value
        from cockpit.core.text import clean

        step, values = row
        if self.mode == "json":
            print(json.dumps({"step": step, **values}))
        elif self.mode == "table":
            print(f"step {step}  " + "  ".join(f"{clean(k)}={format_value(v)}" for k, v in values.items()))
        else:
            if self.columns is None:
                self._start(list(values))
            columns = self.columns or []
            if not self.left_out and any(k not in columns for k in values):
                extra = next(k for k in values if k not in columns)
                err(
                    f"key {extra} (and any later new key) is not in the CSV columns: "
                    "name it in --keys, or use --json"
                )
                self.left_out = True
            self.writer.writerow([step, *(format_value(values[k]) if k in values else "" for k in columns)])


async def _follow(
    client: DashboardClient,
    job: JobRow,
    tail: LogTail,
    parser: MetricsParser,
    store: SeriesStore,
    printer: _Streamer,
) -> JobRow:
    """Feed the driver log's new bytes to PARSER until the job ends, then its last bytes; returns the
    ended job. A quiet stream gives out the step being assembled."""
    from cockpit.core.cluster.errors import DashboardError
    from cockpit.core.errors import CockpitError, is_permanent

    queue: asyncio.Queue[bytes] = asyncio.Queue(maxsize=64)  # back-pressure on the stream

    async def pump() -> None:
        async for chunk in tail.chunks():
            await queue.put(chunk)

    async def status() -> JobRow:
        current = job
        while not current.terminal:
            await asyncio.sleep(STATUS_EVERY_S)
            try:
                current = await client.job(job.key)
            except DashboardError as exc:
                if is_permanent(exc):  # the one rule: a refusal ends the follow, a drop is ridden out
                    raise
        return current

    def take(chunk: bytes) -> None:
        printer.new(store.extend(parser.feed(chunk)))

    pumper, watcher = asyncio.ensure_future(pump()), asyncio.ensure_future(status())
    getter: asyncio.Future[bytes] | None = None
    waited: set[asyncio.Future[object]]
    try:
        while True:
            if getter is None:
                getter = asyncio.ensure_future(queue.get())
            waited = {getter, pumper, watcher}  # type: ignore[arg-type]
            done, _ = await asyncio.wait(waited, timeout=QUIET_S, return_when=asyncio.FIRST_COMPLETED)
            if getter in done:
                take(getter.result())
                getter = None
            elif pumper in done:
                pumper.result()  # the stream broke for good (a retry gave up): raise why
                raise CockpitError(f"the stream of {job.key}'s driver log ended.")  # it never ends
            elif watcher in done:
                break
            else:
                printer.quiet()
    finally:
        for task in (getter, pumper, watcher):
            if task is not None and not task.done():
                task.cancel()
        await _settle(getter, pumper, watcher)
    while not queue.empty():
        take(queue.get_nowait())
    # The stream looks for new bytes about once a second: read what it had not sent yet.
    async for chunk in tail.rest():
        take(chunk)
    return await watcher


async def _settle(*tasks: Awaitable[object] | None) -> None:
    """Wait for cancelled tasks to unwind (a finished one's outcome is read again later where it matters)."""
    for task in tasks:
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
