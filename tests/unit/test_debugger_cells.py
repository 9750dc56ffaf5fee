"""The Debugger screen's row cells (`cockpit.ui.screens.debugger.worker_cells`, a pure function): every
string came from the cluster or from a crashed worker, so each cell is a `Text` never read as markup,
with no escape or control character left in it."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.text import Text

from cockpit.core.debug.paused import ExceptionSummary, PausedGroup, PausedWorker, group_paused
from cockpit.ui.screens.debugger import COLUMNS, worker_cells
from tests.harness.hostile import controls, hostile_text
from tests.harness.properties import examples

NOW = 1_795_642_400.0
HOSTILE = "\x1b[31m[bold]x[/] [/data/a.parquet]\x1b]0;pwned\x07 \x00\x9b2J\u2028end\x1b[0m"


def paused(
    *,
    exception: ExceptionSummary | None = None,
    task_name: str = "RolloutWorker.generate",
    job_id: str = "03000000",
    note: str = "",
    mode: str = "debugpy",
    since: float | None = NOW - 185,
    pid: int | None = 9683,
    ip: str = "192.0.2.2",
) -> PausedWorker:
    return PausedWorker(
        mode=mode,
        worker_id="45c2b0b7d865423dda8adbca5af9c946b53ad9c1606be23b11d757d8",
        node_id="837a4760cf15262ab338f0926c4a91b7275db035ed0bae809499f9ae",
        ip=ip,
        pid=pid,
        port=58565,
        job_id=job_id,
        task_name=task_name,
        since=since,
        exception=exception,
        note=note,
    )


def cells_of(worker: PausedWorker, index: int = 0, group: PausedGroup | None = None) -> dict[str, Text]:
    group = group or PausedGroup(exception=worker.exception, members=(worker,))
    return worker_cells(group, index, worker, NOW)


def assert_safe(cells: dict[str, Text]) -> None:
    assert set(cells) == {key for key, _label in COLUMNS}
    for key, cell in cells.items():
        assert isinstance(cell, Text), key
        assert controls(cell.plain) == [], (key, cell.plain)
        assert "\x1b" not in cell.plain, key


def test_cells_of_a_plain_worker() -> None:
    boom = ExceptionSummary("ValueError", "boom 2", "crash.py:8 in bad_task")
    cells = cells_of(paused(exception=boom))
    assert_safe(cells)
    assert cells["group"].plain == "1"
    assert cells["exception"].plain == "ValueError: boom 2"
    assert cells["where"].plain == "crash.py:8 in bad_task"
    assert cells["task"].plain == "RolloutWorker.generate pid 9683"
    assert cells["job"].plain == "03000000"
    assert cells["node"].plain == "192.0.2.2"
    assert cells["since"].plain == "3m05s"


def test_hostile_text_stays_literal() -> None:
    boom = ExceptionSummary("ValueError", f"bad [bold]x[/] batch {HOSTILE}"[:80], "[/data/a.parquet]:1 in f")
    worker = paused(exception=boom, task_name=f"[bold]x[/]{HOSTILE}", job_id=f"[/data/a.parquet]{HOSTILE}")
    cells = cells_of(worker)
    assert_safe(cells)
    assert "[bold]x[/]" in cells["exception"].plain
    assert "[/data/a.parquet]" in cells["where"].plain
    assert "[bold]x[/]" in cells["task"].plain
    assert "[/data/a.parquet]" in cells["task"].plain
    assert "[/data/a.parquet]" in cells["job"].plain
    assert "pwned" not in cells["job"].plain  # an OSC window title goes whole, not just its escape
    assert not cells["job"].spans  # no style taken from the text itself


def test_hostile_note_and_ip() -> None:
    cells = cells_of(paused(note=f"cannot attach: {HOSTILE}", ip="[red]10.0.0.1\r\n"))
    assert_safe(cells)
    assert "[bold]x[/]" in cells["exception"].plain
    assert cells["node"].plain.startswith("[red]10.0.0.1")


def test_a_long_message_is_cut() -> None:
    cells = cells_of(paused(exception=ExceptionSummary("ValueError", "x" * 500)))
    assert len(cells["exception"].plain) == 90


def test_group_rows() -> None:
    boom = ExceptionSummary("ValueError", "bad batch on rank 1", "rollout.py:88 in generate")
    members = [paused(exception=boom, since=NOW - 10 * k, pid=k) for k in range(3)]
    (group,) = group_paused(members)
    first = worker_cells(group, 0, group.members[0], NOW)
    later = worker_cells(group, 1, group.members[1], NOW)
    assert first["group"].plain == "3x"
    assert later["group"].plain.strip() == "└"
    assert first["since"].plain == "20s"


def test_unknown_exception_rows() -> None:
    looking = cells_of(paused())
    assert looking["exception"].plain == "(looking…)"
    assert looking["where"].plain == ""
    legacy = cells_of(paused(mode="legacy", pid=None, task_name=""))
    assert legacy["exception"].plain == "(attach to see)"
    assert legacy["task"].plain == "task [pdb]"
    assert cells_of(paused(since=None))["since"].plain == "?"


def test_the_groups_exception_stands_for_a_member_without_one() -> None:
    boom = ExceptionSummary("KeyError", "'reward'", "reward.py:12 in score")
    known, unknown = paused(exception=boom), paused()
    group = PausedGroup(exception=boom, members=(known, unknown))
    cells = worker_cells(group, 1, unknown, NOW)
    assert cells["exception"].plain == "KeyError: 'reward'"
    assert cells["where"].plain == "reward.py:12 in score"


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    message=hostile_text,
    type_name=hostile_text,
    where=hostile_text,
    index=st.integers(0, 1),
    legacy=st.booleans(),
)
def test_any_exception_text_is_safe(
    message: str, type_name: str, where: str, index: int, legacy: bool
) -> None:
    boom = ExceptionSummary(type_name or "Error", message, where)
    worker = paused(exception=boom, mode="legacy" if legacy else "debugpy", task_name=message, job_id=where)
    other = paused(exception=boom, pid=1)
    cells = worker_cells(PausedGroup(exception=boom, members=(worker, other)), index, worker, NOW)
    assert_safe(cells)
