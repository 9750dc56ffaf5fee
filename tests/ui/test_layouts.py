"""The cockpit screen (key 0) built from each shipped layout on fixture state (no cluster), at 80x24 and
200x50 (text snapshots, as the other screens' snapshots: the same fixture state, read by a test); the
screen needs what its panes need; tab moves between panes and Enter opens the pane's own screen; a broken
layout is one line with file, line and the panes that exist, and the cockpit falls back to the default."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cockpit.core.config.layouts import known_layouts
from cockpit.ui.app import CockpitApp
from cockpit.ui.layouts import COCKPIT_PANES, load_layout, load_layout_or_default
from cockpit.ui.screens.cluster import ClusterScreen
from cockpit.ui.screens.cockpit import PANES, CockpitLayoutScreen, PaneBox
from cockpit.ui.screens.gpus import GpuScreen
from tests.harness.snapshots import check_snapshot
from tests.ui.test_actors_fixture import screen_text
from tests.ui.test_fixture_state import fixture_state

SHIPPED = ("default", "compact", "wide", "gpu")


def normalized(text: str) -> str:
    """Ages of the fixture's nodes and jobs, and the join panel's wait, masked (they grow with the clock)."""
    text = re.sub(r"\b\d+(h\d+m|m\d+s|d\d+h) ago", "1h00m ago", text)
    text = re.sub(r"(RUNNING   \S+  )\S+", r"\g<1>1h00m", text)
    return re.sub(r"WAITING \d+s", "WAITING 0s", text)


def test_the_panes_a_layout_may_name_are_the_panes_the_screen_has() -> None:
    assert tuple(PANES) == COCKPIT_PANES


def test_the_shipped_layouts_load() -> None:
    assert set(SHIPPED) <= set(known_layouts())
    wide = load_layout("wide")
    assert {"nodes", "gpu_heatmap", "jobs", "driver_log"} <= set(wide.panes)
    assert wide.css_path is not None and "#row-3" in wide.css
    assert load_layout("gpu").cockpit[0] == ("gpu_heatmap",)
    assert load_layout("compact").cluster == ("nodes", "join")


@pytest.mark.parametrize("name", SHIPPED)
async def test_each_shipped_layout_at_80x24_and_200x50(name: str) -> None:
    for size in ((80, 24), (200, 50)):
        state = fixture_state()
        app = CockpitApp(state.target, state=state, offline=True, layout=name)
        async with app.run_test(size=size, notifications=True) as pilot:
            await pilot.pause()
            assert isinstance(app.screen, CockpitLayoutScreen)  # a layout chosen: the app opens on it
            assert not app._notifications
            text = normalized(screen_text(app))
            for pane in load_layout(name).panes:
                assert app.screen.query_one(f"#pane-{pane}", PaneBox).region.height >= 3, pane
            assert "0 Cockpit" in text and "cockpit-test-3" in text
            check_snapshot(f"layout_{name}_{size[0]}x{size[1]}.txt", text)


async def test_the_screen_needs_what_its_panes_need_and_enter_opens_a_pane() -> None:
    state = fixture_state()
    app = CockpitApp(state.target, state=state, offline=True, layout="wide")
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        # The union: the heatmap's GPUs, the jobs of the strip and the log, the paused workers.
        assert {"nodes", "gpus", "jobs", "paused"} <= state.shown_needs
        assert isinstance(app.focused, PaneBox) and app.focused.pane == "join"
        await pilot.press("tab", "tab", "tab")
        assert isinstance(app.focused, PaneBox) and app.focused.pane == "gpu_heatmap"
        await pilot.press("enter")
        assert isinstance(app.screen, GpuScreen)
        assert "actors" in state.shown_needs  # the GPU screen's own needs now
        await pilot.press("0")
        assert isinstance(app.screen, CockpitLayoutScreen)
        assert "paused" in state.shown_needs


async def test_without_a_layout_the_app_opens_on_the_cluster_screen_and_0_shows_the_default() -> None:
    state = fixture_state()
    app = CockpitApp(state.target, state=state, offline=True)
    async with app.run_test(size=(80, 24)) as pilot:
        assert isinstance(app.screen, ClusterScreen)
        await pilot.press("0")
        assert isinstance(app.screen, CockpitLayoutScreen)
        assert [box.pane for box in app.screen.query(PaneBox)] == list(load_layout("default").panes)


def user_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, text: str) -> Path:
    folder = tmp_path / "ray-cockpit" / "layouts"
    folder.mkdir(parents=True)
    path = folder / f"{name}.yaml"
    path.write_text(text)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    return path


async def test_a_broken_layout_is_one_line_and_the_cockpit_falls_back_to_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = user_layout(tmp_path, monkeypatch, "mine", "cockpit:\n  - nodes\n  - [jobs, gpu_hetmap]\n")
    layout, problem = load_layout_or_default("mine")
    assert layout.name == "default"
    expected = f"{path}:3: cockpit: unknown pane 'gpu_hetmap' (panes: {', '.join(COCKPIT_PANES)}) "
    assert problem == expected + "(the default layout is used)"

    state = fixture_state()
    app = CockpitApp(state.target, state=state, offline=True, layout="mine")
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await pilot.pause()
        assert [str(n.message) for n in app._notifications] == [problem]
        assert isinstance(app.screen, CockpitLayoutScreen)
        assert [box.pane for box in app.screen.query(PaneBox)] == list(load_layout("default").panes)


def test_a_bad_key_and_a_user_layout_of_the_users_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = user_layout(tmp_path, monkeypatch, "mine", "# mine\npanes: [nodes]\n")
    _layout, problem = load_layout_or_default("mine")
    assert problem is not None and problem.startswith(f"{path}:2: 'panes' is not a layout key")
    path.write_text("cockpit:\n  - [gpu_list, driver_log]\n")
    assert load_layout("mine").cockpit == (("gpu_list", "driver_log"),)
    _layout, problem = load_layout_or_default("nothing-of-that-name")
    assert problem is not None and "no layout named 'nothing-of-that-name' (layouts: " in problem
    assert "mine" in problem and "wide" in problem
