"""Provides the GPU-view benchmark: one refresh of a 1,024 x 8 cluster, the cockpit's views vs DataTable.

Each variant runs alone in a fresh process (`python bench/gpu_view.py --child VARIANT`), headless
(`run_test`, 200x50). Before each refresh a new fleet of a seeded synthetic cluster (1,024 nodes x 8
GPUs, every reading changed) is built with `GpuBoard` as the poller builds it, but on the same thread
and outside the timed window (in the app it is built on the poll thread; GC passes it triggers and
GIL contention with it are not in the figures: see BENCHMARKS.md). Only it and the shown fleet stay
alive, as in the app. One refresh, timed = what a poll's arrival does on the UI thread (the new fleet,
then the visible screen's `refresh_view`: totals, notice, the view's update) plus the frame that
follows: `await pilot.pause()` processes what the update queued (DataTable measures new rows on idle)
and composes the screen (`render_line` of every visible row). Measured per refresh: CPU time of the
process (the UI thread: a headless app has no input thread) and wall time: p50, p95, max.

Variants: the real `CockpitApp` on its GPU screen (poller disabled) as `list` (grouped by node),
`list-by-util`, `list-filtered` (filter "gpu-01": 100 nodes) and `heatmap`; `datatable` (Textual's
DataTable in a bare app with a totals line, one keyed row per GPU refreshed in place with `update_cell`
for the four changing columns, the cheapest way it offers); `datatable-rebuild` (`clear()` then
`add_rows`); and `board`: the poll-side build alone. `--no-tune-gc` keeps CPython's GC defaults (the
app calls `tune_gc()`). The harness alone (`pilot.pause()` with nothing changed) is reported too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from common import PYTHON, REPO, Row, ratio, run_child, tail

NAME = "gpu_view"
SIZE = (200, 50)
NODES, GPUS = 1024, 8
VARIANTS = ("list", "list-by-util", "list-filtered", "heatmap", "datatable", "datatable-rebuild", "board")
LABELS = {
    "list": "GPU screen, list by node",
    "list-by-util": "GPU screen, list by utilization",
    "list-filtered": "GPU screen, list filtered to 100 nodes",
    "heatmap": "GPU screen, heatmap",
    "datatable": "DataTable, update_cell",
    "datatable-rebuild": "DataTable, clear + add_rows",
    "board": "GpuBoard build (poll thread)",
}
SCREEN_VARIANTS = ("list", "list-by-util", "list-filtered", "heatmap")
TARGET_P95_S = 1 / 60
"""One 60 fps frame."""


def _child(variant: str, rounds: int, tune: bool = True) -> dict[str, Any]:
    sys.path.insert(0, str(REPO))
    from rich.text import Text
    from textual.app import App, ComposeResult
    from textual.widgets import DataTable, Static

    import cockpit.ui.app as app_module
    from cockpit.core.gpu.board import GpuBoard, GpuFleet
    from cockpit.core.targets import parse_target
    from cockpit.ui.screens.gpus import GpuScreen
    from cockpit.ui.state import StateChanged
    from cockpit.ui.widgets import gpu_cells as cells
    from tests.harness.synthetic import T0, synthetic_actors, synthetic_nodes

    if not tune:
        app_module.tune_gc = lambda: None  # CockpitApp.on_mount calls it: the GC's defaults stay
    app_module.tune_gc()  # the app's GC settings from the start (again once the app is up: no-op)
    board_cpu: list[float] = []

    def next_fleet(board: GpuBoard, step: int) -> GpuFleet:
        """The fleet of poll `step`, built as the poller does (only it and the shown one stay alive,
        as in the app, so garbage collection sees a realistic heap)."""
        nodes = synthetic_nodes(NODES, GPUS, step=step, now=T0 + 5 * step)
        started = time.process_time()
        board.ingest_nodes(nodes, job_running=True, local_time=T0 + 5 * step, poll=step)
        fleet = board.fleet()
        board_cpu.append(time.process_time() - started)
        return fleet

    if variant == "board":
        board = GpuBoard()
        board.ingest_actors(synthetic_actors(synthetic_nodes(NODES, GPUS)))
        for step in range(rounds):
            next_fleet(board, step)
        return {"variant": variant, "cpu": tail(board_cpu), "wall": tail(board_cpu)}

    columns = ("node", "gpu", "util", "memory", "power", "temp", "age", "actors")

    def cells_of(fleet: GpuFleet, index: int) -> tuple[str, ...]:
        row = fleet.rows[index]
        gpu = row.gpu
        if gpu is None:
            return (row.node.hostname, str(row.gpu_index), "no telemetry", "", "", "", "", "")
        return (
            row.node.hostname,
            str(row.gpu_index),
            cells.util_text(gpu.utilization),
            cells.memory(gpu.memory_used_mib, gpu.memory_total_mib),
            cells.watts(gpu.power_w),
            cells.celsius(gpu.temperature_c),
            cells.age(fleet.age(row, fleet.built_at)),
            ", ".join(a.label for a in fleet.actors_on(row)),
        )

    class CockpitBench(app_module.CockpitApp):
        """The real app on its GPU screen, without the poller: the benchmark hands it the fleets."""

        CSS_PATH = str(Path(app_module.__file__).with_name("app.tcss"))  # relative to the class's module

        def show(self, fleet: GpuFleet) -> None:
            """What a poll's arrival does: the new fleet into the state, then the screen on view."""
            self.state.gpu_fleet = fleet
            self._state_changed(StateChanged("gpus", "snapshot"))

    class TableBench(App[None]):
        CSS = "DataTable { height: 1fr; } #totals { height: 1; }"
        gpu_board = GpuBoard()

        def compose(self) -> ComposeResult:
            yield Static(id="totals")
            yield DataTable()

        def show(self, fleet: GpuFleet) -> None:
            totals = fleet.totals
            self.query_one("#totals", Static).update(
                Text(f"{totals.gpus} GPUs · {cells.util_text(totals.mean_utilization)} · {totals.idle} idle")
            )
            table = self.query_one(DataTable)
            if variant == "datatable":
                for index, row in enumerate(fleet.rows):
                    values = cells_of(fleet, index)
                    for column in (2, 3, 4, 6):
                        table.update_cell(row.key, columns[column], values[column])
            else:
                table.clear()
                table.add_rows([cells_of(fleet, i) for i in range(len(fleet.rows))])

    async def drive() -> dict[str, Any]:
        app: CockpitBench | TableBench
        app = (
            TableBench()
            if variant.startswith("datatable")
            else CockpitBench(parse_target("local"), offline=True)
        )
        async with app.run_test(size=SIZE) as pilot:
            board = app.state.gpu_board if isinstance(app, CockpitBench) else app.gpu_board
            board.ingest_actors(synthetic_actors(synthetic_nodes(NODES, GPUS)))
            first = next_fleet(board, 0)
            if isinstance(app, TableBench):
                table = app.query_one(DataTable)
                for column in columns:
                    table.add_column(column, key=column)
                for index, row in enumerate(first.rows):
                    table.add_row(*cells_of(first, index), key=row.key)
            else:
                await app.switch_mode("gpus")
                screen = app.screen
                assert isinstance(screen, GpuScreen)
                app.show(first)
                screen._set_view("heatmap" if variant == "heatmap" else "list")
                screen.sort = "util" if variant == "list-by-util" else "node"
                screen.node_filter = "gpu-01" if variant == "list-filtered" else ""
            app.show(first)
            rows = len(first.rows)
            del first
            await pilot.pause()
            idle_wall: list[float] = []
            idle_cpu: list[float] = []
            for _ in range(10):
                wall, cpu = time.perf_counter(), time.process_time()
                await pilot.pause()
                idle_wall.append(time.perf_counter() - wall)
                idle_cpu.append(time.process_time() - cpu)
            walls: list[float] = []
            cpus: list[float] = []
            for step in range(1, rounds + 2):
                fleet = next_fleet(board, step)
                wall, cpu = time.perf_counter(), time.process_time()
                app.show(fleet)
                await pilot.pause()
                if step > 1:  # the first refresh after the warm-up is not counted
                    walls.append(time.perf_counter() - wall)
                    cpus.append(time.process_time() - cpu)
            return {
                "variant": variant,
                "rows": rows,
                "tune_gc": tune,
                "cpu": tail(cpus),
                "wall": tail(walls),
                "idle_cpu": tail(idle_cpu),
                "idle_wall": tail(idle_wall),
            }

    return asyncio.run(drive())


def _measure(variant: str, rounds: int, tune: bool = True) -> dict[str, Any]:
    command = [PYTHON, str(REPO / "bench" / "gpu_view.py"), "--child", variant, "--rounds", str(rounds)]
    return run_child([*command, *([] if tune else ["--no-tune-gc"])], timeout=1800)


def run(quick: bool, tune: bool = True) -> tuple[dict[str, Any], list[Row]]:
    fast_rounds = 20 if quick else 60
    slow_rounds = 3 if quick else 10
    results = {
        variant: _measure(variant, slow_rounds if variant.startswith("datatable") else fast_rounds, tune)
        for variant in VARIANTS
    }
    rows: list[Row] = []
    best_table = min(results["datatable"]["cpu"]["p95"], results["datatable-rebuild"]["cpu"]["p95"])
    for variant in VARIANTS:
        cpu, wall = results[variant]["cpu"], results[variant]["wall"]
        detail = (
            f"max {cpu['max'] * 1000:.1f} ms; wall p50 {wall['p50'] * 1000:.1f}, "
            f"p95 {wall['p95'] * 1000:.1f} ms; n={cpu['n']}"
        )
        if variant in SCREEN_VARIANTS:
            met = "met" if cpu["p95"] <= TARGET_P95_S else "MISSED"
            detail += (
                f"; DataTable/this at p95: {ratio(best_table, cpu['p95']):.0f}x; "
                f"target p95 <= {TARGET_P95_S * 1000:.1f} ms: {met}"
            )
        if "idle_cpu" in results[variant]:
            idle = results[variant]
            detail += (
                f"; harness alone {idle['idle_cpu']['p50'] * 1000:.2f} ms CPU, "
                f"{idle['idle_wall']['p50'] * 1000:.1f} ms wall"
            )
        rows.append(
            Row(
                NAME,
                f"{LABELS[variant]}: CPU per refresh p50 / p95",
                f"{cpu['p50'] * 1000:.1f} / {cpu['p95'] * 1000:.1f} ms",
                detail,
            )
        )
    return results, rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--child", choices=VARIANTS, help="run one measured app and print its JSON")
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--no-tune-gc", action="store_true", help="CPython's GC defaults instead of the app's tune_gc()"
    )
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.child, args.rounds, tune=not args.no_tune_gc)))
        return 0
    results, rows = run(args.quick, tune=not args.no_tune_gc)
    for row in rows:
        print(f"{row.what:60} {row.value:22} {row.detail}")
    print(json.dumps(results, indent=2), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
