"""Provides the `cockpit stacks` benchmark: every worker's stack of a 41-process job, grouped, against
`py-spy dump --pid` run once per pid in sequence (what people do today), in the same run: on this
machine, and from a login node that reaches the head over SSH.

A job submitted through the Jobs API starts 40 num_cpus=0 actors spread over the cluster's nodes (real
Ray worker processes, one each) and blocks in `ray.get` in its driver:
- 1 rollout worker blocked in `wait_for_weights_sync` (a sleep loop),
- 8 rollout workers waiting in `all_gather_weights` (`ray.get` on the first one's result),
- 4 trainers in `train_step` (a sleep loop),
- 27 rollout workers idle in Ray's task loop,
so the grouped answer has five groups (with the driver's). A real OpenSSH server on 127.0.0.1 (the test
suite's `tests/harness/sshd.py`) plays the head node `head-node`, the cluster's dashboard on its
loopback. Once `select` finds the driver and the 40 actors alive with pids and one `take` shows the
three busy groups (the warm-up), rounds of eight ways to the same stacks, the order rotated every
round:

- `select` + `take` in this process, on one open `local` connection (what the TUI's run doctor does);
- `cockpit stacks local --job ID --json` as a whole process (Python start-up and connection included);
- `py-spy dump --pid P` for each of the same pids, one after the other (a shell loop: text output);
- the same with `--json`;
- `select` + `take` in this process on one open connection to `head-node` (SSH: the dashboard through
  the tunnel, the py-spy program on the head over the same SSH connection);
- `cockpit stacks head-node --job ID --json --ssh-config ...` as a whole process (SSH set-up included);
- `ssh -F CONFIG head-node .../py-spy dump --pid P` for each pid, one after the other (what a user on the
  login node does today: one SSH session per pid);
- one `ssh head-node 'for p in PIDS; do .../py-spy dump --pid $p; done'` (the best by hand).

Per call: wall time, the CPU time of this process and of every child it waited for (py-spy, the
cockpit's node programs, the `cockpit stacks` and `ssh` processes), and the CPU time of the sshd tree
(the head's side of the SSH ways: sshd, the node program, py-spy; /proc ticks). On a machine with few
cores the CPU, not the parallelism, sets how fast all the dumps can be. Every answer is checked: the
grouped ones hold every pid with no failure (source `ssh` for the SSH ways), each py-spy run exited 0
and each text dump names its pid, so that a fast failure can never pass for a fast answer. The
baselines are given the pids; finding them (`ray list actors`, the job's driver) is not timed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common import BIN, PYTHON, Row, bench_env, harness_sshd, percentile, ratio, stop_sshd, tail, timed_run

from cockpit.core.connect.connection import Connection, ConnectOptions, open_connection
from cockpit.core.doctor.gather import take
from cockpit.core.doctor.selection import Selection, SelectionError, select
from cockpit.core.doctor.stack_program import NODE_PARALLEL
from cockpit.core.doctor.stacks import StackGroup, StacksReport
from cockpit.core.local.record import LocalCluster, token_file
from cockpit.core.targets import parse_target

if TYPE_CHECKING:
    from tests.harness.sshd import SshServer

NAME = "stacks"
ALIAS = "head-node"
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


@dataclass(frozen=True)
class Remote:
    """How the login node reaches the head: an ssh_config naming `head-node`, the dashboard's port on the
    head's loopback, the cluster's token (None: the cluster runs without token auth)."""

    config: Path
    dashboard_port: int
    token_file: Path | None

    def options(self) -> ConnectOptions:
        token = str(self.token_file) if self.token_file is not None else None
        return ConnectOptions(
            ssh_config=str(self.config), dashboard_port=self.dashboard_port, token_file=token
        )

    def cli(self, job: str) -> list[str]:
        argv = [
            str(BIN / "cockpit"),
            "stacks",
            ALIAS,
            "--job",
            job,
            "--json",
            "--ssh-config",
            str(self.config),
        ]
        argv += ["--dashboard-port", str(self.dashboard_port)]
        return argv + (["--token-file", str(self.token_file)] if self.token_file is not None else [])

    def ssh(self, command: str) -> list[str]:
        """`ssh -F CONFIG head-node COMMAND`: a new SSH session (no multiplexing), no pty."""
        return ["ssh", "-F", str(self.config), ALIAS, command]


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


def _check_report(report: StacksReport, pids: set[int], source: str) -> None:
    got = [m.pid for g in report.groups for m in g.members]
    if report.failures or report.missing_nodes or sorted(got) != sorted(pids) or report.source != source:
        raise RuntimeError(
            f"the grouped answer (source {report.source}, wanted {source}) held {len(got)} of {len(pids)} "
            f"pids: failures {report.failures[:3]}, missing nodes {report.missing_nodes}, "
            f"pids not there {sorted(pids - set(got))[:5]}"
        )


def _check_cli(out: str, pids: set[int], source: str) -> int:
    doc = json.loads(out)
    got = [m["pid"] for g in doc["groups"] for m in g["members"]]
    if doc["failures"] or doc["missing_nodes"] or sorted(got) != sorted(pids) or doc["source"] != source:
        raise RuntimeError(
            f"`cockpit stacks` (source {doc['source']}, wanted {source}) held {len(got)} of {len(pids)} "
            f"pids: failures {doc['failures'][:3]}, missing nodes {doc['missing_nodes']}"
        )
    return len(doc["groups"])


def _check_dumps(out: str, pids: list[int], what: str) -> None:
    """py-spy's text dump starts `Process PID: COMMAND`: every pid must have one."""
    missing = [p for p in pids if f"Process {p}:" not in out]
    if missing:
        raise RuntimeError(f"{what}: no dump of {len(missing)} of {len(pids)} pids, e.g. {missing[:5]}")


def _pyspy_loop(pids: list[int], as_json: bool, remote: Remote | None = None) -> list[float]:
    """`for p in PIDS; do [ssh head-node] py-spy dump [--json] --pid $p; done`: the wall time of each run,
    in order; with REMOTE, one `ssh` (one SSH session) per pid."""
    took = []
    for pid in pids:
        argv = [str(BIN / "py-spy"), "dump", *(["--json"] if as_json else []), "--pid", str(pid)]
        if remote is not None:
            argv = remote.ssh(shlex.join(argv))
        started = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        took.append(time.perf_counter() - started)
        if proc.returncode != 0 or not proc.stdout.strip():
            raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()[-300:]}")
        if not as_json:
            _check_dumps(proc.stdout, [pid], " ".join(argv))
    return took


def _pyspy_one_session(pids: list[int], remote: Remote) -> None:
    """`ssh head-node 'for p in PIDS; do py-spy dump --pid $p || exit 1; done'`: one SSH session."""
    spy = shlex.quote(str(BIN / "py-spy"))
    script = f"for p in {' '.join(map(str, pids))}; do {spy} dump --pid $p || exit 1; done"
    proc = subprocess.run(remote.ssh(script), capture_output=True, text=True, timeout=300, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"ssh {ALIAS} '{script}' exited {proc.returncode}: {proc.stderr.strip()[-300:]}")
    _check_dumps(proc.stdout, pids, f"ssh {ALIAS} 'for p in ...'")


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


async def _measure(state_dir: Path, job: str, rounds: int, remote: Remote, sshd_pid: int) -> dict[str, Any]:
    expected = sum(ACTORS.values()) + 1  # and the driver
    env = bench_env(state_dir)
    ssh_env = {k: v for k, v in env.items() if k not in ("RAY_AUTH_TOKEN", "RAY_AUTH_MODE")}  # --token-file
    cli = [str(BIN / "cockpit"), "stacks", "local", "--job", job, "--json"]
    async with (
        open_connection(parse_target("local"), ConnectOptions()) as connection,
        open_connection(parse_target(ALIAS), remote.options()) as over_ssh,
    ):
        if over_ssh.link is None:
            raise RuntimeError(f"the connection to {ALIAS} has no SSH link")
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
            "ssh_select_s": [],
            "ssh_take_s": [],
            "ssh_first_stack_s": [],
            "ssh_groups": [],
            "ssh_cli_groups": [],
            "pyspy_text_per_pid_s": [],
            "pyspy_json_per_pid_s": [],
            "pyspy_ssh_per_pid_s": [],
        }

        def grouped(
            conn: Connection, local: bool, source: str, prefix: str
        ) -> Callable[[], Awaitable[float]]:
            async def run() -> float:
                started = time.perf_counter()
                first: list[float] = []

                def seen(collector: Any) -> None:
                    if collector.dumps and not first:
                        first.append(time.perf_counter() - started)

                chosen = await select(conn.client, job=job)
                selected = time.perf_counter()
                report = await take(conn, chosen, local=local, on_update=seen)
                took = time.perf_counter() - started
                _check_report(report, wanted, source)
                extra[f"{prefix}select_s"].append(selected - started)
                extra[f"{prefix}take_s"].append(took - (selected - started))
                extra[f"{prefix}first_stack_s"].append(first[0] if first else took)
                extra[f"{prefix}groups"].append([(g.label, g.count, g.idle) for g in report.groups])
                return took

            return run

        def whole_cli(
            argv: list[str], env: dict[str, str], source: str, key: str
        ) -> Callable[[], Awaitable[float]]:
            async def run() -> float:
                took, out = await asyncio.to_thread(timed_run, argv, env, 300.0)
                extra[key].append(_check_cli(out, wanted, source))
                return took

            return run

        def loop(as_json: bool, via: Remote | None, key: str) -> Callable[[], Awaitable[float]]:
            async def run() -> float:
                started = time.perf_counter()
                each = await asyncio.to_thread(_pyspy_loop, pids, as_json, via)
                took = time.perf_counter() - started
                extra[key].extend(each)
                return took

            return run

        async def one_session() -> float:
            started = time.perf_counter()
            await asyncio.to_thread(_pyspy_one_session, pids, remote)
            return time.perf_counter() - started

        ways: dict[str, Callable[[], Awaitable[float]]] = {
            "cockpit_in_process": grouped(connection, True, "local", ""),
            "cockpit_cli": whole_cli(cli, env, "local", "cli_groups"),
            "pyspy_text": loop(False, None, "pyspy_text_per_pid_s"),
            "pyspy_json": loop(True, None, "pyspy_json_per_pid_s"),
            "cockpit_ssh_in_process": grouped(over_ssh, False, "ssh", "ssh_"),
            "cockpit_ssh_cli": whole_cli(remote.cli(job), ssh_env, "ssh", "ssh_cli_groups"),
            "pyspy_ssh_per_pid": loop(False, remote, "pyspy_ssh_per_pid_s"),
            "pyspy_ssh_one_session": one_session,
        }
        for way in ways.values():  # warm-up: page cache, .pyc files, py-spy's first reads, sshd's first
            await way()
        for values in extra.values():
            values.clear()
        samples: dict[str, list[float]] = {key: [] for key in ways}
        cpu: dict[str, list[float]] = {key: [] for key in ways}
        head_cpu: dict[str, list[float]] = {key: [] for key in ways}
        keys = list(ways)
        for index in range(rounds):
            for key in keys[index % len(keys) :] + keys[: index % len(keys)]:
                before, before_head = _cpu_seconds(), _tree_cpu_seconds(sshd_pid)
                samples[key].append(await ways[key]())
                cpu[key].append(_cpu_seconds() - before)
                head_cpu[key].append(_tree_cpu_seconds(sshd_pid) - before_head)
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
            "machines": len({selection.nodes[m.node_id].ip for m in selection.members}),
            "samples_s": samples,
            "cpu_s": cpu,
            "sshd_tree_cpu_s": head_cpu,
            **extra,
        }


def _cpu_seconds() -> float:
    """CPU time of this process and of every child it has waited for (py-spy, the cockpit's node
    programs and their py-spy, a `cockpit stacks` process and its children, `ssh`)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


_TICK = os.sysconf("SC_CLK_TCK")


def _tree_cpu_seconds(root: int) -> float:
    """CPU time of ROOT and everything below it, the reaped included (/proc ticks: 10 ms on Linux).

    Each live process's own time plus what it has reaped (cutime, cstime): a process that has ended is
    counted in the live ancestor that waited for it, once. The head's side of the SSH ways: sshd's
    listener, its per-connection processes, the shell, the node program and its py-spy.
    """
    table: dict[int, tuple[int, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                text = fh.read()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        if fields[0] in ("Z", "X"):  # a zombie's time is counted once its parent reaps it
            continue
        table[int(entry)] = (int(fields[1]), sum(int(v) for v in fields[11:15]) / _TICK)
    below: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        below.setdefault(parent, []).append(pid)
    total, pending = 0.0, [root]
    while pending:
        pid = pending.pop()
        if pid in table:
            total += table[pid][1]
        pending.extend(below.get(pid, []))
    return total


def _py_spy_version() -> str:
    proc = subprocess.run([str(BIN / "py-spy"), "--version"], capture_output=True, text=True, check=False)
    return proc.stdout.strip()


def _ssh_version() -> str:
    proc = subprocess.run(["ssh", "-V"], capture_output=True, text=True, check=False)
    return (proc.stderr or proc.stdout).strip()


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


def _paired(samples: dict[str, list[float]], baseline: str, candidate: str) -> float:
    """The median of the per-round ratios baseline / candidate."""
    return percentile([b / c for b, c in zip(samples[baseline], samples[candidate], strict=True)], 0.5)


PAIRS = (
    ("pyspy_text", "cockpit_in_process"),
    ("pyspy_text", "cockpit_cli"),
    ("pyspy_json", "cockpit_in_process"),
    ("pyspy_ssh_per_pid", "cockpit_ssh_in_process"),
    ("pyspy_ssh_per_pid", "cockpit_ssh_cli"),
    ("pyspy_ssh_one_session", "cockpit_ssh_in_process"),
    ("pyspy_ssh_one_session", "cockpit_ssh_cli"),
)
"""(baseline, candidate): each ratio is baseline / candidate, above 1 when the cockpit is faster."""


def run(cluster: LocalCluster, state_dir: Path, quick: bool) -> tuple[dict[str, Any], list[Row]]:
    """Measure; return the JSON document and the table rows."""
    rounds = 3 if quick else 10
    work = Path(tempfile.mkdtemp(prefix="cockpit-bench-stacks-"))
    server: SshServer | None = None
    load_before = os.getloadavg()
    job = _submit(state_dir)
    try:
        server = harness_sshd(work / "sshd")
        config = work / "ssh_config"
        config.write_text(server.ssh_config_entry(ALIAS))
        token = token_file(state_dir)
        remote = Remote(config, cluster.dashboard_port, token if token.exists() else None)
        with _state_dir(state_dir):
            measured = asyncio.run(_measure(state_dir, job, rounds, remote, server.pid))
    finally:
        try:
            _stop(state_dir, job)
        except Exception as exc:  # the runner's `down` ends the job's processes anyway
            print(f"[bench] WARNING: stopping {job}: {exc}", file=sys.stderr, flush=True)
        left = stop_sshd(server, work, NAME)
    load_after = os.getloadavg()
    samples = measured["samples_s"]
    stats = {key: _summary(values) for key, values in samples.items()}
    cpu = {key: _summary(values) for key, values in measured["cpu_s"].items()}
    head_cpu = {key: _summary(values) for key, values in measured["sshd_tree_cpu_s"].items()}
    summarised = ("select_s", "take_s", "first_stack_s", "ssh_select_s", "ssh_take_s", "ssh_first_stack_s")
    for key in (*summarised, "pyspy_text_per_pid_s", "pyspy_json_per_pid_s", "pyspy_ssh_per_pid_s"):
        measured[f"{key}_summary"] = _summary(measured[key])
    ratios = {f"{b}_over_{c}": ratio(stats[b]["p50"], stats[c]["p50"]) for b, c in PAIRS}
    paired = {f"{b}_over_{c}": _paired(samples, b, c) for b, c in PAIRS}
    ratios["in_process_cpu_over_pyspy_text_cpu"] = ratio(
        cpu["cockpit_in_process"]["p50"], cpu["pyspy_text"]["p50"]
    )
    doc = {
        "rounds": rounds,
        "job": job,
        "actors": ACTORS,
        "py_spy": _py_spy_version(),
        "ssh": _ssh_version(),
        "node_parallel": NODE_PARALLEL,
        "cpu_count": os.cpu_count(),
        "load_before": load_before,
        "load_after": load_after,
        "stats_s": stats,
        "cpu_stats_s": cpu,
        "sshd_tree_cpu_stats_s": head_cpu,
        "ratios_of_medians": ratios,
        "paired_median_ratios": paired,
        "processes_left": left,
        "sshd_running_after": server is not None and server.running,
        **measured,
    }
    n = measured["processes"]
    groups = len(measured["groups"][0]) if measured["groups"] else 0

    def fmt(key: str) -> str:
        s = stats[key]
        ms = {k: round(v * 1000) for k, v in s.items() if k != "n"}
        return f"{ms['p50']} ms (p95 {ms['p95']}, {ms['min']}-{ms['max']})"

    def both_cpu(key: str) -> str:
        return f"CPU {cpu[key]['p50'] * 1000:.0f} ms here + {head_cpu[key]['p50'] * 1000:.0f} ms sshd side"

    def paired_ratio(b: str, c: str) -> str:
        return f"{ratios[f'{b}_over_{c}']:.2f}x (paired {paired[f'{b}_over_{c}']:.2f}x)"

    per_pid = measured["pyspy_text_per_pid_s_summary"]
    per_ssh = measured["pyspy_ssh_per_pid_s_summary"]
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
        Row(NAME, "ratio sequential py-spy / in process", paired_ratio("pyspy_text", "cockpit_in_process")),
        Row(NAME, "ratio sequential py-spy / cockpit stacks", paired_ratio("pyspy_text", "cockpit_cli")),
        Row(
            NAME,
            "CPU: select+take / sequential py-spy",
            f"{cpu['cockpit_in_process']['p50'] * 1000:.0f} / {cpu['pyspy_text']['p50'] * 1000:.0f} ms",
            f"load {load_before[0]:.1f} before, {load_after[0]:.1f} after",
        ),
        Row(
            NAME,
            f"SSH, {n} processes: select+take, in process",
            fmt("cockpit_ssh_in_process"),
            both_cpu("cockpit_ssh_in_process"),
        ),
        Row(
            NAME,
            f"SSH, {n} processes: cockpit stacks {ALIAS} --json",
            fmt("cockpit_ssh_cli"),
            both_cpu("cockpit_ssh_cli"),
        ),
        Row(
            NAME,
            f"SSH, {n} processes: ssh {ALIAS} py-spy dump --pid, x{n}",
            fmt("pyspy_ssh_per_pid"),
            f"per pid {per_ssh['p50'] * 1000:.0f} ms; {both_cpu('pyspy_ssh_per_pid')}",
        ),
        Row(
            NAME,
            f"SSH, {n} processes: one ssh, py-spy loop",
            fmt("pyspy_ssh_one_session"),
            both_cpu("pyspy_ssh_one_session"),
        ),
        Row(
            NAME,
            "ratio ssh per pid / SSH in process",
            paired_ratio("pyspy_ssh_per_pid", "cockpit_ssh_in_process"),
        ),
        Row(
            NAME,
            "ratio ssh per pid / cockpit stacks over SSH",
            paired_ratio("pyspy_ssh_per_pid", "cockpit_ssh_cli"),
        ),
        Row(
            NAME,
            "ratio one ssh loop / SSH in process",
            paired_ratio("pyspy_ssh_one_session", "cockpit_ssh_in_process"),
        ),
        Row(
            NAME,
            "ratio one ssh loop / cockpit stacks over SSH",
            paired_ratio("pyspy_ssh_one_session", "cockpit_ssh_cli"),
        ),
    ]
    return doc, rows
