"""The runs overview screen on fixture rows (no cluster): the local cluster running a job, a Slurm job
running out of walltime with a dead node, one queued, one out of reach, at 80x24 and 200x50 (text
snapshots); Enter ends the list with the chosen target; hostile text stays text."""

from __future__ import annotations

import re

from cockpit.core.runs.overview import RunRow
from cockpit.ui.runs import RunsApp
from tests.harness.snapshots import check_snapshot
from tests.ui.test_actors_fixture import screen_text

DEAD = "node gpu-017 (5f1c2a9e) is DEAD: health check failed"
WALLTIME = "slurm job 4117 reaches its time limit in 25m00s"
QUEUED = "slurm job 4120 (grpo-14b) PENDING: Priority; expected start 14:05"
ROWS = [
    RunRow(
        "local", "local", "running", "python -m cockpit.demo", nodes_alive=3, nodes_dead=0, gpus=6.0,
        job="raysubmit_demo", job_age=754.0, running_jobs=1, step=812,
    ),
    RunRow(
        "slurm:4117", "slurm", "running", "python -m verl.trainer.main_ppo", nodes_alive=15, nodes_dead=1,
        gpus=120.0, job="raysubmit_grpo", job_age=93_000.0, running_jobs=1, time_left=1500.0,
        alerts=(DEAD, WALLTIME),
    ),
    RunRow("slurm:4120", "slurm", "queued", QUEUED),
    RunRow("head-node", "config", "unreachable", "ssh head-node: connection refused [bold]x[/bold]\x1b[31m"),
]  # fmt: skip


async def test_the_runs_list_at_80x24_and_200x50_and_enter_opens_the_chosen_target() -> None:
    for size in ((80, 24), (200, 50)):
        app = RunsApp(rows=ROWS)
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            text = screen_text(app)
            assert "4 targets · 2 running · 2 need a look" in text
            lines = text.splitlines()
            local = next(line for line in lines if line.lstrip().startswith("local "))
            assert "running" in local and "raysubmit_" in local and "812" in local  # the id cut at 80
            assert re.search(r"slurm:4117 +running", text) and re.search(r"slurm:4120 +queued", text)
            assert "local (local): running · python -m cockpit.demo" in text  # the cursor's row, in full
            check_snapshot(f"runs_{size[0]}x{size[1]}.txt", text)
            await pilot.press("down")
            await pilot.pause()
            assert f"✖ {WALLTIME}" in screen_text(app) and f"✖ {DEAD}" in screen_text(app)
            await pilot.press("down", "down")
            await pilot.pause()
            hostile = screen_text(app)
            assert "[bold]x[/bold]" in hostile and "\x1b" not in hostile  # the cluster's text as text
            await pilot.press("up", "up", "enter")
        assert app.return_value == "slurm:4117"


async def test_q_ends_the_list_with_nothing_chosen_and_no_target_says_how_to_get_one() -> None:
    app = RunsApp(rows=[])
    async with app.run_test(size=(80, 24)) as pilot:
        assert "no targets: `cockpit local up`" in screen_text(app)
        await pilot.press("q")
    assert app.return_value is None
    app = RunsApp(rows=ROWS)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("ctrl+c")  # as q: nothing chosen
    assert app.return_value is None and app.return_code == 0
