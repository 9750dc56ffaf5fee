"""A real out-of-memory kill by Ray's memory monitor, seen three ways: the status bar warns before it, the
Actors screen's death cause says OOM after it, and `cockpit memory local --json` lists it. Then an actor
that lives until the test kills it: its RSS on the Actors screen and first in `cockpit actors --sort
memory`; then SIGKILL, standing for the kernel's OOM killer where no kernel log names it: both say it
may have been one, never that it was.

The cluster is a one-node cluster of its own, started with a kill threshold 6 GiB above the memory this
machine has in use (`RAY_memory_usage_threshold`), so the machine is never at risk: an actor of the
rollout role, once the cockpit watches, takes at once all but 2.5 GiB of what is left below the threshold
then, counted by the actor as it starts (the threshold counts the whole machine's memory, which the tests
running beside this one move by a gigabyte or two, before and during the growth), then 25 MB every half
second (50 MB/s: the threshold is about 50 s away; a node rising toward it is flagged from three
quarters of it, once three of the reporter's readings, one every 5 s, make a trend, and its last 1.2 GiB,
5% of this machine's memory, is flagged `near` at any rate, about 24 s: a jump of a gigabyte or so beside
it still leaves readings between the warning and the kill; the reporter lists a new process after tens
of seconds) until the monitor kills it; it stops
growing 4 GiB past its first take or after 240 s, whatever happens. Roles and classes come from the
built-in role table.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from cockpit.core.local import record
from cockpit.core.targets import parse_target
from cockpit.ui.app import CockpitApp
from cockpit.ui.widgets.actor_table import ActorTableView
from cockpit.ui.widgets.status_bar import StatusBar
from tests.harness.cluster import ClusterHandle, running_cluster
from tests.harness.run import run_cockpit, until

pytestmark = [pytest.mark.cluster]

ROOM = 6 * 2**30
"""Memory between what is in use when the cluster starts and its kill threshold."""
LEFT = 5 * 2**30 // 2
"""What the actor leaves below the threshold after its first take: 50 s of growth at 50 MB/s."""
GROWER = r"""
import os, sys, time, ray
ray.init(address=sys.argv[1])

@ray.remote(num_cpus=0, max_restarts=0)
class RolloutWorker:
    def pid(self):
        return os.getpid()

    def grow(self, threshold, left, step, more, deadline):
        meminfo = dict(line.split(":", 1) for line in open("/proc/meminfo").read().splitlines())
        total, free = (int(meminfo[key].split()[0]) * 1024 for key in ("MemTotal", "MemAvailable"))
        fast = max(0, int(threshold * total) - (total - free) - left)
        held, end = [bytearray(fast)], time.time() + deadline  # zeroed: every page touched, so RSS
        while sum(map(len, held)) < fast + more and time.time() < end:
            held.append(bytearray(step))
            time.sleep(0.5)
        return sum(map(len, held))

@ray.remote(num_cpus=0, max_restarts=0)
class Critic:
    def pid(self):
        return os.getpid()

    def wait(self, seconds):
        time.sleep(seconds)

worker = RolloutWorker.options(name="rollout_0").remote()
print(ray.get(worker.pid.remote()), flush=True)
sys.stdin.readline()  # the test says when: once the cockpit watches
try:
    grow = worker.grow.remote(float(sys.argv[2]), LEFT, 25 * 2**20, 4 * 2**30, 240)
    print("grew", ray.get(grow), flush=True)
except Exception as exc:
    print("died", type(exc).__name__, flush=True)
victim = Critic.options(name="critic_0").remote()  # the test SIGKILLs it: the kernel's OOM killer's way
print("victim", ray.get(victim.pid.remote()), flush=True)
try:
    ray.get(victim.wait.remote(120))
except Exception as exc:
    print("victim died", type(exc).__name__, flush=True)
"""


def in_use() -> int:
    """Bytes of memory in use on this machine, as Ray's monitor counts them (total - MemAvailable)."""
    fields = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    return (int(fields["MemTotal"].split()[0]) - int(fields["MemAvailable"].split()[0])) * 1024


@pytest.fixture
def oom_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[ClusterHandle, float]]:
    """The cluster, and its kill threshold (a share of this machine's memory)."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    threshold = round((in_use() + ROOM) / total, 4)
    env = {"RAY_memory_usage_threshold": str(threshold), "RAY_memory_monitor_refresh_ms": "250"}
    with running_cluster(tmp_path / "state", nodes=1, gpus=0, env=env) as handle:
        monkeypatch.setenv("COCKPIT_STATE_DIR", str(handle.state_dir))  # `local` is this cluster
        yield handle, threshold


def critic_rss(lines: list[str]) -> bool:
    """The alive critic's row shows its resident memory."""
    row = next((line for line in lines if "critic_0" in line and "ALIVE" in line), "")
    return " MiB" in row or " GiB" in row


def logged_threshold(app: CockpitApp) -> bool:
    nodes = app.state.memory.nodes
    return bool(nodes) and nodes[0].threshold is not None and nodes[0].threshold.source == "raylet.out"


def killed(handle: ClusterHandle) -> float | None:
    """When Ray's memory monitor killed a worker of this cluster (posix seconds), or None yet."""
    query = (
        "limit=100&detail=true&filter_keys=exit_type&filter_predicates=%3D&filter_values=NODE_OUT_OF_MEMORY"
    )
    token = record.cluster_token(handle.state_dir)
    request = urllib.request.Request(
        f"{handle.url}/api/v0/workers?{query}", headers={"Authorization": f"Bearer {token}"} if token else {}
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        rows = json.load(answer)["data"]["result"]["result"]
    ends = [row["end_time_ms"] / 1000 for row in rows if row.get("end_time_ms")]
    return min(ends) if ends else None


async def test_an_oom_kill_is_warned_before_then_named_in_the_tui_and_the_cli(
    oom_cluster: tuple[ClusterHandle, float], tmp_path: Path
) -> None:
    cluster, threshold = oom_cluster
    token = record.cluster_token(cluster.state_dir) or ""
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token}
    driver = subprocess.Popen(
        [
            sys.executable,
            "-c",
            GROWER.replace("LEFT", str(LEFT)),
            cluster.cluster.gcs_address,
            str(threshold),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=(tmp_path / "driver.err").open("w"),
        text=True,
        env=env,
    )
    try:
        assert driver.stdout is not None
        first = driver.stdout.readline()
        said = (tmp_path / "driver.err").read_text()[-2000:]
        assert first.strip().isdigit(), f"the driver did not start: {first!r} {said}"
        pid = int(first)
        app = CockpitApp(parse_target("local"))
        warnings: list[tuple[float, str]] = []
        async with app.run_test(size=(200, 50)) as pilot:
            # The cockpit read the threshold the raylet logged before the actor starts to grow.
            await until(pilot, lambda: logged_threshold(app), timeout=60)
            assert driver.stdin is not None
            driver.stdin.write("go\n")
            driver.stdin.flush()
            await pilot.press("3")  # the Actors screen (the status bar is on every screen)
            table = app.screen.query_one(ActorTableView)

            # Each warning with the moment the status bar took it (a poll from here would see it late on
            # a busy machine: the next look can be seconds after the repaint).
            def took(said: str) -> None:
                if said and (not warnings or warnings[-1][1] != said):
                    warnings.append((time.time(), said))

            bar = app.screen.query_one(StatusBar)
            bar.watch(bar, "memory", took, init=True)
            await until(pilot, lambda: killed(cluster), timeout=200)
            kill_time = killed(cluster)
            assert kill_time is not None
            assert warnings, "no memory warning on the status bar before the kill"
            first_at, first = warnings[0]
            assert first_at < kill_time, (warnings, kill_time)
            # The threshold the cluster logged (raylet.out), not Ray's default 95%; figures with units.
            assert first.startswith("OOM risk: ") and f"(Ray kills at {threshold:.0%})" in first, first
            await until(
                pilot, lambda: any("OOM (Ray memory monitor)" in line for line in table.text_lines()), 60
            )
            # The next actor lives until the test kills it: its RSS column (a node's reporter lists a new
            # process only after tens of seconds) and `cockpit actors --sort memory`, the biggest first.
            said = await asyncio.to_thread(lambda: (driver.stdout.readline(), driver.stdout.readline()))
            assert said[0].startswith("died") and said[1].startswith("victim "), said
            victim = int(said[1].split()[1])
            await until(pilot, lambda: critic_rss(table.text_lines()), 120)
            listed = await asyncio.to_thread(
                run_cockpit, "actors", "local", "--state", "ALIVE", "--sort", "memory", "--json"
            )
            biggest = json.loads(listed.stdout)["actors"][0]
            assert biggest["name"] == "critic_0" and biggest["rss_bytes"] > 10 * 2**20, biggest
            # A SIGKILL, as the kernel's OOM killer sends it: Ray cannot tell it from a crash, nor can
            # the cockpit without a kernel log line naming the pid; it says it may have been.
            os.kill(victim, signal.SIGKILL)
            await until(
                pilot,
                lambda: any("critic_0" in x and "kernel OOM?" in x for x in table.text_lines()),
                60,
            )
        out, _err = driver.communicate(timeout=60)
        assert driver.returncode == 0 and "victim died" in out, out
    finally:
        driver.kill()
        driver.wait(30)

    done = run_cockpit("memory", "local", "--json", timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    kill = next(k for k in report["kills"] if k["pid"] == pid)
    node = report["nodes"][0]
    assert kill["kind"] == "ray" and kill["label"] == "OOM (Ray memory monitor)"
    assert kill["ip"] == node["ip"] and kill["node_id"] == node["node_id"]
    assert (kill["class_name"], kill["actor_name"], kill["role"]) == ("RolloutWorker", "rollout_0", "rollout")
    assert kill["rss_bytes"] > 2**30 and "running low on memory" in kill["message"]
    assert node["threshold"]["source"] in ("raylet.out", "OOM kill")
    maybe = next(k for k in report["kills"] if k["pid"] == victim)
    assert maybe["kind"] == "kernel?" and maybe["role"] == "critic" and maybe["rss_bytes"] is None
    assert maybe["label"] == "killed (SIGKILL or crash; kernel OOM?)"
    assert abs(node["threshold"]["bytes"] - kill["threshold_bytes"]) < 2**20
