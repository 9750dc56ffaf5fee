"""Provides the actor-table benchmark: 100,000 actors, the cockpit's `ActorTableView` vs Textual's DataTable.

Each variant runs alone in a fresh process (`python bench/actor_table.py --child VARIANT`), headless
(`run_test`, 200x50). The rows are a seeded synthetic RL cluster: 100,000 actors of eight classes
(RolloutWorker, vLLMHttpServer, ActorRolloutRefWorker, PolicyTrainer, Critic, RewardModelWorker,
EnvWorker, SingleAgentEnvRunner) on 1,024 nodes `gpu-0000` to `gpu-1023`, mostly ALIVE, some DEAD with a
death cause, some PENDING_CREATION (not placed) and RESTARTING, with pids, GPU requests, restarts and
eight jobs, as `ActorView`s with their role (`role_of`), host and start time.

Variants:
- `index`: `ActorIndex.build(rows)` alone, as the feed thread runs it (off the UI thread in the app): the
  search texts and the screen's current sort (by state here).
- `table`: `ActorTableView` in a bare app. **First paint**: a fresh view and a fresh index (built
  untimed, as the feed built it), then `view.show(index, index.order(parse_query(""), "state"))`
  and the frame that follows (`await pilot.pause()`), timed together. **Filter keystroke**: for each
  prefix of the filter texts in `FILTERS` (one character more each time), `index.order(parse_query(
  prefix), "state")` + `show` + the frame; the filter is cleared (untimed) between texts. **Sort**: every
  column of `SORT_COLUMNS` once per sweep, the index's sort cache cleared before each (cold; the id order
  every sort starts from is kept, as the feed made it), unfiltered: `order` + `show` + the frame.
  **Scroll**: `pagedown` pressed 20 times (`pilot.press` + the frame).
- `datatable`: Textual's `DataTable` in a bare app, given the same rows as the same strings the cockpit
  draws (formatted untimed, beforehand, which favours it). First paint: `add_column` x 12 (with keys, for
  `sort`) + `add_rows` + the frame. Filter keystroke: the cheapest honest way it offers, `clear()` +
  `add_rows(matching)`, the matching rows picked by the cockpit's own `ActorIndex.order` (timed; tens
  of ms), the same 40 keystrokes (about 5 min), with --quick only the 8 of "gpu-0042"; the table is not
  refilled between texts (the first keystroke of each matches every row anyway). Sort:
  `DataTable.sort(column)` (string order) on the 100,000 rows, for the same columns. Scroll: as above.

Measured per operation: CPU time of the process (headless: the UI thread) and wall time; p50, p95, max.
The wall time includes the harness's own waits for idle: about 20 ms in `pilot.pause()`, about 60 ms
more in `pilot.press` (measured alone: `idle_wall`, and the scroll's wall minus its CPU). After each
timed frame one more `pilot.pause()` (untimed) records the CPU left over ("spill": work the frame
queued but the timed pause did not wait for; near zero means nothing was left out). Every frame counts
the rows it rendered (`render_line`), and each keystroke records how many rows matched, so a fast frame
that drew nothing, or a DataTable holding other rows than the cockpit, shows in the JSON. The app's GC
settings (`tune_gc()`) apply to every variant; a `gc.collect()` after each untimed preparation keeps its
garbage out of the timed window. RSS: the child's peak (`ru_maxrss`).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import resource
import sys
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from common import PYTHON, REPO, Row, ratio, rss_mib, run_child, tail

NAME = "actor_table"
SIZE = (200, 50)
ACTORS, NODES = 100_000, 1024
SEED = 11
T0 = 1_795_642_346.0
"""The cluster's clock (the same as `tests/harness/synthetic.py`): ages are the same on every run."""
VARIANTS = ("index", "table", "datatable")
FILTERS = ("rollout_12", "role:critic state:DEAD", "gpu-0042")
"""Typed one character at a time: a free word, two key terms, a host name (40 keystrokes)."""
FILTERS_QUICK_DATATABLE = ("gpu-0042",)
"""The DataTable's keystrokes with --quick: 8 of the 40 (five match 96-100% of the rows), about 2 min."""
SCROLL_PAGES = 20
TARGET_FIRST_PAINT_S = 0.100
TARGET_KEYSTROKE_P95_S = 0.050
COLUMNS = (
    ("id", "Actor"),
    ("class", "Class"),
    ("name", "Name"),
    ("role", "Role"),
    ("state", "State"),
    ("node", "Node"),
    ("pid", "PID"),
    ("gpus", "GPUs"),
    ("restarts", "Rst"),
    ("job", "Job"),
    ("age", "Age"),
    ("death", "Death cause"),
)
"""The DataTable's columns: the cockpit's at 200 columns (where it shows all twelve)."""

CLASSES = (
    # class, share, name prefix, GPUs asked for
    ("RolloutWorker", 0.28, "rollout", 1.0),
    ("vLLMHttpServer", 0.08, "vllm_server", 1.0),
    ("ActorRolloutRefWorker", 0.16, "actor_rollout_ref", 1.0),
    ("PolicyTrainer", 0.08, "trainer", 1.0),
    ("Critic", 0.06, "critic", 1.0),
    ("RewardModelWorker", 0.06, "reward", 0.5),
    ("EnvWorker", 0.16, "env", 0.0),
    ("SingleAgentEnvRunner", 0.12, "env_runner", 0.0),
)
STATES, STATE_SHARES = ("ALIVE", "DEAD", "PENDING_CREATION", "RESTARTING"), (0.90, 0.075, 0.02, 0.005)
DEATH_CAUSES = (
    "The actor died unexpectedly before finishing this task. Worker exit type: SYSTEM_ERROR. Worker exit "
    "detail: Worker unexpectedly exits with a connection error code 2. End of file.",
    "The actor is dead because it was killed by `ray.kill`.",
    "The actor died because its node has died. Node Id: {node}. The node was terminated: the health check "
    "failed due to missing too many heartbeats.",
    "Task was killed due to the node running low on memory. Memory on the node (IP: {ip}) where the task "
    "was running was 1910.32GB / 2015.12GB (0.948), which exceeds the memory usage threshold of 0.95.",
    "The actor's owner has died or the actor was deleted by its owner (the job ended).",
)


Timed = Callable[..., Awaitable[None]]
"""`timed(kind, action, **extra)`: ACTION and the frame after it, timed and recorded under KIND."""
Settle = Callable[[], Awaitable[None]]


def synthetic_actor_views(count: int = ACTORS, nodes: int = NODES, seed: int = SEED) -> list[Any]:
    """COUNT seeded `ActorView`s of an RL run on NODES nodes."""
    sys.path.insert(0, str(REPO))
    from cockpit.core.actors.listing import ActorView
    from cockpit.core.actors.roles import role_of
    from cockpit.core.snapshots import ActorRow

    rng = random.Random(seed)
    hosts = [
        (f"{n:04x}{rng.getrandbits(208):052x}", f"gpu-{n:04d}", f"10.{n // 250}.{n % 250}.7")
        for n in range(nodes)
    ]
    jobs = [f"{j:02x}000000" for j in range(1, 9)]
    weights = [share for _, share, _, _ in CLASSES]
    counters = dict.fromkeys((c for c, *_ in CLASSES), 0)
    views = []
    for _ in range(count):
        cls, _share, prefix, gpus = rng.choices(CLASSES, weights)[0]
        number = counters[cls]
        counters[cls] += 1
        state = rng.choices(STATES, STATE_SHARES)[0]
        node_id, host, ip = hosts[rng.randrange(nodes)] if state != "PENDING_CREATION" else ("", "", "")
        name = f"{prefix}_{number}" if rng.random() < 0.9 else ""
        actor = ActorRow(
            actor_id=f"{rng.getrandbits(128):032x}",
            class_name=cls,
            name=name,
            state=state,
            job_id=rng.choice(jobs),
            node_id=node_id,
            pid=rng.randrange(1_000, 4_000_000) if state in ("ALIVE", "RESTARTING") else None,
            num_restarts=rng.choice((1, 1, 2, 3)) if rng.random() < 0.04 or state == "RESTARTING" else 0,
            required_resources={"CPU": 1.0, "GPU": gpus} if gpus else {"CPU": 1.0},
            death_cause=rng.choice(DEATH_CAUSES).format(node=node_id, ip=ip) if state == "DEAD" else "",
            repr_name="" if name else f"{cls}(rank={number})",
        )
        started = T0 - rng.uniform(60, 3 * 86_400) if actor.pid else None
        views.append(ActorView(actor=actor, role=role_of(cls, name) or None, host=host, started=started))
    return views


def _child(variant: str, rounds: int, sweeps: int, filters: tuple[str, ...] = FILTERS) -> dict[str, Any]:
    sys.path.insert(0, str(REPO))
    from textual.app import App, ComposeResult
    from textual.pilot import Pilot
    from textual.strip import Strip
    from textual.widgets import DataTable

    from cockpit.core.actors.listing import ActorView, parse_query
    from cockpit.core.actors.table import SORT_COLUMNS, ActorIndex
    from cockpit.ui.app import tune_gc
    from cockpit.ui.widgets.actor_table import SHORT_STATES, ActorTableView, age_cell, gpu_cell

    load = os.getloadavg()
    tune_gc()  # the app's GC settings (gc.freeze of what is alive now, rarer young passes)
    rss_before_rows = rss_mib()
    rows = synthetic_actor_views()
    gc.collect()
    rss_rows = rss_mib() - rss_before_rows

    if variant == "index":
        walls, cpus, rss_index = [], [], 0.0
        for _ in range(rounds):
            gc.collect()
            before = rss_mib()
            wall, cpu = time.perf_counter(), time.process_time()
            index = ActorIndex.build(rows)
            cpus.append(time.process_time() - cpu)
            walls.append(time.perf_counter() - wall)
            rss_index = max(rss_index, rss_mib() - before)  # the first: later ones reuse freed memory
            del index
        return {
            "variant": variant,
            "rows": len(rows),
            "load": [load, os.getloadavg()],
            "rss_rows_mib": rss_rows,
            "rss_index_mib": rss_index,
            "cpu": tail(cpus),
            "wall": tail(walls),
            **_rss(),
        }

    drawn = [0]

    class CountedView(ActorTableView):
        def render_line(self, y: int) -> Strip:
            drawn[0] += 1
            return super().render_line(y)

    class CountedTable(DataTable[str]):
        def render_line(self, y: int) -> Strip:
            drawn[0] += 1
            return super().render_line(y)

    class Bench(App[None]):
        CSS = "ActorTableView, DataTable { height: 1fr; }"

        def compose(self) -> ComposeResult:
            return iter(())

    samples: dict[str, list[dict[str, Any]]] = {"first_paint": [], "keystroke": [], "sort": [], "scroll": []}

    async def drive() -> dict[str, Any]:
        app = Bench()
        async with app.run_test(size=SIZE) as pilot:

            async def timed(kind: str, action: Callable[[], Any], **extra: Any) -> None:
                """ACTION and the frame that follows, timed; then the spill, untimed. An int that ACTION
                returns is recorded as the number of rows it matched."""
                drawn[0] = 0
                wall, cpu = time.perf_counter(), time.process_time()
                result = action()
                if asyncio.iscoroutine(result):
                    result = await result
                await pilot.pause()
                took_cpu, took_wall = time.process_time() - cpu, time.perf_counter() - wall
                lines = drawn[0]
                spill = time.process_time()
                await pilot.pause()
                samples[kind].append(
                    {
                        "cpu": took_cpu,
                        "wall": took_wall,
                        "spill_cpu": time.process_time() - spill,
                        "lines": lines,
                        **({"matched": result} if isinstance(result, int) else {}),
                        **extra,
                    }
                )

            async def settle() -> None:
                await pilot.pause()
                await pilot.pause()
                gc.collect()

            idle_cpu, idle_wall = [], []
            await settle()
            for _ in range(10):
                wall, cpu = time.perf_counter(), time.process_time()
                await pilot.pause()
                idle_wall.append(time.perf_counter() - wall)
                idle_cpu.append(time.process_time() - cpu)

            if variant == "table":
                await table_phases(app, pilot, timed, settle)
            else:
                await datatable_phases(app, pilot, timed, settle)
            return {
                "variant": variant,
                "rows": len(rows),
                "filters": filters,
                "load": [load, os.getloadavg()],
                "idle_cpu": tail(idle_cpu),
                "idle_wall": tail(idle_wall),
                **{kind: _phase(items) for kind, items in samples.items()},
                "samples": samples,
                **_rss(),
            }

    async def table_phases(app: App[None], pilot: Pilot[None], timed: Timed, settle: Settle) -> None:
        empty = parse_query("")
        view: CountedView | None = None
        index: ActorIndex | None = None
        for _ in range(rounds):
            if view is not None:
                await view.remove()
            view, index = CountedView(), None
            await app.mount(view)
            view.focus()
            index = ActorIndex.build(rows)  # on the feed thread in the app: not timed here
            await settle()
            await timed("first_paint", partial(_sort, view, index, "state"))
        assert view is not None and index is not None
        for text in filters:
            for end in range(1, len(text) + 1):
                await timed("keystroke", partial(_keystroke, view, index, text[:end]), text=text[:end])
            view.show(index, index.order(empty, "state"), now=T0)  # the filter cleared
            await settle()
        for _ in range(sweeps):
            for column in SORT_COLUMNS:
                # Cold: as the first time a column is chosen for this fetch (the id order, which
                # every sort starts from, was made with the index on the feed thread).
                index._sorted = {k: v for k, v in index._sorted.items() if k == ("id", False)}
                await settle()
                await timed("sort", partial(_sort, view, index, column), column=column)
        view.show(index, index.order(empty, "state"), now=T0)
        view.action_jump(0)
        await settle()
        for _ in range(SCROLL_PAGES):
            await timed("scroll", partial(pilot.press, "pagedown"))

    def _keystroke(view: ActorTableView, index: ActorIndex, typed: str) -> int:
        order = index.order(parse_query(typed), "state")
        view.show(index, order, now=T0)
        return len(order)

    def _sort(view: ActorTableView, index: ActorIndex, column: str) -> None:
        """`s` on the Actors screen (and the first paint, by state): the order, then the view."""
        view.show(index, index.order(parse_query(""), column), now=T0)

    def strings_of(view: ActorView) -> tuple[str, ...]:
        """The cells the cockpit draws for VIEW at 200 columns (before it cuts them to width)."""
        actor = view.actor
        return (
            actor.actor_id[:8],
            actor.class_name.rsplit(".", 1)[-1],
            actor.name or actor.repr_name,
            view.role or "-",
            SHORT_STATES.get(actor.state, actor.state),
            view.host or (actor.node_id[:8] or "-"),
            str(actor.pid) if actor.pid else "",
            gpu_cell(view, {}, {}, 18),
            str(actor.num_restarts) if actor.num_restarts else "",
            actor.job_id,
            age_cell(view, T0),
            actor.death_cause if actor.state == "DEAD" else "",
        )

    async def datatable_phases(app: App[None], pilot: Pilot[None], timed: Timed, settle: Settle) -> None:
        cells = [strings_of(view) for view in rows]
        index = ActorIndex.build(rows)  # picks the rows a keystroke matches: the cockpit's rows, in its order
        full = [cells[i] for i in index.order(parse_query(""), "state")]
        table: CountedTable | None = None
        for _ in range(rounds):
            if table is not None:
                await table.remove()
            table = CountedTable()
            await app.mount(table)
            table.focus()
            await settle()
            await timed("first_paint", partial(_fill, table, full, columns=True))
        assert table is not None
        for text in filters:
            for end in range(1, len(text) + 1):
                await timed("keystroke", partial(_refill, table, index, cells, text[:end]), text=text[:end])
        _fill(table, full)  # the filter cleared (once: refilling 100,000 rows between texts costs ~20 s)
        await settle()
        for _ in range(sweeps):
            for column in SORT_COLUMNS:
                await settle()
                await timed("sort", partial(table.sort, column), column=column)
        table.sort("state")
        table.move_cursor(row=0)
        await settle()
        for _ in range(SCROLL_PAGES):
            await timed("scroll", partial(pilot.press, "pagedown"))

    def _fill(table: DataTable[str], rows: list[tuple[str, ...]], columns: bool = False) -> int:
        if columns:
            for key, label in COLUMNS:
                table.add_column(label, key=key)
        else:
            table.clear()
        table.add_rows(rows)
        return len(rows)

    def _refill(table: DataTable[str], index: ActorIndex, cells: list[tuple[str, ...]], typed: str) -> int:
        """A filter keystroke the DataTable way: clear, then add the rows that match."""
        return _fill(table, [cells[i] for i in index.order(parse_query(typed), "state")])

    return asyncio.run(drive())


def _phase(items: list[dict[str, Any]]) -> dict[str, Any]:
    if not items:
        return {}
    return {
        "cpu": tail([s["cpu"] for s in items]),
        "wall": tail([s["wall"] for s in items]),
        "spill_cpu_max": max(s["spill_cpu"] for s in items),
        "lines_min": min(s["lines"] for s in items),
    }


def _rss() -> dict[str, float]:
    return {"max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _measure(variant: str, rounds: int, sweeps: int, filters: tuple[str, ...] = FILTERS) -> dict[str, Any]:
    command = [PYTHON, str(REPO / "bench" / "actor_table.py"), "--child", variant]
    options = ["--rounds", str(rounds), "--sweeps", str(sweeps), *(f"--filter={f}" for f in filters)]
    return run_child([*command, *options], timeout=1800)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f}" if seconds < 10 else f"{seconds * 1000:,.0f}"


def _spread(phase: dict[str, Any]) -> str:
    cpu, wall = phase["cpu"], phase["wall"]
    return f"max {_ms(cpu['max'])} ms; wall p50 {_ms(wall['p50'])}, p95 {_ms(wall['p95'])} ms; n={cpu['n']}"


def run(quick: bool) -> tuple[dict[str, Any], list[Row]]:
    """The three variants, one after the other, each in its own process. --quick: fewer first paints and
    sorts, and the DataTable types one filter (8 keystrokes) instead of three (40); 100,000 rows for both."""
    plan = {  # first paints (index: builds), sort sweeps, filter texts
        "index": (3 if quick else 10, 0, FILTERS),
        "table": (3 if quick else 10, 1 if quick else 3, FILTERS),
        "datatable": (1 if quick else 3, 1, FILTERS_QUICK_DATATABLE if quick else FILTERS),
    }
    results = {variant: _measure(variant, *plan[variant]) for variant in VARIANTS}
    index, table, baseline = results["index"], results["table"], results["datatable"]
    rows = [
        Row(
            NAME,
            "ActorIndex.build, 100k rows (feed thread): CPU p50 / p95",
            f"{_ms(index['cpu']['p50'])} / {_ms(index['cpu']['p95'])} ms",
            f"max {_ms(index['cpu']['max'])} ms; n={index['cpu']['n']}",
        )
    ]
    for phase, what, target in (
        ("first_paint", "first paint", TARGET_FIRST_PAINT_S),
        ("keystroke", "filter keystroke", TARGET_KEYSTROKE_P95_S),
        ("sort", "sort", None),
        ("scroll", "scroll (pagedown)", None),
    ):
        ours, theirs = table[phase], baseline[phase]
        paired, over = ours["cpu"], ""
        if phase == "keystroke" and baseline["filters"] != table["filters"]:
            # --quick: the DataTable typed fewer texts; compare over the keystrokes both made
            typed = [
                s
                for s in table["samples"][phase]
                if any(f.startswith(s["text"]) for f in baseline["filters"])
            ]
            paired, over = tail([s["cpu"] for s in typed]), f" over the same {len(typed)} keystrokes"
        detail = (
            f"{_spread(ours)}; DataTable/this{over}: p50 {ratio(theirs['cpu']['p50'], paired['p50']):,.0f}x, "
            f"p95 {ratio(theirs['cpu']['p95'], paired['p95']):,.0f}x"
        )
        if target is not None:
            met = "met" if ours["cpu"]["p95"] <= target else "MISSED"
            detail += f"; target p95 <= {target * 1000:.0f} ms: {met}"
        rows.append(
            Row(
                NAME,
                f"ActorTableView, {what}: CPU p50 / p95",
                f"{_ms(ours['cpu']['p50'])} / {_ms(ours['cpu']['p95'])} ms",
                detail,
            )
        )
        typed = f"; typed {', '.join(baseline['filters'])}" if phase == "keystroke" else ""
        rows.append(
            Row(
                NAME,
                f"DataTable, {what}: CPU p50 / p95",
                f"{_ms(theirs['cpu']['p50'])} / {_ms(theirs['cpu']['p95'])} ms",
                _spread(theirs) + typed,
            )
        )
    rows.append(
        Row(
            NAME,
            "peak RSS: ActorTableView / DataTable (whole process)",
            f"{table['max_rss_mib']:.0f} / {baseline['max_rss_mib']:.0f} MiB",
            f"of which the 100,000 rows {index['rss_rows_mib']:.0f} MiB, "
            f"an index {index['rss_index_mib']:.0f} MiB; "
            f"load average {table['load'][0][0]:.2f} to {baseline['load'][1][0]:.2f}",
        )
    )
    return results, rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--child", choices=VARIANTS, help="run one variant and print its JSON")
    parser.add_argument("--rounds", type=int, default=10, help="first paints (index: builds)")
    parser.add_argument("--sweeps", type=int, default=3, help="cold sorts of every column")
    parser.add_argument("--filter", action="append", help=f"a filter text to type (default: {FILTERS})")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.child, args.rounds, args.sweeps, tuple(args.filter or FILTERS))))
        return 0
    results, rows = run(args.quick)
    for row in rows:
        print(f"{row.what:60} {row.value:22} {row.detail}")
    print(json.dumps(results, indent=2), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
