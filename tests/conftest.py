"""Provides the session fixtures: one real local Ray cluster (3 nodes x 2 logical GPUs), a demo job, a
real one-node Slurm, and one head per Ray version of the tested matrix (`ray_head`)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from cockpit.core.jobs import profiles
from tests.harness.cluster import ClusterHandle, running_cluster
from tests.harness.ray_versions import MATRIX, OldHead, build_in_background, old_head
from tests.harness.slurm import SlurmCluster, missing_slurm_binaries, start_slurm

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
        with running_cluster(state_dir) as handle:
            yield handle
    finally:
        if previous is None:
            os.environ.pop("COCKPIT_STATE_DIR", None)
        else:
            os.environ["COCKPIT_STATE_DIR"] = previous


@pytest.fixture(scope="session")
def demo_job(ray_cluster: ClusterHandle) -> str:
    """The demo RL job, running on the session cluster for the whole session (long enough for every test)."""
    profile = profiles.load(profiles.find("demo"))
    request = profiles.render(profile, submission_id="test-demo")
    request["runtime_env"]["env_vars"]["DEMO_STEPS"] = "100000"

    async def submit() -> str:
        async with ray_cluster.client() as client:
            submission_id = await client.submit_job(request)
            for _ in range(120):
                actors = await client.actors(filters=[("state", "=", "ALIVE")])
                if sum(1 for a in actors.rows if a.class_name != "JobSupervisor") >= 8:
                    return submission_id
                await asyncio.sleep(0.5)
            raise AssertionError("the demo job's 8 actors did not come up within 60 s")

    return asyncio.run(submit())


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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """When Ray version heads will be needed, build their virtualenvs (those not cached yet) in the
    background while the tests before them run: on a fresh machine each is a `pip install`."""
    wanted = {
        version
        for item in items
        if item.get_closest_marker("ray_versions") is not None
        for version in MATRIX
        if version in item.nodeid
    }
    if wanted:
        build_in_background(v for v in MATRIX if v in wanted)


@pytest.fixture(scope="session")
def ray_head(request: pytest.FixtureRequest) -> Iterator[OldHead]:
    """A one-node head of the Ray version given by indirect parametrization (`MATRIX` items), shared by
    every test of that version in the session: pytest groups the tests by version, so each head is
    started once and stopped before the next version's starts."""
    with old_head(request.param) as started:
        yield started
