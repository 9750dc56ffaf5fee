"""The faults users meet on real clusters, caused for real on the multi-host harness
(tests/harness/multihost.py: a jump host, a head and worker hosts, each a network namespace with its own
address, sshd and Ray node), and what the cockpit does under each. Each test measures the fault as a user
meets it (time to notice, time to recover, log lines lost) and records it (tests/harness/reliability.py):
`python scripts/reliability_table.py --run` runs them with 60 s cuts and renders RELIABILITY.md.

Every test leaves the shared harness as it found it (links up, sshd running, head up, its own jobs
stopped), so the tests after it start from a healthy cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from cockpit.core.connect.connection import ConnectOptions
from cockpit.core.targets import parse_target
from cockpit.ui.app import CockpitApp
from cockpit.ui.feeds.driver_logs import START
from cockpit.ui.widgets.node_table import NodeTable
from tests.harness import fault_job
from tests.harness.multihost import DASHBOARD_PORT, Host, MultiHost
from tests.harness.relay import relay
from tests.harness.reliability import CUT_ENV, Figure, cut_seconds, record
from tests.harness.run import run_cockpit

pytestmark = [pytest.mark.multihost]

ALL_ENV = "COCKPIT_FAULTS"
every_fault = pytest.mark.skipif(
    not (os.environ.get(ALL_ENV) or os.environ.get(CUT_ENV)),
    reason=f"a minute or two each: run by `python scripts/reliability_table.py --run`, or with {ALL_ENV}=1",
)
"""Faults 3 to 6 (a killed host, a restarted head, sshd and host keys, a slow link): out of the ordinary
suite for its 10-minute budget; faults 1 and 2 (the log that resumes exactly, the silent host) run in it."""

SUITE_CUT_S = 12.0
"""A cut in the ordinary suite: longer than the SSH keepalive below needs to give up (3 x 2 s), so the
link is lost and re-opened as in a 60 s cut, at a fifth of the cost."""
SUITE_KEEPALIVE_S = 2
"""ServerAliveInterval in the suite's SSH config; the table's runs keep the cockpit's default (10 s)."""
PERIOD = 0.05
"""Seconds between two numbered lines of the fault job."""


def table_run() -> bool:
    """Whether this run produces RELIABILITY.md's figures (the cut's length set by the environment): then
    the cockpit runs as a user's would, with its default SSH keepalive."""
    return cut_seconds(0.0) > 0.0


def ssh_config(cluster: MultiHost, tmp_path: Path) -> Path:
    """The harness's SSH config, with a short keepalive in the ordinary suite (first value wins)."""
    config = tmp_path / "ssh_config"
    prefix = "" if table_run() else f"ServerAliveInterval {SUITE_KEEPALIVE_S}\n"
    config.write_text(prefix + cluster.ssh_config.read_text())
    return config


def connect_args(cluster: MultiHost, config: Path) -> list[str]:
    args = cluster.cli_args()
    args[args.index("--ssh-config") + 1] = str(config)
    return args


def connect_options(cluster: MultiHost, config: Path) -> ConnectOptions:
    return ConnectOptions(
        ssh_config=str(config), dashboard_port=DASHBOARD_PORT, token_file=str(cluster.token_file)
    )


def numbered(text: str) -> list[int]:
    return [int(m.group(1)) for m in re.finditer(r"^line (\d{5})$", text, re.MULTILINE)]


def lines_lost(got: list[int], wanted: int) -> int:
    """Lines missing plus lines repeated, against 0..WANTED-1 in order."""
    missing = len(set(range(wanted)) - set(got))
    disorder = sum(1 for a, b in itertools.pairwise(got) if b < a)
    return missing + (len(got) - len(set(got))) + disorder


@contextlib.contextmanager
def fault_job_running(cluster: MultiHost, name: str, lines: int, ips: tuple[str, ...] = ()) -> Iterator[str]:
    """The fault job submitted (numbered lines, actors on IPS); stopped when the block ends."""
    entrypoint = f"{sys.executable} {fault_job.__file__} {lines} {PERIOD} {' '.join(ips)}"
    submission_id = cluster.submit_job(entrypoint, f"{name}-{int(time.time())}")
    try:
        yield submission_id
    finally:
        with contextlib.suppress(Exception):
            cluster.dashboard(f"/api/jobs/{submission_id}/stop", body={})


@dataclass
class Stamped:
    """Lines a follower wrote to stderr, each with when (monotonic) it came."""

    lines: list[tuple[float, str]] = field(default_factory=list)

    def first(self, needle: str) -> tuple[float, str] | None:
        return next(((t, line) for t, line in self.lines if needle in line), None)


def read_stamped(stream: Any, into: Stamped) -> threading.Thread:
    def pump() -> None:
        for raw in iter(stream.readline, b""):
            into.lines.append((time.monotonic(), raw.decode(errors="replace").rstrip("\n")))

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    return thread


@dataclass
class TuiLog:
    """What the TUI's driver-log feed gave a reader, and the connection's phases, each stamped."""

    data: bytearray = field(default_factory=bytearray)
    chunks: list[tuple[float, int]] = field(default_factory=list)
    """(when, bytes so far) after each chunk."""
    said: list[tuple[float, str]] = field(default_factory=list)
    phases: list[tuple[float, str]] = field(default_factory=list)

    def took(self, data: bytes, _history: bool) -> None:
        self.data.extend(data)
        self.chunks.append((time.monotonic(), len(self.data)))

    def tell(self, message: str, _failed: bool) -> None:
        self.said.append((time.monotonic(), message))


async def watch_phases(app: CockpitApp, log: TuiLog) -> None:
    while True:
        phase = app.state.connection.phase
        if not log.phases or log.phases[-1][1] != phase:
            log.phases.append((time.monotonic(), phase))
        await asyncio.sleep(0.1)


async def wait_for(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.2)


async def test_fault_link_cut_during_logs_follow_and_the_tui(multihost: MultiHost, tmp_path: Path) -> None:
    """The login side's link to the head (through the jump host) cut while `cockpit logs --follow` and
    the TUI follow the same job: both notice, reconnect by themselves when the link is back, and what
    each showed is every line once, in order."""
    cluster = multihost
    cut = cut_seconds(SUITE_CUT_S)
    config = ssh_config(cluster, tmp_path)
    total = int((cut + 25) / PERIOD)  # runs past the cut and the reconnection
    cli_err = Stamped()
    tui = TuiLog()
    with fault_job_running(cluster, "cut", total) as job_id:
        cli = subprocess.Popen(
            [sys.executable, "-m", "cockpit.cli", "logs", cluster.target, job_id, "--follow", "-n", "-1",
             *connect_args(cluster, config)],
            stdout=(tmp_path / "cli.out").open("wb"), stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        read_stamped(cli.stderr, cli_err)
        app = CockpitApp(parse_target(cluster.target), connect_options(cluster, config))
        try:
            async with app.run_test(size=(120, 36)):
                phases = asyncio.ensure_future(watch_phases(app, tui))
                await wait_for(
                    lambda: (
                        app.state.snapshot is not None
                        and any(j.key == job_id and j.driver_node_id for j in app.state.snapshot.jobs)
                    ),
                    90,
                    "the TUI to list the job",
                )
                assert app.state.snapshot is not None
                job = next(j for j in app.state.snapshot.jobs if j.key == job_id)
                reader = app.driver_logs.join(job, tui.took, since=START, said=tui.tell)
                await wait_for(
                    lambda: (
                        len(numbered((tmp_path / "cli.out").read_text())) > 20
                        and len(numbered(tui.data.decode())) > 20
                    ),
                    60,
                    "both followers to show lines",
                )
                cut_at = time.monotonic()
                cluster.cut_link(cluster.jump)
                try:
                    await asyncio.sleep(cut)
                finally:
                    cluster.restore_link(cluster.jump)
                back_at = time.monotonic()
                await wait_for(lambda: cli.poll() is not None, cut + 120, "the CLI to end with the job")
                await wait_for(lambda: b"done\n" in tui.data, 60, "the TUI's log to reach the end")
                await wait_for(lambda: app.state.connection.phase == "connected", 30, "the TUI to reconnect")
                piled = piled_up(await app.cluster_feed.dashboard())
                reader.leave()
                phases.cancel()
        finally:
            if cli.poll() is None:
                cli.kill()
            cli.wait(timeout=10)

    shown = (tmp_path / "cli.out").read_text()
    errors = "\n".join(line for _, line in cli_err.lines)
    assert cli.returncode == 0, errors
    assert "Traceback" not in errors
    cli_lost, tui_lost = lines_lost(numbered(shown), total), lines_lost(numbered(tui.data.decode()), total)
    assert (cli_lost, tui_lost) == (0, 0), errors
    assert numbered(shown) == list(range(total)) == numbered(tui.data.decode())
    assert not piled, piled  # no request asked again while the last one was under way, cut or not

    dropped, resumed = cli_err.first("resuming by itself"), cli_err.first("stream resumed")
    assert dropped is not None and resumed is not None, errors
    assert [line for _, line in cli_err.lines if "resuming by itself" in line] == [dropped[1]]  # said once
    assert "no line lost or repeated" in resumed[1]
    tui_down = next((t for t, phase in tui.phases if t > cut_at and phase != "connected"), None)
    tui_up = next((t for t, phase in tui.phases if t > back_at and phase == "connected"), None)
    tui_flow = next((t for t, _ in tui.chunks if t > back_at), None)
    assert tui_down is not None and tui_up is not None and tui_flow is not None, tui.phases
    down_phase = next(phase for t, phase in tui.phases if t == tui_down)

    cli_notice, cli_recover = dropped[0] - cut_at, resumed[0] - back_at
    tui_notice, tui_recover = tui_down - cut_at, max(tui_up, tui_flow) - back_at
    record(
        Figure(
            key="1-link-cut",
            fault=f"login-to-head link down {cut:.0f} s (the jump host's cable) during `cockpit logs "
            "--follow` and the TUI",
            user_sees=f"CLI: `{dropped[1]}`, then `{resumed[1]}`; TUI: status bar {down_phase}, "
            "then connected, the log pane goes on",
            notice_s=max(cli_notice, tui_notice),
            recover_s=max(cli_recover, tui_recover),
            lines_lost=cli_lost + tui_lost,
            notes=f"CLI noticed after {cli_notice:.1f} s and resumed {cli_recover:.1f} s after the link "
            f"was back; TUI {tui_notice:.1f} s and {tui_recover:.1f} s; {total} lines followed by both"
            + ("" if table_run() else f"; ServerAliveInterval {SUITE_KEEPALIVE_S}"),
        )
    )


def piled_up(client: Any) -> dict[str, int]:
    """The kinds of request the TUI ever had more than one of under way at once."""
    return {kind: most for kind, most in client.most_in_flight.items() if most > 1}


def row_state(app: CockpitApp, node_id: str) -> str:
    """The State cell of NODE_ID's row in the Cluster screen's node table, as drawn."""
    table = app.screen.query_one(NodeTable)
    if node_id not in table.rows:
        return ""
    return str(table.get_cell(node_id, "state"))


async def run_cli(*args: str, timeout: float = 180) -> tuple[int, str, str, float]:
    """`cockpit ARGS` as its own process (the TUI's loop goes on meanwhile): exit code, out, err, seconds."""
    started = time.monotonic()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cockpit.cli", *args,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), timeout)
    return process.returncode or 0, out.decode(), err.decode(), time.monotonic() - started


def wait_for_placed(cluster: MultiHost, job_id: str) -> None:
    deadline = time.monotonic() + 120
    while "actors placed" not in (logs := cluster.job_logs(job_id)):
        assert time.monotonic() < deadline, f"the fault job's actors were not placed:\n{logs[-3000:]}"
        time.sleep(0.5)


def node_id_of(app: CockpitApp, ip: str) -> str:
    assert app.state.snapshot is not None
    return next(n.node_id for n in app.state.snapshot.nodes if n.ip == ip and n.alive)


async def test_fault_one_worker_host_partitioned_mid_job(multihost: MultiHost, tmp_path: Path) -> None:
    """A worker host's cable pulled while a job has an actor on every worker: the Cluster screen says it is
    not answering while Ray still lists it alive, then Ray's DEAD and death reason; `cockpit stacks` takes
    the other hosts' stacks and names the missing one, well within its deadline; the hang watch counts
    nothing of that host (tests/unit/test_node_silence.py: there are no GPU readings here to freeze).
    The host comes back (rebooted) for the tests after this one."""
    cluster = multihost
    lost = cluster.workers[0]
    ips = tuple(w.ip for w in cluster.workers)
    args = cluster.cli_args()
    with fault_job_running(cluster, "partition", int(600 / PERIOD), ips) as job_id:
        wait_for_placed(cluster, job_id)
        app = CockpitApp(parse_target(cluster.target), cluster.connect_options())
        try:
            async with app.run_test(size=(160, 40)):
                await wait_for(
                    lambda: (
                        app.state.snapshot is not None
                        and sum(n.alive for n in app.state.snapshot.nodes) == len(cluster.ray_hosts)
                    ),
                    90,
                    "every node alive in the TUI",
                )
                node_id = node_id_of(app, lost.ip)
                states: list[tuple[float, str]] = []

                async def watch_row() -> None:
                    while True:
                        shown = row_state(app, node_id)
                        if not states or states[-1][1] != shown:
                            states.append((time.monotonic(), shown))
                        await asyncio.sleep(0.2)

                rows = asyncio.ensure_future(watch_row())
                cut_at = time.monotonic()
                cluster.cut_link(lost)
                try:
                    code, out, err, took = await run_cli(
                        "stacks", cluster.target, *args, "--job", job_id, "--via", "ssh", "--json"
                    )
                    await wait_for(lambda: states[-1][1] == "DEAD", 120, "Ray to declare the host dead")
                    rows.cancel()
                    assert app.state.snapshot is not None
                    dead = next(n for n in app.state.snapshot.nodes if n.node_id == node_id)
                finally:
                    cluster.restore_link(lost)
        finally:
            # Marked dead, its raylet exits when it hears so: the host is rebooted for the next tests.
            reboot(cluster, lost)

    assert code == 0, err
    doc = json.loads(out)
    others = {w.ip for w in cluster.workers} - {lost.ip}
    dumped = {m["node_ip"] for g in doc["groups"] for m in g["members"]}
    assert others <= dumped and lost.ip not in dumped, doc
    named = json.dumps(doc["failures"]) + json.dumps(doc["missing_nodes"])
    assert lost.ip in named or lost.hostname in named, doc
    assert "Traceback" not in err
    shown = [state for _, state in states]
    silent_at = next((t for t, state in states if state.startswith("not answering")), None)
    dead_at = next(t for t, state in states if state == "DEAD")
    assert silent_at is not None, shown  # said before Ray gave up on the host
    assert shown.index(next(s for s in shown if s.startswith("not answering"))) < shown.index("DEAD")
    assert dead.state_message, dead
    record(
        Figure(
            key="2-partition",
            fault="one worker host's link cut mid-job (an actor on each worker host)",
            user_sees=f"Cluster screen: the host's State `not answering (…)`, then `DEAD` with Ray's reason "
            f"`{dead.state_message}`; `cockpit stacks` in {took:.0f} s: the other hosts' stacks, the lost "
            f"host named: `{(doc['failures'] or [{'reason': doc['missing_nodes']}])[0]['reason']}`",
            notice_s=silent_at - cut_at,
            recover_s=None,
            lines_lost=None,
            notes=f"'not answering' after {silent_at - cut_at:.1f} s, Ray's DEAD after "
            f"{dead_at - cut_at:.1f} s (the harness's health checks: every 1 s, 3 failures, 10 s "
            f"timeout); stacks took {took:.1f} s",
        )
    )


def reboot(cluster: MultiHost, host: Host) -> None:
    """HOST killed whole and booted again (its sshd, its Ray node joining the head); a second try when
    a busy machine makes `ray start` time out, so the next test finds every host up."""
    cluster.kill_host(host)
    try:
        cluster.start_host(host)
    except RuntimeError:
        cluster.kill_host(host)
        cluster.start_host(host)


def beat_actor(cluster: MultiHost, ray_job: str, ip: str) -> dict[str, Any] | None:
    """The fault job's actor placed on IP, as `cockpit actors --json` lists it (None if not listed)."""
    done = run_cockpit("actors", cluster.target, *cluster.cli_args(), "--job", ray_job, "--json")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    actors = json.loads(done.stdout)["actors"]
    return next((a for a in actors if f"node:{ip}" in a["required_resources"]), None)


def until_true(condition: Any, timeout: float, what: str, last: Any = str) -> float:
    """Call CONDITION until it is true; when (monotonic) it was. LAST() says what was seen, on a timeout."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}; last seen: {last()}"
        time.sleep(0.5)
    return time.monotonic()


@every_fault
def test_fault_a_worker_host_killed_mid_job(multihost: MultiHost) -> None:
    """Every process of a worker host killed at once (power lost) under a job with a restartable actor
    on each worker host: `cockpit status` shows the node DEAD with Ray's reason, `cockpit actors` the
    actor's death cause and its restart waiting for the host (`--pending` says why), and once the host is
    back the actor restarted there, and the job's fate (it goes on and succeeds)."""
    cluster = multihost
    lost = cluster.workers[1]
    ips = tuple(w.ip for w in cluster.workers)
    with fault_job_running(cluster, "killed", int(75 / PERIOD), ips) as job_id:
        wait_for_placed(cluster, job_id)
        ray_job = str(cluster.dashboard(f"/api/jobs/{job_id}")["job_id"])
        before = beat_actor(cluster, ray_job, lost.ip)
        assert before is not None and before["state"] == "ALIVE", before
        killed_at = time.monotonic()
        cluster.kill_host(lost)
        try:
            after: dict[str, Any] = {}

            def actor_left() -> bool:
                nonlocal after
                after = beat_actor(cluster, ray_job, lost.ip) or {}
                return after.get("state") not in (None, "ALIVE")

            noticed_at = until_true(actor_left, 60, "the actor on the killed host to leave ALIVE")
            status = run_cockpit("status", cluster.target, *cluster.cli_args(), "--json")
            assert status.returncode == 0, status.stderr
            node = next(n for n in json.loads(status.stdout)["nodes"] if n["ip"] == lost.ip)
            pending = run_cockpit("actors", cluster.target, *cluster.cli_args(), "--pending")
        finally:
            back_at = time.monotonic()
            reboot(cluster, lost)

        seen: dict[str, Any] = {}

        def actor_back() -> bool:
            seen.update(beat_actor(cluster, ray_job, lost.ip) or {})
            return seen.get("state") == "ALIVE" and seen.get("num_restarts") == 1

        restarted_at = until_true(
            actor_back, 90, "the actor to restart on the host once it is back", lambda: str(seen)
        )
        until_true(
            lambda: cluster.dashboard(f"/api/jobs/{job_id}")["status"] in ("SUCCEEDED", "FAILED", "STOPPED"),
            120,
            "the job to end",
        )
        fate = cluster.dashboard(f"/api/jobs/{job_id}")
        followed = run_cockpit("logs", cluster.target, job_id, *cluster.cli_args(), "--follow", "-n", "-1")
    assert node["state"] == "DEAD" and node["state_message"], node
    assert after["state"] in ("RESTARTING", "PENDING_CREATION", "DEAD"), after
    assert after["num_restarts"] <= 1, after
    assert "Traceback" not in pending.stderr + followed.stderr
    assert fate["status"] == "SUCCEEDED", fate
    assert followed.stdout.rstrip().endswith(f"{job_id}: SUCCEEDED"), followed.stdout[-500:]
    assert f"actor on {lost.ip} lost" in followed.stdout  # what the driver said it lost, meanwhile
    assert f"actor on {lost.ip} answers again" in followed.stdout
    record(
        Figure(
            key="3-host-killed",
            fault="a worker host's every process killed mid-job (a restartable actor on each worker host)",
            user_sees=f"`cockpit status`: the node DEAD, `{node['state_message']}`; `cockpit actors`: the "
            f"actor {after['state']}, restarts {after['num_restarts']}"
            + (f", `{after['death_cause'][:120]}`" if after.get("death_cause") else "")
            + f"; `--pending`: `{(pending.stdout.strip().splitlines() or [''])[0][:160]}`; once the host is "
            f"back the actor ALIVE again (1 restart); the job {fate['status']}",
            notice_s=noticed_at - killed_at,
            recover_s=restarted_at - back_at,
            lines_lost=None,
            notes=f"recover: from the host's reboot starting to the actor ALIVE on it again "
            f"({restarted_at - back_at:.1f} s, `ray start` included)",
        )
    )


def one_line_error(done: subprocess.CompletedProcess[str] | tuple[int, str, str, float]) -> str:
    code, err = (done.returncode, done.stderr) if isinstance(done, subprocess.CompletedProcess) else done[::2]
    assert code != 0 and "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@every_fault
async def test_fault_dashboard_killed_then_the_whole_head_restarted(multihost: MultiHost) -> None:
    """The head's dashboard process killed while its GCS lives, then the whole head killed and started
    again (a new Ray session): `cockpit status` says each in one line, the TUI keeps running and says
    so, and after the restart it shows the new session's nodes and none of the old session's jobs."""
    cluster = multihost
    args = [cluster.target, *cluster.cli_args()]
    with fault_job_running(cluster, "old-session", 10) as old_job:
        until_true(lambda: cluster.dashboard(f"/api/jobs/{old_job}")["status"] == "SUCCEEDED", 60, "the job")
    app = CockpitApp(parse_target(cluster.target), cluster.connect_options())
    said: list[str] = []
    shown = app.notify

    def notify(message: str, **options: Any) -> None:  # what the user read in the corner, kept
        said.append(str(message))
        shown(message, **options)

    app.notify = notify  # type: ignore[method-assign]
    async with app.run_test(size=(160, 40)):
        await wait_for(
            lambda: (
                app.state.snapshot is not None
                and any(j.key == old_job for j in app.state.snapshot.jobs)
                and app.state.info is not None
            ),
            90,
            "the TUI to show the old session's job",
        )
        assert app.state.info is not None and app.state.snapshot is not None
        old_session, old_nodes = app.state.info.session_name, {n.node_id for n in app.state.snapshot.nodes}

        killed_at = time.monotonic()
        cluster.kill_dashboard()
        dashboard_line = one_line_error(await run_cli("status", *args, timeout=120))
        await wait_for(lambda: app.state.connection.phase != "connected", 60, "the TUI to notice")
        tui_noticed = time.monotonic() - killed_at
        tui_dashboard_line = app.state.connection.detail

        head_killed_at = time.monotonic()
        await asyncio.to_thread(cluster.kill_host, cluster.head)
        head_line = one_line_error(await run_cli("status", *args, timeout=120))
        head_noticed = time.monotonic() - head_killed_at
        restarted_at = time.monotonic()
        await asyncio.to_thread(cluster.restart_head)
        back_at = time.monotonic()
        await wait_for(
            lambda: (
                app.state.connection.phase == "connected"
                and app.state.info is not None
                and app.state.info.session_name != old_session
            ),
            120,
            "the TUI to show the new session",
        )
        recovered = time.monotonic() - back_at
        await wait_for(
            lambda: (
                app.state.snapshot is not None
                and sum(n.alive for n in app.state.snapshot.nodes) == len(cluster.ray_hosts)
            ),
            60,
            "every node of the new session",
        )
        snapshot, info = app.state.snapshot, app.state.info
        assert snapshot is not None and info is not None
    status = run_cockpit("status", *args, "--json")
    assert status.returncode == 0, status.stderr
    warning = next((m for m in said if info.session_name in m), "")
    assert not old_nodes & {n.node_id for n in snapshot.nodes}, "old and new nodes mixed"
    assert old_job not in {j.key for j in snapshot.jobs}, "an old session's job shown in the new session"
    assert any(info.session_name in message and old_session in message for message in said), said
    record(
        Figure(
            key="4-dashboard-then-head",
            fault="the head's dashboard process killed (GCS alive), then the whole head killed and restarted",
            user_sees=f"`cockpit status`: `{dashboard_line}`; TUI: `{tui_dashboard_line}`; the head down: "
            f"`cockpit status`: `{head_line}`; once the head is back the TUI warns "
            f"`{warning}`, the new nodes, "
            "no job of the old session",
            notice_s=tui_noticed,
            recover_s=recovered,
            lines_lost=None,
            notes=f"notice: the TUI, after the dashboard was killed ({tui_noticed:.1f} s); `cockpit status` "
            f"answered in one line within {head_noticed:.1f} s of the head's death; recover: from the head "
            f"(and the workers' Ray nodes) up again to the TUI showing the new session; the restart itself "
            f"took {back_at - restarted_at:.1f} s",
        )
    )


def stacks_of(cluster: MultiHost, job_id: str, *extra: str) -> tuple[dict[str, Any], float]:
    started = time.monotonic()
    done = run_cockpit(
        "stacks", cluster.target, *cluster.cli_args(), "--job", job_id, "--via", "ssh", "--json", *extra
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout), time.monotonic() - started


def failure_of(doc: dict[str, Any], host: Host) -> str:
    """What the stacks report says about HOST (its failures' reasons, or that it is missing)."""
    reasons = [f["reason"] for f in doc["failures"] if host.ip in f["node"] or host.hostname in f["node"]]
    missing = [m for m in doc["missing_nodes"] if host.ip in m or host.hostname in m]
    return "; ".join(reasons + missing)


def dumped_ips(doc: dict[str, Any]) -> set[str]:
    return {m["node_ip"] for g in doc["groups"] for m in g["members"]}


@every_fault
def test_fault_a_worker_hosts_sshd_down_then_its_host_key_changed(multihost: MultiHost) -> None:
    """A worker host's sshd stopped, then its host key changed (a reinstalled machine): `cockpit stacks`
    takes every other host's stacks and says why that one has none; the changed key is refused even with
    --accept-new, and nothing is written to known_hosts."""
    cluster = multihost
    broken = cluster.workers[2]
    others = {w.ip for w in cluster.workers} - {broken.ip}
    ips = tuple(w.ip for w in cluster.workers)
    known_before = cluster.known_hosts.read_bytes()
    with fault_job_running(cluster, "sshd", int(300 / PERIOD), ips) as job_id:
        wait_for_placed(cluster, job_id)
        cluster.stop_sshd(broken)
        try:
            down, down_took = stacks_of(cluster, job_id)
        finally:
            cluster.start_sshd(broken)
        old_key = broken.host_public_key
        key, public = broken.host_key, broken.host_key.with_name(broken.host_key.name + ".pub")
        shutil.copy2(key, key.with_name(key.name + ".old"))
        shutil.copy2(public, key.with_name(key.name + ".old.pub"))
        try:
            cluster.change_host_key(broken)
            changed, changed_took = stacks_of(cluster, job_id, "--accept-new")
        finally:
            # The host's own key back (as its admin would restore it), for the tests after this one.
            cluster.stop_sshd(broken)
            restore_host_key(cluster, broken, old_key)
        healthy, _ = stacks_of(cluster, job_id)
    assert others <= dumped_ips(down) and broken.ip not in dumped_ips(down), down
    assert others <= dumped_ips(changed) and broken.ip not in dumped_ips(changed), changed
    down_reason, key_reason = failure_of(down, broken), failure_of(changed, broken)
    assert down_reason and key_reason, (down, changed)
    assert "host key" in key_reason.lower() and "changed" in key_reason.lower(), key_reason
    assert cluster.known_hosts.read_bytes() == known_before  # nothing accepted, nothing written
    assert {w.ip for w in cluster.workers} <= dumped_ips(healthy)  # and the host is back as it was
    record(
        Figure(
            key="5-sshd-and-host-key",
            fault="a worker host's sshd stopped; then its host key changed",
            user_sees=f"`cockpit stacks`: the other hosts' stacks, and for that host `{down_reason}`; with "
            f"a changed key (even with --accept-new) `{key_reason.replace(str(cluster.root), 'HARNESS')}`; "
            "known_hosts untouched",
            notice_s=down_took,
            recover_s=None,
            lines_lost=None,
            notes=f"notice: the whole `cockpit stacks` run with that host's sshd down ({down_took:.1f} s; "
            f"{changed_took:.1f} s with the changed key)",
        )
    )


def restore_host_key(cluster: MultiHost, host: Host, public_key: str) -> None:
    """HOST's sshd started with the key pair it had before `change_host_key` (kept aside by this test)."""
    saved = host.host_key.with_name(host.host_key.name + ".old")
    saved.replace(host.host_key)
    saved.with_name(saved.name + ".pub").replace(host.host_key.with_name(host.host_key.name + ".pub"))
    host.host_public_key = public_key
    cluster.start_sshd(host)


SLOW_LINK = "login-to-jump link at 200 ms each way and 1 % loss"
SLOW_LINK_WITHOUT_NETEM = (
    "login-to-jump link at 200 ms each way (no loss: neither tc netem nor nftables here)"
)
DELAY_S = 0.2


def through_relay(cluster: MultiHost, tmp_path: Path, port: int) -> Path:
    """The harness's SSH config with the jump host reached through a relay on 127.0.0.1:PORT (its host
    key still checked under its own address)."""
    config = tmp_path / "ssh_config"
    text = cluster.ssh_config.read_text()
    plain = f"    HostName {cluster.jump.ip}\n"
    assert plain in text
    relayed = f"    HostName 127.0.0.1\n    Port {port}\n    HostKeyAlias {cluster.jump.ip}\n"
    config.write_text(text.replace(plain, relayed, 1))
    return config


@every_fault
async def test_fault_a_slow_lossy_link_between_login_and_head(multihost: MultiHost, tmp_path: Path) -> None:
    """200 ms each way and 1 % loss between the login side and the jump host (the path to the head):
    the TUI's screens answer keys at once, and no poll is asked again while its last answer is under
    way (at most one request of each kind in flight, every screen shown). Where the kernel has no
    `tc netem`, the delay comes from a relay on the login side and the loss from nftables in the jump
    host's namespace (neither where `nft` is missing too), and the figure says which."""
    cluster = multihost
    async with contextlib.AsyncExitStack() as stack:
        if cluster.netem_available:
            how = "tc netem, 200 ms each way, 1 % loss"
            options = cluster.connect_options()
            cluster.slow_link(cluster.jump, delay_ms=200, loss_percent=1.0)
            stack.callback(cluster.clear_slow_link, cluster.jump)
        else:
            link = await stack.enter_async_context(relay(f"tcp://{cluster.jump.ip}:22", delay=DELAY_S))
            port = int(link.url.rsplit(":", 1)[1])
            options = connect_options(cluster, through_relay(cluster, tmp_path, port))
            if cluster.loss_available:
                how = (
                    "a relay on the login side, 200 ms each way, and 1 % of the jump host's packets in "
                    f"and out dropped by nftables in its namespace ({cluster.netem_reason})"
                )
                cluster.drop_packets(cluster.jump, 1.0)
                stack.callback(cluster.clear_drops, cluster.jump)
            else:
                why = f"{cluster.netem_reason}; {cluster.loss_reason}"
                how = f"a relay on the login side, 200 ms each way, no loss ({why})"
        app = CockpitApp(parse_target(cluster.target), options)
        started = time.monotonic()
        async with app.run_test(size=(160, 40)) as pilot:
            await wait_for(lambda: app.state.snapshot is not None, 120, "the first poll over the slow link")
            first = time.monotonic() - started
            keys: list[float] = []
            for _round in range(3):
                for key in ("1", "2", "3", "4", "5", "6", "1"):
                    pressed = time.monotonic()
                    await pilot.press(key)
                    keys.append(time.monotonic() - pressed)
                    await asyncio.sleep(2.0)
            piled = piled_up(await app.cluster_feed.dashboard())
            phase = app.state.connection.phase
            dropped = cluster.dropped(cluster.jump) if cluster.loss_available else 0
    assert not piled, piled
    assert phase == "connected"
    record(
        Figure(
            key="6-slow-link",
            fault=SLOW_LINK if cluster.netem_available or cluster.loss_available else SLOW_LINK_WITHOUT_NETEM,
            user_sees=f"the TUI connected and polling; screens switch in {max(keys) * 1000:.0f} ms at most; "
            "at most 1 request of each kind in flight",
            notice_s=None,
            recover_s=None,
            lines_lost=None,
            notes=f"slowed by {how}; the first poll's answer {first:.1f} s after start; "
            f"{len(keys)} screen switches over {len(keys) * 2} s"
            + (
                f"; {dropped} packets dropped"
                if cluster.loss_available and not cluster.netem_available
                else ""
            ),
        )
    )
