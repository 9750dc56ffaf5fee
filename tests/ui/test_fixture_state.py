"""Screens fed a fixture state, with no cluster at all: the screens read the state, nothing else.

The state is built from dashboard answers captured from Ray 2.60 (`shared/ray-2.60-samples`); the app
runs `offline` (no feed starts, no connection is opened), so whatever the screens show came from it.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import replace
from pathlib import Path

import asyncssh
import pytest
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widgets import DataTable

from cockpit.core.cluster import parse
from cockpit.core.gpu.board import GpuBoard
from cockpit.core.jobs.submitted import remember_profile
from cockpit.core.snapshots import ActorRow, ClusterSnapshot, JobRow, LogIndex
from cockpit.core.ssh.errors import UnknownHostKey
from cockpit.core.targets import parse_target
from cockpit.ui.app import CockpitApp
from cockpit.ui.screens.cluster import ClusterScreen
from cockpit.ui.screens.confirm import ConfirmScreen
from cockpit.ui.screens.gpus import GpuScreen
from cockpit.ui.screens.jobs import JobsScreen
from cockpit.ui.screens.launcher import LaunchScreen
from cockpit.ui.screens.logs import LogsScreen, actor_items, file_items, node_items
from cockpit.ui.screens.picker import PickScreen
from cockpit.ui.screens.prompts import HostKeyScreen, PassphraseScreen
from cockpit.ui.state import CockpitState, StateChanged
from cockpit.ui.widgets.join_progress import JoinPanel
from cockpit.ui.widgets.key_hints import KeyHints
from cockpit.ui.widgets.node_table import NodeTable
from cockpit.ui.widgets.status_bar import StatusBar
from tests.harness.hostile import controls
from tests.harness.run import until

SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "ray-2.60-samples"


def sample(name: str) -> object:
    return json.loads((SAMPLES / name).read_text())


def fixture_state() -> CockpitState:
    summary = sample("nodes_summary_fakeamd.json")
    assert isinstance(summary, dict)
    nodes = tuple(parse.node_from_summary(entry) for entry in summary["data"]["summary"])
    jobs_doc = sample("jobs_list.json")
    assert isinstance(jobs_doc, list)
    jobs = tuple(parse.job_row(row) for row in jobs_doc)
    version = sample("version.json")
    assert isinstance(version, dict)
    state = CockpitState(target=parse_target("http://127.0.0.1:1"), expect_nodes=4, expect_gpus=2)
    state.info = parse.cluster_info(version, None)
    state.snapshot = ClusterSnapshot(nodes=nodes, jobs=jobs, fetched_at=time.time())
    state.connection.phase = "connected"
    board = GpuBoard()
    board.ingest_nodes(nodes, job_running=True, local_time=time.time())
    state.gpu_fleet = board.fleet()
    state.gpu_board = board
    return state


async def test_cluster_jobs_and_gpu_screens_show_a_fixture_state() -> None:
    state = fixture_state()
    assert state.snapshot is not None and state.gpu_fleet is not None
    app = CockpitApp(state.target, state=state, offline=True)
    async with app.run_test(size=(120, 40)) as pilot:
        # Cluster screen: every captured node, the join gate against the expected shape, the header.
        assert isinstance(app.screen, ClusterScreen)
        table = app.screen.query_one(NodeTable)
        assert {key.value for key in table.rows} == {n.node_id for n in state.snapshot.nodes}
        join = str(app.screen.query_one(JoinPanel).render())
        assert "3/4" in join  # 3 nodes joined of the 4 expected
        header = str(app.screen.query_one(StatusBar).render())
        assert "Ray 2.60.0" in header and "connected" in header

        # Jobs screen: the captured jobs, keys in the hint line read from the screen's bindings.
        await pilot.press("4")
        assert isinstance(app.screen, JobsScreen)
        jobs = app.screen.query_one("#jobs-table", DataTable)
        assert {key.value for key in jobs.rows} == {"cockpit-test-1", "cockpit-test-2", "cockpit-test-3"}
        hint = app.screen.query_one(KeyHints).text.plain
        assert "n new job" in hint and "s stop" in hint

        # GPU screen: the fleet's totals.
        await pilot.press("2")
        assert isinstance(app.screen, GpuScreen)
        totals = app.screen.query_one("#gpu-totals").render()
        assert f"{state.gpu_fleet.totals.gpus} GPUs" in str(totals)

        # A change written to the state and announced reaches the screen on view.
        await pilot.press("4")
        state.connection.phase = "unreachable"
        state.connection.detail = "cannot reach the Ray dashboard (fixture)"
        app.post_message(StateChanged("connection"))
        await pilot.pause()
        header = str(app.screen.query_one(StatusBar).render())
        assert "unreachable" in header and "(fixture)" in header
        assert app.screen.query_one("#jobs-table").has_class("stale")

    # Offline: no connection was ever opened.
    assert app.cluster_feed._connection is None


async def test_the_launcher_refuses_a_malformed_override_with_the_clis_words() -> None:
    from textual.widgets import Input

    from cockpit.core.jobs import launch
    from cockpit.ui.screens.launcher import LaunchScreen

    try:
        launch.parse_overrides(["steps=2", "oops"])
    except launch.OverrideError as exc:
        expected = str(exc)  # what `cockpit submit ... steps=2 oops` prints (tests/unit/test_launch.py)
    else:
        raise AssertionError("'oops' was taken for KEY=VALUE")
    state = fixture_state()
    app = CockpitApp(state.target, state=state, offline=True)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("4", "n")
        await until(pilot, lambda: isinstance(app.screen, LaunchScreen))
        launcher = app.screen
        assert isinstance(launcher, LaunchScreen)
        launcher.query_one("#filter", Input).value = "demo"
        await pilot.pause()
        launcher.query_one("#overrides", Input).value = "steps=2 oops"
        await pilot.pause()
        assert expected in str(launcher.query_one("#preview-text").render())
        assert launcher.plan is None and launcher.problem == expected
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert isinstance(app.screen, LaunchScreen)  # not submitted, nothing lost: the field keeps its text
        assert launcher.query_one("#overrides", Input).value == "steps=2 oops"
        # Fixed, the preview is the plan's exact request (checked against the fixture's nodes).
        launcher.query_one("#overrides", Input).value = "steps=2 step_seconds=0.1"
        await pilot.pause()
        assert launcher.plan is not None and launcher.plan.cluster_checked
        assert launcher.plan.request["entrypoint"].endswith("steps=2 step_seconds=0.1")
        assert "steps=2 step_seconds=0.1" in str(launcher.query_one("#preview-text").render())


HOSTILE = (
    "[/data/a.parquet] w[/0] [b]x[/b] [@click=app.quit] "
    "\x1b]0;owned\x07\x1b[31mred\x1b[K \x9b2J\x07\ud800\t中文🚀"
)
"""Cluster text at its worst: markup that does not close, an action link, an OSC title, colours, an erase,
C1 CSI, a bell, a lone surrogate, a tab, wide characters."""


def shown_text(app: CockpitApp) -> str:
    """Every line every visible widget of the current screen draws (notifications included), run
    together (a newline would count as a control character)."""
    lines = []
    for widget in app.screen.query("*"):
        if widget.display and widget.size.width and widget.size.height:
            strips = widget.render_lines(Region(0, 0, widget.size.width, widget.size.height))
            lines += [strip.text for strip in strips]
    return "".join(lines)


def hostile_state() -> CockpitState:
    """The fixture state with cluster text replaced by `HOSTILE`: job ids, entrypoints, messages, node
    names, a death cause, actor names, the Ray version and the connection's detail."""
    state = fixture_state()
    assert state.snapshot is not None and state.info is not None
    jobs = tuple(
        replace(
            job,
            submission_id=f"{job.submission_id}{HOSTILE}",
            entrypoint=f"python -m train data.files=[/data/a.parquet] {HOSTILE}",
            message=HOSTILE,
        )
        for job in state.snapshot.jobs
    )
    nodes = tuple(replace(node, hostname=f"{HOSTILE}{i}") for i, node in enumerate(state.snapshot.nodes))
    nodes = (*nodes[:-1], replace(nodes[-1], state="DEAD", state_message=HOSTILE))
    with_gpu = next(n for n in nodes if n.gpus)
    actors = [
        ActorRow(
            actor_id="a" * 32,
            class_name=f"Rollout{HOSTILE}",
            name=f"w[/0]{HOSTILE}",
            state="ALIVE",
            job_id="02000000",
            node_id=with_gpu.node_id,
            pid=with_gpu.gpus[0].processes[0].pid,
            num_restarts=0,
            required_resources={"GPU": 1.0},
        )
    ]
    state.snapshot = replace(state.snapshot, nodes=nodes, jobs=jobs)
    state.info = replace(state.info, ray_version=HOSTILE)
    state.connection.detail = HOSTILE
    board = GpuBoard()
    board.ingest_nodes(nodes, job_running=True, local_time=time.time())
    board.ingest_actors(actors)
    state.gpu_board, state.gpu_fleet = board, board.fleet()
    return state


async def test_hostile_cluster_text_shows_as_text_on_every_screen() -> None:
    state = hostile_state()
    app = CockpitApp(state.target, state=state, offline=True)
    async with app.run_test(size=(160, 50), notifications=True) as pilot:
        # Cluster screen: node names and a death cause in the table, entrypoints in the jobs strip.
        assert isinstance(app.screen, ClusterScreen)
        await pilot.pause()
        shown = shown_text(app)
        assert controls(shown) == []
        assert "[/data/a.parquet] w[/0] [b]x[/b]" in shown  # markup shown as typed, never parsed

        # Jobs screen: every cell, then the questions and notices that name a job.
        await pilot.press("4")
        assert isinstance(app.screen, JobsScreen)
        await pilot.pause()
        shown = shown_text(app)
        assert controls(shown) == []
        assert "data.files=[/data/a.parquet]" in shown
        await pilot.press("s")  # the first job has ended: a notice names it
        await pilot.pause()
        shown = shown_text(app)
        assert controls(shown) == []
        assert "▌ cockpit-test-1[/data/a.parquet] w[/0]" in shown  # the notice, its job id as typed
        await pilot.press("d")  # delete it? a question names it
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        assert controls(shown_text(app)) == [] and "w[/0]" in shown_text(app)
        await pilot.press("n")
        await pilot.press("down", "down", "s")  # the running job: stop it?
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        assert controls(shown_text(app)) == []
        await pilot.press("n")

        # GPU screen: the list (node names, the death cause, actor names), then the heatmap's legend.
        await pilot.press("2")
        assert isinstance(app.screen, GpuScreen)
        await pilot.pause()
        shown = shown_text(app)
        assert controls(shown) == []
        assert "w[/0]" in shown
        await pilot.press("v")
        for key in ("right", "down", "right", "down"):
            await pilot.press(key)
            await pilot.pause()
            assert controls(shown_text(app)) == []


async def test_hostile_cluster_text_on_the_logs_screen_and_its_pickers() -> None:
    state = hostile_state()
    assert state.snapshot is not None
    app = CockpitApp(state.target, state=state, offline=True)
    async with app.run_test(size=(160, 50), notifications=True) as pilot:
        await pilot.press("5")
        assert isinstance(app.screen, LogsScreen)
        logs = app.screen
        await pilot.pause()
        # The sources line names the job (offline, its stream fails: the event says so, as text).
        assert logs.job is not None and logs.job.key.startswith("cockpit-test-3")
        shown = shown_text(app)
        assert controls(shown) == []
        assert "cockpit-test-3[/data/a.parquet] w[/0] [b]x[/b]" in shown

        # The first error's banner quotes the line.
        logs.view.append("w[/0]\x1b]0;t\x07", f"Traceback (most recent call last):\nValueError: {HOSTILE}\n")
        await pilot.pause()
        shown = shown_text(app)
        assert controls(shown) == []
        assert "ValueError: [/data/a.parquet] w[/0]" in shown

        # The job picker: ids and entrypoints as typed, filtered as typed.
        await pilot.press("j")
        await pilot.pause()
        assert isinstance(app.screen, PickScreen)
        shown = shown_text(app)
        assert controls(shown) == [] and "cockpit-test-2[/data/a.parquet] w[/0]" in shown
        await pilot.press("[", "/")
        await pilot.pause()
        assert controls(shown_text(app)) == []
        await pilot.press("escape")
        await pilot.pause()

        # Actor, node and file pickers, from what the dashboard would list.
        node = state.snapshot.nodes[0]
        actor = ActorRow(
            actor_id="b" * 32,
            class_name=f"[/x]{HOSTILE}",
            name=f"w[/0]{HOSTILE}",
            state="ALIVE",
            job_id="02000000",
            node_id=node.node_id,
            pid=1,
            num_restarts=0,
        )
        index = LogIndex(
            node_id=node.node_id, files={f"[/k]{HOSTILE}": (f"w[/0]{HOSTILE}.log", "raylet.out")}
        )
        for title, items in (
            ("Add which actor's log?", actor_items([actor])),
            ("Which node?", node_items(state.snapshot.nodes)),
            (f"Which file of {HOSTILE}?", file_items(index)),
        ):
            app.push_screen(PickScreen(title, items))
            await pilot.pause()
            shown = shown_text(app)
            assert controls(shown) == [], title
            assert "w[/0]" in shown
            await pilot.press("escape")
            await pilot.pause()


async def test_the_logs_screen_saves_new_files_and_says_when_it_cannot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`s` writes a new file each time (two within a second included: nothing written over), only its
    owner can read; where it cannot write (a read-only directory), it says so instead of ending the app."""
    state = hostile_state()
    app = CockpitApp(state.target, state=state, offline=True)
    monkeypatch.chdir(tmp_path)
    async with app.run_test(size=(160, 50), notifications=True) as pilot:
        await pilot.press("5")
        logs = app.screen
        assert isinstance(logs, LogsScreen)
        logs.view.append("driver", "step 1\nstep 2\n")
        await pilot.press("s", "s")
        await pilot.pause()
        saved = sorted(tmp_path.glob("cockpit-*.log"))
        assert len(saved) == 2
        assert all(path.read_text().endswith("step 2\n") for path in saved)
        assert all(path.stat().st_mode & 0o777 == 0o600 for path in saved)
        gone = tmp_path / "gone"  # the directory it was started in, removed since (root writes anywhere)
        gone.mkdir()
        monkeypatch.chdir(gone)
        gone.rmdir()
        await pilot.press("s")
        await pilot.pause()
        assert app.is_running and not gone.exists()
        assert any("not saved" in str(n.message) for n in app._notifications)


async def test_a_picker_shows_each_item_on_one_line() -> None:
    """A picker's item is the cluster's text (an IP, a file name), any length: one of 10,000 characters
    wrapped into about 125 rows and pushed the others out of sight; each is one line, cut with "…"."""
    from rich.text import Text
    from textual.widgets import OptionList

    state = hostile_state()
    app = CockpitApp(state.target, state=state, offline=True)
    async with app.run_test(size=(80, 24)) as pilot:
        items = [("long", Text("10.0.0." + "9" * 10_000)), ("short", Text("10.0.0.2"))]
        app.push_screen(PickScreen("Which node?", items))
        await pilot.pause()
        options = app.screen.query_one("#pick-list", OptionList)
        assert options.option_count == 2
        assert options.virtual_size.height == 2
        assert "10.0.0.2" in shown_text(app) and "…" in shown_text(app)


async def test_launcher_shows_profiles_and_checks_as_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Profiles are files anyone may share: names, descriptions, entrypoints and the problems of a broken
    one show as typed, in the list, the preview and the notice that refuses to submit."""
    profiles_dir = tmp_path / "profiles"
    profiles_dir.mkdir()
    (profiles_dir / "hostile.yaml").write_text(
        'name: "w[/0]"\n'
        'description: "[/x] \\e]0;owned\\a\\e[31mred \\x9b2J"\n'
        'entrypoint: "python3 train.py"\n'
        "overrides:\n"
        '  - "data.files=[/data/a.parquet]"\n'
        "cluster: {nodes: 64, gpus_per_node: 8}\n",
        encoding="utf-8",
    )
    (profiles_dir / "broken.yaml").write_text('name: "[/y]"\nbogus_key: "\\e[2J"\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    state = hostile_state()
    app = CockpitApp(state.target, state=state, offline=True)
    async with app.run_test(size=(160, 50), notifications=True) as pilot:
        await pilot.press("4", "n")
        await pilot.pause()
        assert isinstance(app.screen, LaunchScreen)
        await pilot.press(*"w[/0]")
        await pilot.pause()
        shown = shown_text(app)
        assert controls(shown) == []
        assert "w[/0]" in shown and "data.files=[/data/a.parquet]" in shown and "[/x]" in shown
        await pilot.press("ctrl+s")  # 64 nodes asked of a 3-node cluster: refused, and the notice says why
        await pilot.pause()
        assert controls(shown_text(app)) == []
        await pilot.press(*"zzz")  # no profile matches: the broken file's problem is shown
        await pilot.pause()
        shown = shown_text(app)
        assert controls(shown) == [] and "no profile matches" in shown


async def test_a_failing_worker_is_reported_as_text() -> None:
    """A bug in a worker is reported in a notice; its error text may quote cluster text."""
    app = CockpitApp(parse_target("http://127.0.0.1:1"), state=fixture_state(), offline=True)
    async with app.run_test(size=(160, 50), notifications=True) as pilot:

        def fails() -> None:
            raise ValueError(HOSTILE)

        worker = app.run_worker(fails, thread=True, exit_on_error=False, description="reading w[/0]")
        while not worker.is_finished:
            await pilot.pause()
        await pilot.pause()
        shown = shown_text(app)
        assert controls(shown) == []
        assert "reading w[/0] failed" in shown


async def test_connection_questions_show_names_as_text(tmp_path: Path) -> None:
    """The host key question and the passphrase prompt name hosts and paths as typed."""
    key = asyncssh.generate_private_key("ssh-ed25519")
    unknown = UnknownHostKey("unknown host key", "w[/0].example", 22, key, tmp_path / "[/k]" / "known_hosts")
    app = CockpitApp(parse_target("http://127.0.0.1:1"), state=fixture_state(), offline=True)
    async with app.run_test(size=(160, 50)) as pilot:
        app.push_screen(HostKeyScreen(unknown))
        await pilot.pause()
        shown = shown_text(app)
        assert "w[/0].example" in shown and "[/k]" in shown
        await pilot.press("n")
        app.push_screen(PassphraseScreen("Passphrase for /home/u/[/k]/id_ed25519 [b]:"))
        await pilot.pause()
        assert "/home/u/[/k]/id_ed25519 [b]:" in shown_text(app)


def first_job_with(metadata: dict[str, str]) -> tuple[CockpitState, JobRow]:
    """The fixture state, its first job carrying METADATA (as anyone who submits can write it)."""
    state = fixture_state()
    assert state.snapshot is not None
    first = replace(state.snapshot.jobs[0], metadata=metadata)
    state.snapshot = replace(state.snapshot, jobs=(first, *state.snapshot.jobs[1:]))
    return state, first


async def resubmit_first_job(pilot: Pilot[int]) -> None:
    """The Jobs screen, `r` on its first row."""
    await pilot.press("4")
    await pilot.pause()
    await pilot.press("r")
    await pilot.pause()


@pytest.mark.parametrize(
    ("recorded", "shown"),
    [
        # Anyone who can submit a job can write its metadata: a resubmit must not resolve a secret from it.
        ('["steps=2", "wandb.key=${ env:COCKPIT_TEST_SECRET}"]', "runtime_env.env_vars"),
        ('"steps=2"', "cannot be read back"),
        ('[1, {"a": 2}]', "cannot be read back"),
        ("not json", "cannot be read back"),
    ],
)
async def test_a_resubmit_never_resolves_what_a_jobs_metadata_says(
    monkeypatch: pytest.MonkeyPatch, recorded: str, shown: str
) -> None:
    monkeypatch.setenv("COCKPIT_TEST_SECRET", "s3cr3t-do-not-show")
    state, _job = first_job_with({"cockpit_profile": "demo", "cockpit_overrides": recorded})
    app = CockpitApp(state.target, state=state, offline=True)
    async with app.run_test(size=(160, 50), notifications=True) as pilot:
        await resubmit_first_job(pilot)
        text = shown_text(app)
        assert "s3cr3t-do-not-show" not in text
        assert shown in text
        if isinstance(app.screen, LaunchScreen):
            assert app.screen.plan is None
            await pilot.press("ctrl+s")
            await pilot.pause()
            assert isinstance(app.screen, LaunchScreen)  # nothing was submitted


async def test_a_resubmit_offers_the_profile_file_the_job_was_submitted_from(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A profile given by path at its submit is on no search path: the resubmit offers the file the
    submitting cockpit noted for the job (`jobs.submitted`), in place of none or of another of its name."""
    monkeypatch.setenv("COCKPIT_STATE_DIR", str(tmp_path / "state"))
    mine = tmp_path / "runs" / "demo.yaml"
    mine.parent.mkdir()
    mine.write_text("name: demo\nentrypoint: python my_grpo.py\ndescription: my own demo\n")
    state, first = first_job_with({"cockpit_profile": "demo", "cockpit_overrides": "[]"})
    remember_profile(first.submission_id, mine)
    app = CockpitApp(state.target, state=state, offline=True)
    async with app.run_test(size=(160, 50), notifications=True) as pilot:
        await resubmit_first_job(pilot)
        assert isinstance(app.screen, LaunchScreen)
        chosen = app.screen.selected()
        assert chosen is not None and chosen.path == mine and "my_grpo.py" in shown_text(app)
        assert [p.name for p in app.screen.all_profiles].count("demo") == 1  # the shipped demo left out


async def test_the_status_bar_ages_connected_data_in_poll_steps_and_old_data_to_the_second() -> None:
    """While connected the age moves in 5 s steps, so a job's metrics asking for the bar twice a second
    repaint it (and so the whole screen) once a step, not every second; data that is old counts seconds."""
    state = fixture_state()
    assert state.snapshot is not None
    app = CockpitApp(state.target, state=state, offline=True)
    async with app.run_test(size=(120, 40)) as pilot:
        bar = app.screen.query_one(StatusBar)
        drawn = []
        for age in (0.2, 2.0, 3.0, 6.0, 7.5, 11.0):  # each well inside its step: a slow pause moves it
            state.snapshot = replace(state.snapshot, fetched_at=time.time() - age)
            app.post_message(StateChanged("metrics"))
            await pilot.pause()
            drawn.append(bar._drawn)
        shown = [str(text) for text in drawn]
        assert [s.split(" · data ")[1].split(" · ")[0] for s in shown] == [
            "0s ago",
            "0s ago",
            "0s ago",
            "5s ago",
            "5s ago",
            "10s ago",
        ]
        assert drawn[0] is drawn[1] is drawn[2] and drawn[3] is drawn[4]  # the same line: not repainted
        state.connection.phase = "unreachable"
        state.snapshot = replace(state.snapshot, fetched_at=time.time() - 7.0)
        app.post_message(StateChanged("connection"))
        await pilot.pause()
        old = re.search(r" · data (\d+)s old", str(bar.render()))
        assert old is not None and 7 <= int(old.group(1)) <= 9, str(bar.render())  # to the second
