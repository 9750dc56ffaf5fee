"""Provides the `cockpit stacks` benchmark: every worker's stack of a 41-process job, grouped, against
`py-spy dump --pid` run once per pid in sequence (what people do today), in the same run.

A job submitted through the Jobs API starts 40 num_cpus=0 actors spread over the cluster's nodes (real
Ray worker processes, one each) and blocks in `ray.get` in its driver:
- 1 rollout worker blocked in `wait_for_weights_sync` (a sleep loop),
- 8 rollout workers waiting in `all_gather_weights` (`ray.get` on the first one's result),
- 4 trainers in `train_step` (a sleep loop),
- 27 rollout workers idle in Ray's task loop,
so the grouped answer has five groups (with the driver's). Once `select` finds the driver and the 40
actors alive with pids and one `take` shows the three busy groups (the warm-up), rounds of four ways to
the same stacks, the order rotated every round:

- `select` + `take` in this process, on one open connection (what the TUI's run doctor does);
- `cockpit stacks local --job ID --json` as a whole process (Python start-up and connection included);
- `py-spy dump --pid P` for each of the same pids, one after the other (a shell loop: text output);
- the same with `--json`.

Per call: wall time, and the CPU time of this process and of every child it waited for (py-spy, the
cockpit's per-node programs, the `cockpit stacks` process): on a machine with few cores the CPU, not
the parallelism, sets how fast all the dumps can be. Every answer is checked: the grouped ones hold
every pid with no failure, each py-spy run exited 0, so that a fast failure can never pass for a fast
answer. The baselines are given the pids; finding them (`ray list actors`, the job's driver) is not
timed, and they run on this machine, without the SSH a real cluster's other nodes would need.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from common import BIN, PYTHON, Row, bench_env, percentile, ratio, tail, timed_run

from cockpit.core.connection import Connection, ConnectOptions, open_connection
from cockpit.core.local.record import LocalCluster
from cockpit.core.stack_gather import NODE_PARALLEL, Selection, SelectionError, select, take
from cockpit.core.stacks import StackGroup, StacksReport
from cockpit.core.targets import parse_target

NAME = "stacks"
ACTORS = {"hung": 1, "gathering": 8, "training": 4, "idle": 27}
BUSY = ("wait_for_weights_sync", "all_gather_weights", "train_step")
"""The functions the busy groups are blocked in: the warm-up waits until each shows in a group."""

DRIVER = """
import time
import ray

ray.init(logging_level="ERROR")
SPREAD = {{"num_cpus": 0, "scheduling_strategy": "SPREAD"}}


@ray.remote(**SPREAD)
class BenchRolloutWorker:
    def wait_for_weights_sync(self):
        while True:
            time.sleep(0.5)

    def all_gather_weights(self, refs):
        return ray.get(refs[0])

    def ping(self):
        return True


@ray.remote(**SPREAD)
class BenchTrainer:
    def train_step(self):
        while True:
            time.sleep(0.5)

    def ping(self):
        return True


rollouts = [BenchRolloutWorker.options(name=f"rollout_{{i}}").remote() for i in range({rollouts})]
trainers = [BenchTrainer.options(name=f"trainer_{{i}}").remote() for i in range({trainers})]
ray.get([a.ping.remote() for a in rollouts + trainers])
sync = rollouts[0].wait_for_weights_sync.remote()
gathers = [a.all_gather_weights.remote([sync]) for a in rollouts[1 : 1 + {gathering}]]
steps = [t.train_step.remote() for t in trainers]
print("ready", flush=True)
ray.get(gathers + steps)
"""


@contextlib.contextmanager
def _state_dir(state_dir: Path) -> Iterator[None]:
    """`local` resolves to the benchmark's own cluster in this process too (never the developer's)."""
    before = os.environ.get("COCKPIT_STATE_DIR")
    os.environ["COCKPIT_STATE_DIR"] = str(state_dir)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("COCKPIT_STATE_DIR", None)
        else:
            os.environ["COCKPIT_STATE_DIR"] = before


def _functions(group: StackGroup) -> set[str]:
    return {frame.function.rsplit(".", 1)[-1] for t in group.stack.threads for frame in t.frames}


def _check_report(report: StacksReport, pids: set[int]) -> None:
    got = [m.pid for g in report.groups for m in g.members]
    if report.failures or report.missing_nodes or sorted(got) != sorted(pids):
        raise RuntimeError(
            f"the grouped answer held {len(got)} of {len(pids)} pids: failures {report.failures[:3]}, "
            f"missing nodes {report.missing_nodes}, pids not there {sorted(pids - set(got))[:5]}"
        )


def _check_cli(out: str, pids: set[int]) -> int:
    doc = json.loads(out)
    got = [m["pid"] for g in doc["groups"] for m in g["members"]]
    if doc["failures"] or doc["missing_nodes"] or sorted(got) != sorted(pids):
        raise RuntimeError(
            f"`cockpit stacks` held {len(got)} of {len(pids)} pids: failures {doc['failures'][:3]}, "
            f"missing nodes {doc['missing_nodes']}"
        )
    return len(doc["groups"])


def _pyspy_loop(pids: list[int], as_json: bool) -> list[float]:
    """`for p in PIDS; do py-spy dump [--json] --pid $p; done`: the wall time of each run, in order."""
    took = []
    for pid in pids:
        argv = [str(BIN / "py-spy"), "dump", *(["--json"] if as_json else []), "--pid", str(pid)]
        started = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        took.append(time.perf_counter() - started)
        if proc.returncode != 0 or not proc.stdout.strip():
            raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()[-300:]}")
    return took


async def _until_ready(connection: Connection, job: str, expected: int, timeout: float = 300.0) -> Selection:
    """The job's selection once it holds the driver and every actor, and a `take` shows the busy groups."""
    started = time.monotonic()
    while True:
        try:
            selection: Selection | None = await select(connection.client, job=job)
        except SelectionError:  # the job is PENDING: no driver yet
            selection = None
        if selection is not None and len(selection.members) >= expected:
            report = await take(connection, selection, local=True)
            shown = set().union(*(_functions(g) for g in report.groups)) if report.groups else set()
            if all(f in shown for f in BUSY) and not report.failures:
                return selection
        if time.monotonic() - started > timeout:
            raise RuntimeError(
                f"job {job}: {len(selection.members) if selection else 0} of {expected} processes, "
                f"or the busy groups not shown, within {timeout:.0f} s"
            )
        await asyncio.sleep(2.0)


async def _measure(state_dir: Path, job: str, rounds: int) -> dict[str, Any]:
    expected = sum(ACTORS.values()) + 1  # and the driver
    env = bench_env(state_dir)
    cli = [str(BIN / "cockpit"), "stacks", "local", "--job", job, "--json"]
    async with open_connection(parse_target("local"), ConnectOptions()) as connection:
        waited_started = time.monotonic()
        selection = await _until_ready(connection, job, expected)
        ready_s = time.monotonic() - waited_started
        pids = sorted(m.pid for m in selection.members)
        wanted = set(pids)
        extra: dict[str, list[Any]] = {
            "select_s": [],
            "take_s": [],
            "first_stack_s": [],
            "groups": [],
            "cli_groups": [],
            "pyspy_text_per_pid_s": [],
            "pyspy_json_per_pid_s": [],
        }

        async def in_process() -> float:
            started = time.perf_counter()
            first: list[float] = []

            def seen(collector: Any) -> None:
                if collector.dumps and not first:
                    first.append(time.perf_counter() - started)

            chosen = await select(connection.client, job=job)
            selected = time.perf_counter()
            report = await take(connection, chosen, local=True, on_update=seen)
            took = time.perf_counter() - started
            _check_report(report, wanted)
            extra["select_s"].append(selected - started)
            extra["take_s"].append(took - (selected - started))
            extra["first_stack_s"].append(first[0] if first else took)
            extra["groups"].append([(g.label, g.count, g.idle) for g in report.groups])
            return took

        async def whole_cli() -> float:
            took, out = await asyncio.to_thread(timed_run, cli, env, 300.0)
            extra["cli_groups"].append(_check_cli(out, wanted))
            return took

        def loop(as_json: bool) -> Callable[[], Awaitable[float]]:
            async def run() -> float:
                started = time.perf_counter()
                each = await asyncio.to_thread(_pyspy_loop, pids, as_json)
                took = time.perf_counter() - started
                extra[f"pyspy_{'json' if as_json else 'text'}_per_pid_s"].extend(each)
                return took

            return run

        ways: dict[str, Callable[[], Awaitable[float]]] = {
            "cockpit_in_process": in_process,
            "cockpit_cli": whole_cli,
            "pyspy_text": loop(False),
            "pyspy_json": loop(True),
        }
        for way in ways.values():  # warm-up: page cache, .pyc files, py-spy's first reads
            await way()
        for values in extra.values():
            values.clear()
        samples: dict[str, list[float]] = {key: [] for key in ways}
        cpu: dict[str, list[float]] = {key: [] for key in ways}
        keys = list(ways)
        for index in range(rounds):
            for key in keys[index % len(keys) :] + keys[: index % len(keys)]:
                before = _cpu_seconds()
                samples[key].append(await ways[key]())
                cpu[key].append(_cpu_seconds() - before)
        return {
            "ready_after_s": ready_s,
            "processes": len(pids),
            "kinds": {
                k: sum(1 for m in selection.members if m.kind == k) for k in ("driver", "actor", "worker")
            },
            "nodes_with_processes": len(selection.nodes),
            "processes_per_node": sorted(
                sum(1 for m in selection.members if m.node_id == n) for n in selection.nodes
            ),
            "samples_s": samples,
            "cpu_s": cpu,
            **extra,
        }


def _cpu_seconds() -> float:
    """CPU time of this process and of every child it has waited for (py-spy, the cockpit's node
    programs and their py-spy, a `cockpit stacks` process and its children)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def _py_spy_version() -> str:
    proc = subprocess.run([str(BIN / "py-spy"), "--version"], capture_output=True, text=True, check=False)
    return proc.stdout.strip()


def _stop(state_dir: Path, job: str) -> None:
    """Stop the job and wait until it has ended (its actors end with its driver)."""

    async def run() -> None:
        async with open_connection(parse_target("local"), ConnectOptions()) as connection:
            client = connection.client
            await client.stop_job(job)
            for _ in range(120):
                found = next((j for j in await client.jobs() if j.submission_id == job), None)
                if found is None or found.terminal:
                    return
                await asyncio.sleep(0.5)
            raise RuntimeError(f"job {job} did not end within 60 s of its stop")

    with _state_dir(state_dir):
        asyncio.run(run())


def _submit(state_dir: Path) -> str:
    script = state_dir / "stacks_driver.py"
    rollouts = ACTORS["hung"] + ACTORS["gathering"] + ACTORS["idle"]
    script.write_text(
        DRIVER.format(rollouts=rollouts, trainers=ACTORS["training"], gathering=ACTORS["gathering"])
    )
    job = f"cockpit-bench-stacks-{uuid.uuid4().hex[:8]}"

    async def run() -> None:
        async with open_connection(parse_target("local"), ConnectOptions()) as connection:
            await connection.client.submit_job({"entrypoint": f"{PYTHON} {script}", "submission_id": job})

    with _state_dir(state_dir):
        asyncio.run(run())
    return job


def _summary(values: list[float]) -> dict[str, float]:
    """p50 (the median: nearest rank), p95 (nearest rank: the max when n < 20), min, max and n."""
    return {**tail(values), "min": min(values)}


def run(cluster: LocalCluster, state_dir: Path, quick: bool) -> tuple[dict[str, Any], list[Row]]:
    """Measure; return the JSON document and the table rows."""
    rounds = 3 if quick else 10
    load_before = os.getloadavg()
    job = _submit(state_dir)
    try:
        with _state_dir(state_dir):
            measured = asyncio.run(_measure(state_dir, job, rounds))
    finally:
        try:
            _stop(state_dir, job)
        except Exception as exc:  # the runner's `down` ends the job's processes anyway
            print(f"[bench] WARNING: stopping {job}: {exc}", file=sys.stderr, flush=True)
    load_after = os.getloadavg()
    samples = measured["samples_s"]
    stats = {key: _summary(values) for key, values in samples.items()}
    cpu = {key: _summary(values) for key, values in measured["cpu_s"].items()}
    paired = [b / c for b, c in zip(samples["pyspy_text"], samples["cockpit_in_process"], strict=True)]
    for key in ("select_s", "take_s", "first_stack_s", "pyspy_text_per_pid_s", "pyspy_json_per_pid_s"):
        measured[f"{key}_summary"] = _summary(measured[key])
    baseline = stats["pyspy_text"]["p50"]
    ratios = {
        "pyspy_text_over_in_process": ratio(baseline, stats["cockpit_in_process"]["p50"]),
        "pyspy_text_over_cli": ratio(baseline, stats["cockpit_cli"]["p50"]),
        "pyspy_json_over_in_process": ratio(stats["pyspy_json"]["p50"], stats["cockpit_in_process"]["p50"]),
        "pyspy_text_over_in_process_paired_median": percentile(paired, 0.5),
        "in_process_cpu_over_pyspy_text_cpu": ratio(
            cpu["cockpit_in_process"]["p50"], cpu["pyspy_text"]["p50"]
        ),
    }
    doc = {
        "rounds": rounds,
        "job": job,
        "actors": ACTORS,
        "py_spy": _py_spy_version(),
        "node_parallel": NODE_PARALLEL,
        "load_before": load_before,
        "load_after": load_after,
        "stats_s": stats,
        "cpu_stats_s": cpu,
        "ratios_of_medians": ratios,
        **measured,
    }
    n = measured["processes"]
    groups = len(measured["groups"][0]) if measured["groups"] else 0

    def fmt(key: str) -> str:
        s = stats[key]
        ms = {k: round(v * 1000) for k, v in s.items() if k != "n"}
        return f"{ms['p50']} ms (p95 {ms['p95']}, {ms['min']}-{ms['max']})"

    per_pid = measured["pyspy_text_per_pid_s_summary"]
    rows = [
        Row(
            NAME,
            f"{n} processes: select+take, in process",
            fmt("cockpit_in_process"),
            f"n={rounds}; {groups} groups",
        ),
        Row(NAME, f"{n} processes: cockpit stacks --json (process)", fmt("cockpit_cli"), f"n={rounds}"),
        Row(
            NAME,
            f"{n} processes: py-spy dump --pid, in sequence",
            fmt("pyspy_text"),
            f"n={rounds}; per pid {per_pid['p50'] * 1000:.0f} ms",
        ),
        Row(NAME, f"{n} processes: py-spy dump --json --pid, in sequence", fmt("pyspy_json"), f"n={rounds}"),
        Row(NAME, "ratio sequential py-spy / in process", f"{ratios['pyspy_text_over_in_process']:.1f}x"),
        Row(NAME, "ratio sequential py-spy / cockpit stacks", f"{ratios['pyspy_text_over_cli']:.1f}x"),
        Row(
            NAME,
            "CPU: select+take / sequential py-spy",
            f"{cpu['cockpit_in_process']['p50'] * 1000:.0f} / {cpu['pyspy_text']['p50'] * 1000:.0f} ms",
            f"load {load_before[0]:.1f} before, {load_after[0]:.1f} after",
        ),
    ]
    return doc, rows
