"""Cluster text reaches widgets as plain `Text`: never read as markup, no control character left.

Property tests at the level of the functions that turn snapshots into what the widgets show (the job
table's cells, the jobs strip, the node table's cells, the GPU heatmap's detail line); the screens
themselves are driven with hostile text in `tests/ui/test_fixture_state.py` and `tests/ui/test_gpu_views.py`.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.text import Text

from cockpit.core.gpu.board import GpuBoard
from cockpit.core.snapshots import ActorRow, JobRow, NodeSnapshot
from cockpit.ui.screens.jobs import job_cells
from cockpit.ui.widgets.gpu_heatmap import cursor_detail
from cockpit.ui.widgets.jobs_strip import jobs_text
from cockpit.ui.widgets.node_table import node_cells
from cockpit.ui.widgets.safe_text import clean, plain
from tests.harness.hostile import T0, controls, hostile_cluster, hostile_jobs, hostile_text
from tests.harness.properties import examples

CONSOLE = Console(width=200, color_system="truecolor")
EXAMPLES = settings(max_examples=examples(200), deadline=None)


def rendered(text: Text) -> str:
    """What the terminal would be sent for TEXT, its lines joined (a `Text` is never read as markup)."""
    lines = CONSOLE.render_lines(text, CONSOLE.options, pad=False)
    return "".join(segment.text for line in lines for segment in line)


def job(entrypoint: str = "python train.py", message: str = "", key: str = "raysubmit_1") -> JobRow:
    return JobRow(
        submission_id=key,
        job_id="02000000",
        type="SUBMISSION",
        status="RUNNING",
        entrypoint=entrypoint,
        message=message,
        start_time=T0 - 60,
        end_time=None,
    )


@pytest.mark.parametrize(
    "value",
    ["data.files=[/data/a.parquet]", "w[/0]", "[b]x[/b]", "[@click=app.quit]", "a\\", "[link=http://x]y"],
)
def test_markup_is_shown_as_typed(value: str) -> None:
    assert plain(value).plain == value == clean(value)
    cells = job_cells(job(entrypoint=f"python -m train {value}", message=value, key=value), T0)
    assert all(isinstance(cell, Text) for cell in cells.values())  # a `str` cell is read as markup
    assert cells["job"].plain == value and cells["message"].plain == value
    assert value in cells["entrypoint"].plain


@EXAMPLES
@given(hostile_text)
def test_clean_leaves_no_control_character(value: str) -> None:
    cleaned = clean(value)
    assert controls(cleaned) == []
    assert clean(cleaned) == cleaned
    assert plain(value, "bold").plain == cleaned
    assert controls(rendered(plain(value))) == []


@EXAMPLES
@given(st.text(alphabet=st.characters(exclude_categories=("Cc", "Cs", "Zl", "Zp"))))
def test_clean_keeps_text_without_controls_as_it_is(value: str) -> None:
    assert clean(value) == value


@EXAMPLES
@given(hostile_jobs())
def test_job_cells_are_plain_text(row: JobRow) -> None:
    cells = job_cells(row, T0)
    for cell in cells.values():
        assert isinstance(cell, Text)
        assert controls(cell.plain) == []
        assert controls(rendered(cell)) == []


@EXAMPLES
@given(st.lists(hostile_jobs(), max_size=6), st.integers(1, 6))
def test_jobs_strip_text_is_plain(jobs: list[JobRow], limit: int) -> None:
    text = jobs_text(tuple(jobs), limit, T0)
    assert controls(text.plain.replace("\n", "")) == []  # one line per job
    assert text.plain.count("\n") == max(0, min(limit, len(jobs)) - 1)
    assert controls(rendered(text)) == []


def test_a_long_name_is_cut_so_the_columns_after_it_stay_in_sight() -> None:
    """A column is as wide as its widest cell: one 10,000-character host name pushed IP, State, CPU and the
    rest out of sight at every terminal size."""
    long = "x" * 10_000
    node = NodeSnapshot(
        node_id="a" * 56,
        ip=long,
        hostname=long,
        is_head=False,
        state=long,
        state_message=long,
        start_time=T0 - 60,
        end_time=T0,
        logical_cpus=8.0,
        logical_gpus=0.0,
    )
    cells = node_cells(node, T0)
    widths = {key: cells[key].cell_len for key in ("host", "ip", "state", "reason")}
    assert widths == {"host": 40, "ip": 39, "state": 24, "reason": 200}
    assert all(cells[key].plain.endswith("…") for key in widths)


@EXAMPLES
@given(hostile_cluster())
def test_node_cells_and_gpu_details_are_plain(
    cluster: tuple[tuple[NodeSnapshot, ...], list[ActorRow]],
) -> None:
    nodes, actors = cluster
    for node in nodes:
        for cell in node_cells(node, T0).values():
            assert isinstance(cell, Text)
            assert controls(cell.plain) == []
    board = GpuBoard()
    board.ingest_nodes(nodes, job_running=True, local_time=T0)
    board.ingest_actors(actors)
    fleet = board.fleet()
    for row in fleet.rows:
        detail = cursor_detail(fleet, row)
        assert controls(detail.plain) == []
        assert controls(rendered(detail)) == []
