"""Provides the session fixtures: one real local Ray cluster (3 nodes x 2 logical GPUs), a demo job, a
real one-node Slurm, and one head per Ray version of the tested matrix (`ray_head`)."""

from __future__ import annotations

import asyncio
import os
import re
import resource
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from cockpit.core.jobs import profiles
from cockpit.core.jobs.overrides import parse_overrides
from tests.harness.cluster import (
    FAST_HEALTH_CHECKS,
    NO_PRESTART,
    QUIET_LOG_MONITORS,
    ClusterHandle,
    running_cluster,
)
from tests.harness.cpu_ledger import CpuLedger
from tests.harness.cpu_ledger import start as ledger_start
from tests.harness.properties import load_suite_profile
from tests.harness.ray_versions import MATRIX, OldHead, build_in_background, old_head
from tests.harness.slurm import SlurmCluster, missing_slurm_binaries, start_slurm

if TYPE_CHECKING:  # (the harness modules that import Ray or Textual load only when a fixture runs)
    from tests.harness.hang_jobs import HungJob
    from tests.harness.headless import HeadlessHead
    from tests.harness.multihost import MultiHost
    from tests.harness.run import FinishedRun
    from tests.harness.sshd import SshServer

load_suite_profile()
# Every Ray the tests start, in any process or host:
for _name, _value in (QUIET_LOG_MONITORS | NO_PRESTART).items():
    os.environ.setdefault(_name, _value)

SAMPLES = Path(__file__).resolve().parents[2] / "shared" / "ray-2.60-samples"
"""Dashboard responses captured from Ray 2.60 (../shared beside the checkout)."""


@pytest.fixture(scope="session")
def samples_dir() -> Path:
    if not SAMPLES.is_dir():
        pytest.skip(f"captured Ray samples not found at {SAMPLES} (../shared is laid beside the checkout)")
    return SAMPLES


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterHandle]:
    """The real cluster every integration and UI test shares; `local` resolves to it in subprocesses."""
    state_dir = tmp_path_factory.mktemp("cockpit-state")
    previous = os.environ.get("COCKPIT_STATE_DIR")
    os.environ["COCKPIT_STATE_DIR"] = str(state_dir)
    try:
        with running_cluster(state_dir, env=FAST_HEALTH_CHECKS) as handle:
            yield handle
    finally:
        if previous is None:
            os.environ.pop("COCKPIT_STATE_DIR", None)
        else:
            os.environ["COCKPIT_STATE_DIR"] = previous


@pytest.fixture(scope="session")
def demo_job(ray_cluster: ClusterHandle) -> Iterator[str]:
    """The demo RL job, running on the session cluster from the first test that needs it to the last
    (long enough for every test), then stopped: its 8 actors step all the time."""
    profile = profiles.load(profiles.find("demo"))
    request = profiles.render(profile, parse_overrides(["steps=100000"]), submission_id="test-demo")
    assert "runtime_env" not in request, "the demo's actors start without a runtime env (no setup_worker)"

    async def submit() -> str:
        async with ray_cluster.client() as client:
            submission_id = await client.submit_job(request)
            for _ in range(120):
                actors = await client.actors(filters=[("state", "=", "ALIVE")])
                if sum(1 for a in actors.rows if a.class_name != "JobSupervisor") >= 8:
                    return submission_id
                await asyncio.sleep(0.5)
            raise AssertionError("the demo job's 8 actors did not come up within 60 s")

    submission_id = asyncio.run(submit())
    yield submission_id
    from tests.harness.debug_jobs import _stop  # imports Ray: only once a cluster test ran

    _stop(ray_cluster, submission_id)


@pytest.fixture(scope="session")
def finished_demo(ray_cluster: ClusterHandle) -> FinishedRun:
    """One short run of the demo profile, followed to its end once for the session: the CLI, metrics and
    watch tests read the same finished job. One RolloutWorker (`rollout_workers=1`): five actors, not
    eight; what these tests read is the driver's step lines."""
    from tests.harness.run import FinishedRun, run_cockpit

    steps = 6
    done = run_cockpit(
        "submit",
        "local",
        "demo",
        f"steps={steps}",
        "step_seconds=0.2",
        "rollout_workers=1",
        "--follow",
        timeout=240,
    )
    assert done.returncode == 0, done.stderr + done.stdout[-2000:]
    found = re.search(r"^submitted (\S+)$", done.stdout, re.MULTILINE)
    assert found, done.stdout
    return FinishedRun(submission_id=found.group(1), steps=steps, follow=done)


@pytest.fixture(scope="session")
def hung_demo(ray_cluster: ClusterHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HungJob]:
    """One job of the `demo-hang-fast` profile, hung, for the tests that only look at a hung job (stacks
    from the command line and over SSH, `cockpit watch`); stopped after the last of them. Each such job
    starts 8 actors."""
    from cockpit.core.connect.connection import open_connection
    from cockpit.core.targets import parse_target
    from tests.harness.debug_jobs import _stop
    from tests.harness.hang_jobs import FAST_PROFILE, HungJob, fast_profile_home, wait_hung
    from tests.harness.run import run_cockpit

    env = fast_profile_home(tmp_path_factory.mktemp("hang-home"))
    done = run_cockpit("submit", "local", FAST_PROFILE, env={**os.environ, **env})
    found = re.search(r"^submitted (\S+)$", done.stdout, re.MULTILINE)
    assert done.returncode == 0 and found, done.stderr
    submission_id = found.group(1)
    try:

        async def hung() -> str:
            async with open_connection(parse_target("local")) as connection:
                await wait_hung(connection, submission_id, local=True)
                return (await connection.client.job(submission_id)).job_id or ""

        yield HungJob(submission_id=submission_id, job_id=asyncio.run(hung()), env=env)
    finally:
        _stop(ray_cluster, submission_id)


def _env_pointing_at(name: str, path: Path) -> Iterator[None]:
    """NAME set to PATH (a file that does not exist) for the session, then put back."""
    previous = os.environ.get(name)
    os.environ[name] = str(path)
    yield
    if previous is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = previous


@pytest.fixture(autouse=True, scope="session")
def no_user_config(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The tests see the default configuration, whatever config.yaml the person running them keeps
    (tests that want one write their own and point COCKPIT_CONFIG at it, or call `config.load`)."""
    yield from _env_pointing_at("COCKPIT_CONFIG", tmp_path_factory.mktemp("no-config") / "config.yaml")


@pytest.fixture(scope="session")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """A real one-node Slurm (munged, slurmctld, slurmd; 16 CPUs, 4 logical GPUs) for the whole session.

    Its client commands need `SlurmCluster.env` (SLURM_CONF). It is stopped at the end of the session,
    its jobs cancelled and their leftover processes killed.
    """
    if os.geteuid() != 0:
        pytest.skip("the Slurm harness runs slurmctld and slurmd as root (SlurmUser=root); not root")
    missing = missing_slurm_binaries()
    if missing:
        pytest.fail(
            f"Slurm is not installed ({', '.join(missing)} not found); scripts/test installs slurmctld, "
            "slurmd, slurm-client and munge",
            pytrace=False,
        )
    with start_slurm(tmp_path_factory.mktemp("slurm")) as cluster:
        yield cluster


@pytest.fixture(autouse=True, scope="session")
def no_user_role_table(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The tests see the built-in roles, whatever role table the person running them keeps in their
    config directory (tests that want one point COCKPIT_ROLES at their own)."""
    yield from _env_pointing_at("COCKPIT_ROLES", tmp_path_factory.mktemp("no-roles") / "roles.yaml")


TIERS = ("slurm", "ray_head", "headless_head", "multihost", "demo_job", "hung_demo", "ray_cluster")
"""The heavy session fixtures, in the order their tests run, after every test that needs none of them:
each is started for its tier (on first use) and stopped right after the last test that needs it
(`pytest_runtest_teardown`), so no cluster idles under tests that do not use it. The demo job's tests
run first among the session cluster's, so the job (8 actors stepping) is stopped early too."""


PARTS = {
    "cluster": (("demo_job", "hung_demo", "ray_cluster"), ()),
    "hosts": (
        ("ray_head", "headless_head", "multihost"),
        ("tests/e2e/test_installed_wheel.py", "tests/integration/test_oom_kill.py"),
    ),
}
"""`--part`: `./scripts/test` runs three pytest processes side by side: the session cluster's tests
(`cluster`), the hosts of their own (`hosts`: the heads of the Ray versions, the head without a
dashboard, the multi-host hosts, and the tests that start a cluster or an installed cockpit of their own
and wait on it most of their time), and the rest (no cluster, Slurm). Per part: the tiers of its fixtures
and the tests of no tier named for it. Each tier keeps its order and its stop-after-the-last-test inside
its process. A test of the session cluster, of the hosts or of a Ray head waits on Ray most of its time,
while the rest's first tier (unit, property and fixture-UI tests) is one core's work in Python: side by
side they overlap. Measured (2026-11-28, docs/testing.md, "Three processes"): with two parts the
cluster's ran 595 s of a 597 s run, its hosts' tiers 130 s of it, with the machine 47% busy; with three
(the Ray versions in the rest) the rest's 489 s were the run's 491, the hosts' 270 s."""


FAULTS = "tests/integration/test_faults.py"
"""The fault tests (RELIABILITY.md), run after the other multi-host tests."""


def _part_of(item: pytest.Item) -> str:
    tier = _tier(item)
    for part, (tiers, tests) in PARTS.items():
        if (tier > 0 and TIERS[tier - 1] in tiers) or item.nodeid.startswith(tests):
            return part
    return "rest"


def _in_part(item: pytest.Item, part: str) -> bool:
    return part == "all" or _part_of(item) == part


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--part",
        choices=("all", *PARTS, "rest"),
        default="all",
        help="run only the session cluster's tests (cluster), only the hosts of their own (hosts), only the"
        " others (rest), or all (default)",
    )


def _tier(item: pytest.Item) -> int:
    """0 for a test needing no heavy fixture, else 1 + the index in TIERS of the first it needs."""
    needs = set(getattr(item, "fixturenames", ()))
    return next((1 + i for i, name in enumerate(TIERS) if name in needs), 0)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Order the tests by tier (`TIERS`; a stable sort, after pytest grouped the tests of each Ray
    version together), note the last test of each heavy fixture, and, when Ray version heads will be
    needed, build their virtualenvs (those not cached yet) in the background while the tests before them
    run: on a fresh machine each is a `pip install`."""
    part = config.getoption("part")
    deselected = [item for item in items if not _in_part(item, part)]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if _in_part(item, part)]
    # Inside the multi-host tier the fault tests go last: they cut links, stop sshds and restart Ray on
    # the shared hosts, and a host they restored can differ in what the path tests read of it.
    items.sort(key=lambda item: (_tier(item), FAULTS in item.nodeid))
    last: dict[str, pytest.Item] = {}
    for item in items:
        for name in TIERS:
            if name in getattr(item, "fixturenames", ()):
                last[name] = item
    config.stash[_LAST_USERS] = {
        id(item): [n for n in TIERS if last.get(n) is item] for item in last.values()
    }
    _TIER_OF.clear()
    _TIER_OF.update((item.nodeid, _tier(item)) for item in items)
    wanted = {
        version
        for item in items
        if item.get_closest_marker("ray_versions") is not None
        for version in MATRIX
        if version in item.nodeid
    }
    if wanted:
        build_in_background(v for v in MATRIX if v in wanted)


_LAST_USERS = pytest.StashKey[dict[int, list[str]]]()
_TIER_OF: dict[str, int] = {}
"""Test id -> its tier, for the time summary."""
_TIER_SECONDS: dict[int, float] = {}
_SUMMARY_LINES: list[str] = []
"""Lines for the end of the session's output (what a heavy fixture measured or could not do)."""
TIER_NAMES = (
    "no cluster",
    "Slurm",
    "Ray versions",
    "head without dashboard",
    "multi-host",
    "demo job",
    "hung job",
    "session cluster",
)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Add each phase's duration (setup, call, teardown) to its test's tier."""
    tier = _TIER_OF.get(report.nodeid)
    if tier is not None:
        _TIER_SECONDS[tier] = _TIER_SECONDS.get(tier, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line: where the session's time went, by tier (the heavy fixtures' start and stop included).
    The suite's budget and how to keep it: docs/testing.md."""
    if _TIER_SECONDS:
        counts: dict[int, int] = {}
        for tier in _TIER_OF.values():
            counts[tier] = counts.get(tier, 0) + 1
        parts = [
            f"{TIER_NAMES[t]} {_TIER_SECONDS.get(t, 0.0):.0f} s ({counts[t]} tests)" for t in sorted(counts)
        ]
        terminalreporter.write_line(f"time by tier: {' · '.join(parts)} (the budget: docs/testing.md)")
        own = resource.getrusage(resource.RUSAGE_SELF)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        terminalreporter.write_line(
            f"CPU: {own.ru_utime + own.ru_stime:.0f} s in pytest, "
            f"{children.ru_utime + children.ru_stime:.0f} s in the processes it waited for "
            "(a figure a busy machine moves much less than wall time)"
        )
    for line in _SUMMARY_LINES:
        terminalreporter.write_line(line)
    if _LEDGER is not None:
        terminalreporter.write_line(_LEDGER.write())


_LEDGER = CpuLedger(Path(os.environ["COCKPIT_CPU_LEDGER"])) if os.environ.get("COCKPIT_CPU_LEDGER") else None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[object]:
    """With COCKPIT_CPU_LEDGER set: the machine's busy CPU during this test (tests/harness/cpu_ledger.py)."""
    if _LEDGER is None:
        return (yield)
    cpu, wall = ledger_start()
    try:
        return (yield)
    finally:
        after_cpu, after_wall = ledger_start()
        tier = _TIER_OF.get(item.nodeid)
        _LEDGER.record(
            item.nodeid, TIER_NAMES[tier] if tier is not None else "", after_cpu - cpu, after_wall - wall
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After the last test that needs a heavy session fixture, stop it (its dependants first), as pytest
    would at the end of the session: its failure to stop is this test's teardown error."""
    result = yield
    names = item.config.stash.get(_LAST_USERS, {}).get(id(item), [])
    info = getattr(item, "_fixtureinfo", None)
    request = getattr(item, "_request", None)
    if nextitem is not None and names and info is not None and request is not None:
        for name in names:
            for fixturedef in info.name2fixturedefs.get(name, ()):
                fixturedef.finish(request)
    return result


@pytest.fixture(scope="session")
def headless_head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HeadlessHead]:
    """A real head started with `--include-dashboard=false` (token auth on) and one node joining it, in
    its own state directory, for the tests of a head without its dashboard (CLI and TUI, over SSH);
    stopped after the last of them (its tier)."""
    from tests.harness.headless import headless_head as start

    with start(tmp_path_factory.mktemp("headless-state")) as head:
        yield head


@pytest.fixture(scope="session")
def headless_sshd(
    tmp_path_factory: pytest.TempPathFactory, headless_head: HeadlessHead
) -> Iterator[SshServer]:
    """The sshd in front of the head without a dashboard (`head-node` in `headless_ssh_config`)."""
    from tests.harness.sshd import start_sshd

    server = start_sshd(tmp_path_factory.mktemp("headless-sshd"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def headless_ssh_config(tmp_path_factory: pytest.TempPathFactory, headless_sshd: SshServer) -> Path:
    path = tmp_path_factory.mktemp("headless-ssh-config") / "config"
    path.write_text(headless_sshd.ssh_config_entry("head-node"))
    return path


@pytest.fixture(scope="session")
def multihost(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MultiHost]:
    """The multi-host cluster (tests/harness/multihost.py): a jump host, a head and 3 worker hosts, each a
    network namespace with its own IP, host name, sshd and Ray node; the cockpit reaches it as
    `multihost.target` with `multihost.cli_args()`. Shared by the session's multihost tests, stopped after
    the last (nothing of it is left: namespaces, links, processes). Skipped where not root or no
    `ip netns`."""
    from tests.harness import netns

    reason = netns.unavailable()
    if reason is not None:
        pytest.skip(reason)
    from tests.harness.multihost import leftovers
    from tests.harness.multihost import multihost as start

    with start(tmp_path_factory.mktemp("multihost")) as cluster:
        timings = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in cluster.timings.items())
        _SUMMARY_LINES.append(
            f"multi-host cluster on {cluster.subnet}.0/24 started: {timings} "
            f"({cluster.start_cpu_seconds:.0f} CPU-s in its hosts' processes)"
        )
        _SUMMARY_LINES.append(
            f"multi-host cluster: {cluster.netem_reason}; packet loss: {cluster.loss_reason}"
        )
        yield cluster
    left = leftovers(cluster.prefix)
    assert not left, f"the multi-host cluster left {left}"


@pytest.fixture(scope="session")
def multihost_job(multihost: MultiHost) -> str:
    """A job on the multi-host cluster with one actor on each worker host (tests/harness/multihost_job.py),
    each spinning in `spin_on_worker_host` after printing its host name to its log; its submission id.
    It runs until the cluster stops."""
    import sys
    import time

    from tests.harness import multihost_job

    ips = " ".join(w.ip for w in multihost.workers)
    submission_id = multihost.submit_job(f"{sys.executable} {multihost_job.__file__} {ips}", "multihost-job")
    deadline = time.monotonic() + 120
    while "actors placed" not in (logs := multihost.job_logs(submission_id)):
        assert time.monotonic() < deadline, f"the multi-host job's actors were not placed:\n{logs[-3000:]}"
        time.sleep(0.5)
    return submission_id


@pytest.fixture(scope="session")
def ray_head(request: pytest.FixtureRequest) -> Iterator[OldHead]:
    """A one-node head of the Ray version given by indirect parametrization (`MATRIX` items), shared by
    every test of that version in the session: pytest groups the tests by version, so each head is
    started once and stopped before the next version's starts."""
    with old_head(request.param) as started:
        yield started
