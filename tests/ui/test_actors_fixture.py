"""The Actors screen (key 3) on a fixture state, no cluster: what it draws at 80x24 and 200x50 (text
snapshots), hostile cluster text, the "why not running" pane and the status bar's stuck warning.

Regenerate the snapshots with COCKPIT_UPDATE_SNAPSHOTS=1 after a deliberate change, and read the diff.
"""

from __future__ import annotations

import io
import json
import re
import time
from dataclasses import replace
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from textual import events
from textual.app import App
from textual.widgets import Input

from cockpit.core.actors.listing import ActorQuery, actor_list
from cockpit.core.actors.pending import PendingReport, StuckItem
from cockpit.core.actors.roles import DEFAULT_RULES
from cockpit.core.actors.table import ActorIndex
from cockpit.core.cluster import parse
from cockpit.core.snapshots import ActorRow, ActorSummary, Listing, ListMeta
from cockpit.ui.app import CockpitApp
from cockpit.ui.feeds.actors import role_counts
from cockpit.ui.screens.actors import ActorsScreen
from cockpit.ui.screens.gpus import GpuScreen
from cockpit.ui.screens.logs import LogsScreen
from cockpit.ui.state import ActorTable, CockpitState
from cockpit.ui.widgets.actor_table import ActorTableView
from cockpit.ui.widgets.status_bar import StatusBar
from tests.harness.hostile import controls
from tests.harness.snapshots import check_snapshot
from tests.ui.test_fixture_state import HOSTILE, SAMPLES, fixture_state, shown_text

HOUR = 3600.0

DEMO = (
    ("RolloutWorker", "rollout_0", 0.25),
    ("RolloutWorker", "rollout_1", 0.25),
    ("RolloutWorker", "rollout_2", 0.25),
    ("RolloutWorker", "rollout_3", 0.25),
    ("PolicyTrainer", "policy", 1.0),
    ("ReferencePolicy", "reference", 0.5),
    ("Critic", "critic", 0.5),
    ("RewardModel", "reward", 0.5),
)


def fixture_actors(state: CockpitState, hostile: bool = False) -> list[ActorRow]:
    """The captured actors (a JobSupervisor and trainers) and the demo's roles on the fixture's nodes,
    two dead with their causes and one pending."""
    assert state.snapshot is not None
    doc = json.loads((SAMPLES / "v0_actors.json").read_text())
    rows = [parse.actor_row(r) for r in doc["data"]["result"]["result"]]
    nodes = [n for n in state.snapshot.nodes if n.alive]
    for i, (cls, name, gpus) in enumerate(DEMO):
        rows.append(
            ActorRow(
                actor_id=f"{0xD0 + i:02x}" + "c0ffee" * 5,
                class_name=cls,
                name=name,
                state="ALIVE",
                job_id="03000000",
                node_id=nodes[i % len(nodes)].node_id,
                pid=4000 + i,
                num_restarts=1 if name == "rollout_2" else 0,
                required_resources={"CPU": 1.0, "GPU": gpus},
                start_time=time.time() - HOUR - 30 * i,
            )
        )
    dead_cause = HOSTILE if hostile else "The actor died because its worker process exited (exit code 1)."
    rows += [
        ActorRow(
            actor_id="de" + "ad" * 15,
            class_name=f"Rollout{HOSTILE}" if hostile else "RolloutWorker",
            name=f"w[/0]{HOSTILE}" if hostile else "rollout_old",
            state="DEAD",
            job_id="02000000",
            node_id=nodes[0].node_id,
            pid=None,
            num_restarts=3,
            required_resources={"GPU": 0.25},
            death_cause=dead_cause,
            runtime_env=json.dumps({"env_vars": {"WANDB_API_KEY": "sk-hostile-secret", "X": HOSTILE}})
            if hostile
            else "",
        ),
        ActorRow(
            # Ids are the cluster's text too: a hostile cluster's ids carry escapes and controls.
            actor_id="\x1b]0;x\x07\x1b[2Jbeef" + "ef" * 12 if hostile else "be" + "ef" * 15,
            class_name="HugeLearner",
            name="learner",
            state="PENDING_CREATION",
            job_id="03000000",
            node_id="\x9b2J\x1b[31m" + "0" * 48 if hostile else "",
            pid=None,
            num_restarts=0,
            required_resources={"GPU": 8.0},
        ),
    ]
    return rows


def with_actors(state: CockpitState, hostile: bool = False) -> CockpitState:
    assert state.snapshot is not None
    rows = fixture_actors(state, hostile)
    meta = ListMeta(
        total=len(rows), num_after_truncation=len(rows), num_filtered=len(rows), returned=len(rows)
    )
    by_class: dict[str, dict[str, int]] = {}
    for row in rows:
        by_class.setdefault(row.class_name, {}).setdefault(row.state, 0)
        by_class[row.class_name][row.state] += 1
    summary = ActorSummary(by_class=by_class, total=len(rows), meta=meta)
    listing = actor_list(Listing(rows=tuple(rows), meta=meta), ActorQuery(), state.snapshot.nodes, summary)
    state.actor_table = ActorTable(
        listing=listing,
        index=ActorIndex.build(listing.rows),
        fetched_at=time.time(),
        took=0.05,
        by_role=role_counts(listing.by_class, DEFAULT_RULES),
    )
    sentence = (
        "placement group `global_pool` PENDING: 2 bundles of {GPU: 8}; largest free on any node: GPU 2; "
        "no node has GPU 8 (the most on one node: 2): it can never be scheduled on these nodes"
    )
    report = PendingReport(
        items=(StuckItem("placement group", "ab" * 9, "global_pool", "PENDING", "03000000", sentence, True),),
        alive_nodes=3,
        largest_free={"GPU": 2.0},
    )
    state.stuck.report = report
    state.stuck.since = {"placement group:" + "ab" * 9: time.time() - 125}
    return state


async def settled_text(pilot: Any, app: CockpitApp, tries: int = 50) -> str:
    """The screen's text once two looks 0.1 s apart agree (a loaded machine draws a fresh screen late)."""
    last = screen_text(app)
    for _ in range(tries):
        await pilot.pause(0.1)
        text = screen_text(app)
        if text == last:
            return text
        last = text
    return last


def screen_text(app: App[Any]) -> str:
    """The whole screen as plain text, as the terminal would show it (the status bar's clock masked)."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), record=True, force_terminal=True)
    console.print(app.screen._compositor.render_update(full=True))
    text = console.export_text(styles=False)
    text = re.sub(r"data \d+s ago", "data 0s ago", text)
    # The fixture's ages are 2m05s when drawn at once; a slow (loaded) run draws them a few seconds older.
    return re.sub(r"(not running for|oldest for) 2m\d\ds", r"\1 2m05s", text)


async def test_actors_screen_at_80x24_and_200x50_snapshots() -> None:
    for size in ((80, 24), (200, 50)):
        state = with_actors(fixture_state())
        app = CockpitApp(state.target, state=state, offline=True)
        async with app.run_test(size=size) as pilot:
            await pilot.press("3")
            assert isinstance(app.screen, ActorsScreen)
            await pilot.pause()
            text = screen_text(app)
            # What must be on screen at either size: counts, the stuck sentence, the keys.
            assert "15 actors" in text and "ALIVE" in text
            assert "global_pool" in text and "⚠ 1 not running for 2m" in text
            assert "Rollout" in text and "rollout" in text and "PENDING" in text
            assert "q" in text.splitlines()[-1]
            check_snapshot(f"actors_{size[0]}x{size[1]}.txt", text)


async def test_filter_sort_and_details_on_fixture_rows() -> None:
    state = with_actors(fixture_state())
    app = CockpitApp(state.target, state=state, offline=True)
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.press("3")
        screen = app.screen
        assert isinstance(screen, ActorsScreen)
        table = screen.query_one(ActorTableView)
        await pilot.pause()
        # The stuck and restarting first, the dead last (state order).
        assert table.current() is not None and table.current().actor.state == "PENDING_CREATION"
        await pilot.press("slash", *"role:rollout", "enter", "home")
        await pilot.pause()
        roles = {table.index.rows[i].role for i in table.order} if table.index else set()
        assert roles == {"rollout"} and len(table.order) == 5  # four alive and the dead one
        # Sort by restarts (`s` from state: role, class, name, node, gpus, memory, restarts).
        for _ in range(6):
            await pilot.press("s")
        assert screen.sort == "memory"
        await pilot.press("s")
        assert screen.sort == "restarts"
        assert table.current() is not None and table.current().actor.name == "rollout_0"  # followed
        await pilot.press("home")
        assert table.current() is not None and table.current().actor.num_restarts == 3
        await pilot.press("down")
        chosen = table.current()
        assert chosen is not None and chosen.actor.name == "rollout_2"
        # A refresh (new fetch, same rows) keeps filter, sort and the cursor on its actor.
        assert state.actor_table is not None
        state.actor_table = replace(state.actor_table, index=ActorIndex.build(state.actor_table.index.rows))
        screen.refresh_view()
        await pilot.pause()
        assert table.current() is chosen or table.current().actor.actor_id == chosen.actor.actor_id
        # Details: resources, node, role.
        await pilot.press("enter")
        await pilot.pause()
        details = str(screen.query_one("#actor-details").render())
        assert "rollout_2" in details and "GPU: 0.25" in details and "Restarts" in details
        await pilot.press("escape")
        assert not screen.details_open
        await pilot.press("escape")  # clears the filter
        await pilot.pause()
        assert state.actor_query == "" and len(table.order) == 15


async def test_hostile_actor_text_shows_as_text_and_secrets_stay_masked() -> None:
    state = with_actors(fixture_state(), hostile=True)
    app = CockpitApp(state.target, state=state, offline=True)
    async with app.run_test(size=(200, 50), notifications=True) as pilot:
        await pilot.press("3")
        screen = app.screen
        assert isinstance(screen, ActorsScreen)
        await pilot.pause()
        shown = shown_text(app)
        assert controls(shown) == []
        assert "w[/0][/data/a.parquet" in shown  # the name, markup as typed
        # Wide characters (中文🚀, in the hostile class) take two cells: the columns after them still line
        # up with the header.
        header, *lines = screen.query_one(ActorTableView).text_lines()
        hostile_row = next(line for line in lines if "中文" in line)
        assert cell_len(hostile_row[: hostile_row.index(" DEAD ")]) == cell_len(
            header[: header.index(" State ")]
        )
        await pilot.press("S", "home")  # the dead first
        await pilot.pause()
        table = screen.query_one(ActorTableView)
        assert table.current() is not None and table.current().actor.state == "DEAD"
        await pilot.press("enter")
        await pilot.pause()
        shown = shown_text(app)
        assert controls(shown) == []
        assert "[/data/a.parquet] w[/0] [b]x[/b]" in shown  # the death cause, as typed
        assert "sk-hostile-secret" not in shown and "WANDB_API_KEY" in shown


async def test_status_bar_warns_on_every_screen_once_something_is_stuck_a_minute() -> None:
    state = with_actors(fixture_state())
    app = CockpitApp(state.target, state=state, offline=True)
    async with app.run_test(size=(120, 30)) as pilot:
        header = str(app.screen.query_one(StatusBar).render())
        assert "⚠ 1 not running for 2m" in header and "cannot be placed" in header
        state.stuck.since = {key: time.time() - 10 for key in state.stuck.since}  # 10 s: no warning yet
        app.screen.query_one(StatusBar).show(state, "1 Cluster")
        await pilot.pause()
        assert "not running" not in str(app.screen.query_one(StatusBar).render())


async def test_keys_typed_in_one_burst_after_slash_go_to_the_filter() -> None:
    """A fast typist or a paste: `/role` arrives in one read, before the filter has focus. The `l` must
    be typed into the filter, not jump to the Logs screen."""
    state = with_actors(fixture_state())
    app = CockpitApp(state.target, state=state, offline=True)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.press("3")
        await pilot.pause()
        burst(app, "/role")
        await pilot.pause()
        assert isinstance(app.screen, ActorsScreen)
        assert state.actor_query == "role"


async def test_keys_typed_in_one_burst_after_slash_go_to_the_gpu_and_log_prompts() -> None:
    """The same burst on the GPU screen (`s` sorts, `v` switches view) and the Logs screen (`s` saves)."""
    state = with_actors(fixture_state())
    app = CockpitApp(state.target, state=state, offline=True)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.press("2")
        await pilot.pause()
        gpus = app.screen
        assert isinstance(gpus, GpuScreen)
        view = gpus.view
        burst(app, "/sv")
        await pilot.pause()
        assert gpus.node_filter == "sv" and gpus.view == view and gpus.sort == "node"
        await pilot.press("escape", "5")
        await pilot.pause()
        logs = app.screen
        assert isinstance(logs, LogsScreen)
        burst(app, "/sx")
        await pilot.pause()
        assert isinstance(app.screen, LogsScreen)
        assert logs.query_one("#log-input", Input).value == "sx"  # typed: not saved, sources not reset
        await pilot.press("slash", "y")  # a `/` typed in the open prompt is a `/`
        assert logs.query_one("#log-input", Input).value == "sx/y"
        burst(app, "a/b&c")  # in order, however fast: not inserted ahead of keys still queued
        await pilot.pause()
        assert logs.query_one("#log-input", Input).value == "sx/ya/b&c"
        await pilot.press("escape", "3", "slash")
        burst(app, "role/x")
        await pilot.pause()
        assert app.screen.query_one("#actor-filter", Input).value.endswith("role/x")


def burst(app: CockpitApp, text: str) -> None:
    """TEXT as one read from the terminal: every key queued before the first is handled."""
    driver = app._driver
    assert driver is not None
    for char in text:
        event = events.Key("slash" if char == "/" else char, char)
        event.set_sender(app)
        driver.send_message(event)
