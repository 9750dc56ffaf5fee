"""The Doctor screen (key 8) on the real local cluster: a demo-hang job whose profile says `hang_after: 4s`
is seen hung while the user is on the Cluster screen (status bar, banner); `S` opens the Doctor screen
and takes the job's stacks with real py-spy: the stuck rank is a group of one, in wait_for_weights_sync."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from cockpit.core.targets import parse_target
from cockpit.ui.app import CockpitApp
from cockpit.ui.screens.doctor import DoctorScreen
from cockpit.ui.widgets.status_bar import StatusBar
from tests.harness.cluster import ClusterHandle
from tests.harness.debug_jobs import _stop
from tests.harness.hang_jobs import FAST_PROFILE, fast_profile_home
from tests.harness.run import run_cockpit, until

pytestmark = pytest.mark.cluster


@pytest.fixture
def hung_job(ray_cluster: ClusterHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A job of the `demo-hang-fast` profile (hang_after 4s), found by the app through XDG_CONFIG_HOME."""
    env = fast_profile_home(tmp_path, hang_after="8s")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    done = run_cockpit("submit", "local", FAST_PROFILE, env={**os.environ, **env})
    found = re.search(r"^submitted (\S+)$", done.stdout, re.MULTILINE)
    assert done.returncode == 0 and found, done.stderr
    try:
        yield found.group(1)
    finally:
        _stop(ray_cluster, found.group(1))


async def test_a_hang_is_said_everywhere_and_S_takes_its_stacks(hung_job: str) -> None:
    app = CockpitApp(parse_target("local"))
    async with app.run_test(size=(200, 50)) as pilot:

        def watch():  # type: ignore[no-untyped-def]
            return app.state.doctor.watches.get(hung_job)

        # Followed with its profile's policy, and seen hung while the user is on the Cluster screen.
        await until(pilot, lambda: watch() is not None and watch().hang_after == 8.0, timeout=120)
        assert watch().watching == "lines matching ^step=\\d+" and not watch().error
        await until(pilot, lambda: watch().hung, timeout=120)
        bar = str(app.screen.query_one(StatusBar).render())
        assert re.search(
            rf"⚠ no progress for \d+ s · GPU activity unknown · {hung_job} \(S: stacks\)", bar
        ), bar
        assert any(n.title == "Hang?" and hung_job in str(n.message) for n in app._notifications)

        await pilot.press("S")
        assert isinstance(app.screen, DoctorScreen)
        screen = app.screen

        def labels() -> list[str]:
            report = app.state.doctor.report
            return (
                [g.label for g in report.groups] if report is not None and not app.state.doctor.taking else []
            )

        def taken() -> str:
            """What the finished report holds, for a failure message."""
            report = app.state.doctor.report
            if report is None:
                return "no report"
            return f"groups {labels()}, failures {report.failures}, missing {report.missing_nodes}"

        # A report that lacks the stuck rank (a py-spy dump that timed out on a loaded machine: the report
        # names the failure) is taken again once, as a user would with `s`; the first one is said.
        await until(pilot, lambda: bool(labels()), timeout=90)
        first_take = taken()
        if "in wait_for_weights_sync" not in labels():
            await pilot.press("s")
            try:
                await until(pilot, lambda: "in wait_for_weights_sync" in labels(), timeout=90)
            except AssertionError as exc:
                raise AssertionError(f"{exc}: first take: {first_take}; then: {taken()}") from None
        report = app.state.doctor.report
        assert report is not None and report.source == "local"
        first = report.groups[0]
        assert (first.label, [m.who for m in first.members]) == (
            "in wait_for_weights_sync",
            ["RolloutWorker_0"],
        )
        assert report.groups[1].label == "in ray.get in all_gather_weights" and report.groups[1].count == 3
        assert report.groups[-1].idle
        table = screen.query_one("#stack-groups")
        assert table.row_count == len(report.groups)
        await pilot.pause()
        details = str(screen.query_one("#stack-details").render())
        assert (
            "wait_for_weights_sync  cockpit/demo/trainer.py:" in details
            and "RolloutWorker_0 [rollout]" in details
        )
