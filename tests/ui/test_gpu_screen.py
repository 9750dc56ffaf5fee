"""The GPU screen (key 2) on the real local cluster running the demo job: logical GPUs say so, the demo's
actors are shown against the GPUs they hold, and high-resolution mode starts its agent (over SSH too)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cockpit.core.connect.connection import ConnectOptions
from cockpit.core.connect.programs import READ_PROGRAM
from cockpit.core.targets import parse_target
from cockpit.ui.app import CockpitApp
from cockpit.ui.screens.gpus import GpuScreen
from cockpit.ui.widgets.gpu_heatmap import GpuHeatmap
from cockpit.ui.widgets.gpu_list import GpuList
from tests.harness.cluster import ClusterHandle
from tests.harness.gpus import FAKE_NVML, gpu_present
from tests.harness.run import until
from tests.harness.sshd import start_sshd

pytestmark = pytest.mark.cluster

DEMO_HOLDERS = {
    "PolicyTrainer (policy) holds 1 GPU": 1,
    "RolloutWorker": 4,
    "ReferencePolicy (reference) holds 0.5 GPU": 1,
    "Critic (critic) holds 0.5 GPU": 1,
    "RewardModel (reward) holds 0.5 GPU": 1,
}


def agent_processes() -> list[int]:
    """Pids of running GPU agents (the program they run reads itself from stdin)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if READ_PROGRAM.encode() in command:
                found.append(int(entry.name))
    return found


def logical_rows(app: CockpitApp, alive: bool = False) -> int:
    """GPU rows without telemetry (of alive nodes only, if `alive`)."""
    fleet = app.state.gpu_fleet
    assert fleet is not None
    return sum(1 for r in fleet.rows if r.gpu is None and (r.node.alive or not alive))


def text(app: CockpitApp) -> str:
    return "\n".join(app.screen.query_one(GpuList).text_lines())


def notice(app: CockpitApp) -> str:
    return str(app.screen.query_one("#gpu-notice").render())


async def open_gpu_screen(app: CockpitApp, pilot) -> None:  # type: ignore[no-untyped-def]
    await pilot.press("2")
    assert isinstance(app.screen, GpuScreen)
    await until(
        pilot, lambda: app.state.gpu_fleet is not None and len(app.state.gpu_fleet.rows) >= 6, timeout=60
    )


async def test_logical_gpus_and_the_demo_actors_on_them(ray_cluster: ClusterHandle, demo_job: str) -> None:
    app = CockpitApp(parse_target("local"))
    async with app.run_test(size=(120, 50)) as pilot:
        await open_gpu_screen(app, pilot)
        # Actors are listed every third poll while the screen is shown: wait for the holders.
        await until(pilot, lambda: "PolicyTrainer (policy) holds 1 GPU" in text(app), timeout=60)
        shown = text(app)
        nodes = [n for n in app.state.gpu_fleet.nodes if n.alive] if app.state.gpu_fleet else []
        assert len(nodes) == 3
        for node in nodes:
            assert f"▾ {node.hostname} · {node.ip}" in shown and node.node_id[:8] in shown
        # Logical GPUs: "no GPU telemetry", never a made-up 0 %. (Earlier tests may have left dead nodes:
        # those are listed too, under "DEAD: reason".)
        assert shown.count("no GPU telemetry (logical GPU") == logical_rows(app)
        assert logical_rows(app, alive=True) == 6
        assert " 0% " not in shown and "N/A" not in shown
        for holder, count in DEMO_HOLDERS.items():
            assert shown.count(holder) == count, holder
        totals = str(app.screen.query_one("#gpu-totals").render())
        assert "6 GPUs on 3 nodes" in totals and "6 without telemetry" in totals and "job running" in totals

        # The heatmap: a cell per GPU; Enter on one opens its node in the list.
        await pilot.press("v")
        heatmap = app.screen.query_one(GpuHeatmap)
        grid = "".join(heatmap.text_grid())
        assert heatmap.display and grid.count("n") == 6 and grid.count("x") == logical_rows(app) - 6
        legend = str(app.screen.query_one("#gpu-legend").render())
        assert "≥90%" in legend and "no telemetry" in legend and "no GPU telemetry (logical GPU)" in legend
        await pilot.press("right", "right")
        chosen = heatmap.cursor_row
        assert chosen is not None and chosen.node is not app.state.gpu_fleet.rows[0].node  # the second node
        await pilot.press("enter")
        gpu_list = app.screen.query_one(GpuList)
        assert gpu_list.display and isinstance(app.screen, GpuScreen)
        assert app.screen.node_filter == chosen.node.node_id[:12]
        filtered = text(app)
        assert filtered.count("▾ ") == 1 and chosen.node.node_id[:8] in filtered
        await pilot.press("escape")
        await until(pilot, lambda: text(app).count("▾ ") == len(app.state.gpu_fleet.groups) - 1)
        # Sorting drops the grouping and adds a node column.
        await pilot.press("s")
        assert "Node" in gpu_list.text_lines()[0] and "by utilization" in str(
            app.screen.query_one("#gpu-totals").render()
        )


@pytest.mark.skipif(gpu_present(), reason="this machine has a GPU: the agent starts instead of failing")
async def test_high_resolution_without_a_gpu_says_why_and_keeps_dashboard_data(
    ray_cluster: ClusterHandle,
) -> None:
    app = CockpitApp(parse_target("local"))
    async with app.run_test(size=(100, 30)) as pilot:
        await open_gpu_screen(app, pilot)
        await pilot.press("h")
        await until(pilot, lambda: "high-resolution mode off" in notice(app), timeout=60)
        assert "no NVIDIA or AMD GPU found" in notice(app)
        assert not app.high_res.on and text(app).count("no GPU telemetry (logical GPU") == logical_rows(app)


async def test_high_resolution_streams_agent_readings_then_turns_off(
    ray_cluster: ClusterHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent (real program, real NVML backend) over a stand-in `pynvml` with two GPUs: the three local
    nodes share this machine, so each shows its two GPUs at 1 Hz until `h` turns the mode off."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(FAKE_NVML), os.environ.get("PYTHONPATH", "")]))
    app = CockpitApp(parse_target("local"))
    async with app.run_test(size=(160, 40)) as pilot:
        await open_gpu_screen(app, pilot)
        await pilot.press("h")
        await until(pilot, lambda: "1 Hz readings from 1 of 1 node IP(s)" in notice(app), timeout=60)
        await until(pilot, lambda: text(app).count("FAKE NVIDIA H100") == 3, timeout=30)
        shown = text(app)
        assert "80.0 GiB" in shown and "300 W" in shown and "60°C" in shown and "pid 4242" in shown
        assert app.state.gpu_fleet is not None
        assert {r.source for r in app.state.gpu_fleet.rows if r.node.alive} == {"agent"}
        assert agent_processes()
        await pilot.press("h")
        await until(pilot, lambda: "no GPU telemetry" in text(app), timeout=30)
        assert "high-resolution mode off" in notice(app) and not app.high_res.on
        await until(pilot, lambda: not agent_processes(), timeout=15)  # the agent ended with the mode


@pytest.mark.ssh
@pytest.mark.skipif(gpu_present(), reason="this machine has a GPU: the agent starts instead of failing")
async def test_high_resolution_over_ssh_runs_the_agent_on_the_head(
    tmp_path: Path, ray_cluster: ClusterHandle
) -> None:
    """Over SSH the agent runs on the head with the cluster's Python (from the raylet's command line): on
    this machine it finds no GPU and says so; the view stays on the dashboard's readings."""
    server = start_sshd(tmp_path / "sshd")
    config = tmp_path / "config"
    config.write_text(server.ssh_config_entry("head-node"))
    try:
        app = CockpitApp(parse_target("head-node"), ray_cluster.over_ssh(config))
        async with app.run_test(size=(140, 30)) as pilot:
            await open_gpu_screen(app, pilot)
            await pilot.press("h")
            await until(pilot, lambda: "high-resolution mode off" in notice(app), timeout=60)
            assert "no NVIDIA or AMD GPU found" in notice(app)
            assert text(app).count("no GPU telemetry (logical GPU") == logical_rows(app)
    finally:
        server.stop()


async def test_high_resolution_needs_ssh_for_an_http_target(ray_cluster: ClusterHandle) -> None:
    """Through a plain dashboard URL nothing can reach the nodes, and this machine's GPUs are not theirs."""
    target = parse_target(f"http://127.0.0.1:{ray_cluster.cluster.dashboard_port}")
    app = CockpitApp(target, ConnectOptions(token_file=str(ray_cluster.token_file)))
    async with app.run_test(size=(160, 30)) as pilot:
        await open_gpu_screen(app, pilot)
        await pilot.press("h")
        assert "needs SSH to the head" in notice(app) and not app.high_res.on
        assert not agent_processes()
