"""Paused-worker discovery and grouping (`cockpit.core.debug.paused`), on worker and task rows captured from
Ray 2.60 with two workers paused in debugpy (`shared/ray-2.60-samples/dbg_workers_paused.json`,
`dbg_tasks.json`). The dashboard is a small stand-in object answering with those parsed rows."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from cockpit.core.cluster import parse
from cockpit.core.cluster.answers import state_listing
from cockpit.core.debug.paused import (
    ExceptionSummary,
    PausedCache,
    PausedWorker,
    describe_age,
    find_paused,
    frame_where,
    group_paused,
    user_frame,
)
from cockpit.core.snapshots import Listing, TaskRow, WorkerRow

SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "ray-2.60-samples"
ACTOR_WORKER = "45c2b0b7d865423dda8adbca5af9c946b53ad9c1606be23b11d757d8"
TASK_WORKER = "4dd4d3ea2df751e1503b58a128f4e87e47d7b5908ca9fb1377dbe660"
NODE = "837a4760cf15262ab338f0926c4a91b7275db035ed0bae809499f9ae"
PKG = "/tmp/raytest/head/session_2026-11-25_21-25-07_342785_3489/runtime_resources/working_dir_files"
CRASH_PY = f"{PKG}/_ray_pkg_de93e2b51e801a8f/crash.py"


def sample(name: str) -> dict[str, Any]:
    path = SAMPLES / name
    if not path.is_file():
        pytest.skip(f"captured Ray samples not found at {SAMPLES}")
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


def worker_listing(doc: dict[str, Any] | None = None) -> Listing[WorkerRow]:
    return state_listing(doc or sample("dbg_workers_paused.json"), "/api/v0/workers", parse.worker_row)


def task_listing() -> Listing[TaskRow]:
    return state_listing(sample("dbg_tasks.json"), "/api/v0/tasks", parse.task_row)


def _matches(row: object, filters: Iterable[tuple[str, str, str]]) -> bool:
    for key, op, value in filters:
        have = getattr(row, key)
        text = str(have).lower() if isinstance(have, bool) else str(have)
        if (op == "=" and text != value) or (op == "!=" and text == value):
            return False
    return True


class FakeDashboard:
    """Answers `workers` with the listing it holds, as is (the filter is only recorded: the code under
    test must not rely on the head applying it), and `tasks` with the captured tasks that match."""

    def __init__(self, workers: Listing[WorkerRow]) -> None:
        self.worker_listing = workers
        self.tasks_listing = task_listing()
        self.worker_calls: list[tuple[list[tuple[str, str, str]], int]] = []
        self.task_calls: list[list[tuple[str, str, str]]] = []

    async def workers(self, filters: Iterable[tuple[str, str, str]] = (), limit: int = 1000) -> Any:
        self.worker_calls.append((list(filters), limit))
        return self.worker_listing

    async def tasks(self, filters: Iterable[tuple[str, str, str]] = (), limit: int = 1000) -> Any:
        wanted = list(filters)
        self.task_calls.append(wanted)
        rows = tuple(r for r in self.tasks_listing.rows if _matches(r, wanted))
        return replace(self.tasks_listing, rows=rows)


def worker(
    worker_id: str,
    *,
    since: float | None,
    exception: ExceptionSummary | None = None,
    task_name: str = "RolloutWorker.generate",
    job_id: str = "03000000",
    mode: str = "debugpy",
    pid: int = 100,
    port: int = 5000,
) -> PausedWorker:
    return PausedWorker(
        mode=mode,
        worker_id=worker_id,
        node_id=NODE,
        ip="192.0.2.2",
        pid=pid,
        port=port,
        job_id=job_id,
        task_name=task_name,
        since=since,
        exception=exception,
    )


# -- ExceptionSummary ------------------------------------------------------------------------------


def test_group_key_masks_the_numbers_of_a_message() -> None:
    rank0 = ExceptionSummary("ValueError", "bad batch on rank 0 at step 15", "rollout.py:88 in generate")
    rank7 = ExceptionSummary("ValueError", "bad batch on rank 7 at step 16", "rollout.py:88 in generate")
    assert rank0.group_key() == rank7.group_key()
    assert rank0.group_key()[2] == "bad batch on rank N at step N"


def test_group_key_masks_decimals_and_whitespace() -> None:
    a = ExceptionSummary("RuntimeError", "loss  is 0.25\n(nan)", "train.py:3 in step")
    b = ExceptionSummary("RuntimeError", "loss is 12.5 (nan)", "train.py:3 in step")
    assert a.group_key() == b.group_key()


def test_group_key_tells_apart_type_and_place() -> None:
    base = ExceptionSummary("ValueError", "boom 2", "crash.py:8 in bad_task")
    assert base.group_key() != replace(base, type_name="RuntimeError").group_key()
    assert base.group_key() != replace(base, where="crash.py:14 in work").group_key()
    assert base.group_key() != replace(base, message="kaboom 2").group_key()


def test_one_line_joins_lines() -> None:
    assert ExceptionSummary("KeyError", "'a'\n  more").one_line() == "KeyError: 'a' more"
    assert ExceptionSummary("StopIteration", "").one_line() == "StopIteration"


# -- group_paused ----------------------------------------------------------------------------------


def test_same_error_is_one_group_oldest_first() -> None:
    boom = ExceptionSummary("ValueError", "bad batch on rank 3", "rollout.py:88 in generate")
    newer = worker("w-new", since=200.0, exception=boom, pid=2)
    older = worker("w-old", since=100.0, exception=replace(boom, message="bad batch on rank 5"), pid=1)
    groups = group_paused([newer, older])
    assert len(groups) == 1
    assert [w.worker_id for w in groups[0].members] == ["w-old", "w-new"]
    assert groups[0].first.worker_id == "w-old"
    assert groups[0].exception is not None
    assert groups[0].exception.message == "bad batch on rank 5"


def test_a_different_error_is_its_own_group() -> None:
    boom = ExceptionSummary("ValueError", "bad batch on rank 3", "rollout.py:88 in generate")
    other = ExceptionSummary("KeyError", "'reward'", "reward.py:12 in score")
    groups = group_paused(
        [
            worker("a", since=10.0, exception=boom),
            worker("b", since=11.0, exception=other),
            worker("c", since=12.0, exception=boom),
        ]
    )
    assert [[w.worker_id for w in g.members] for g in groups] == [["a", "c"], ["b"]]
    assert groups[1].exception == other


def test_unknown_exceptions_group_by_mode_job_and_task() -> None:
    groups = group_paused(
        [
            worker("a", since=1.0),
            worker("b", since=2.0),  # same job, same task: a burst before any peek
            worker("c", since=3.0, job_id="04000000"),
            worker("d", since=4.0, task_name="Critic.score"),
            worker("e", since=5.0, mode="legacy", port=6000),
        ]
    )
    assert [[w.worker_id for w in g.members] for g in groups] == [["a", "b"], ["c"], ["d"], ["e"]]
    assert all(g.exception is None for g in groups)


def test_unknown_exception_and_no_task_name_stays_alone() -> None:
    groups = group_paused([worker("a", since=1.0, task_name=""), worker("b", since=2.0, task_name="")])
    assert len(groups) == 2


def test_known_and_unknown_are_not_mixed() -> None:
    boom = ExceptionSummary("ValueError", "x", "a.py:1 in f")
    groups = group_paused([worker("a", since=1.0, exception=boom), worker("b", since=2.0)])
    assert len(groups) == 2


def test_groups_are_ordered_by_their_oldest_member() -> None:
    boom = ExceptionSummary("ValueError", "x", "a.py:1 in f")
    other = ExceptionSummary("KeyError", "y", "b.py:2 in g")
    groups = group_paused(
        [
            worker("boom-late", since=50.0, exception=boom),
            worker("other-1", since=30.0, exception=other),
            worker("boom-early", since=10.0, exception=boom),
            worker("other-2", since=40.0, exception=other),
        ]
    )
    assert [g.first.worker_id for g in groups] == ["boom-early", "other-1"]


def test_group_paused_of_nothing() -> None:
    assert group_paused([]) == ()


# -- frames ----------------------------------------------------------------------------------------

RAY_FRAMES = [
    ("/opt/venv/lib/python3.11/site-packages/ray/util/tracing/tracing_helper.py", 487, "_resume_span"),
    ("/opt/venv/lib/python3.11/site-packages/ray/_private/function_manager.py", 740, "actor_method_executor"),
    ("/opt/venv/lib/python3.11/site-packages/python/ray/_raylet.pyx", 2147, "function_executor"),
    ("python/ray/_raylet.c", 2205, "ray._raylet.execute_task"),
    ("/opt/venv/lib/python3.11/site-packages/debugpy/_vendored/pydevd/pydevd.py", 1, "do_wait_suspend"),
]


def test_user_frame_skips_ray_and_debugpy() -> None:
    frames = [*RAY_FRAMES, (CRASH_PY, 14, "work"), ("/home/u/lib.py", 3, "helper")]
    assert user_frame(frames) == (CRASH_PY, 14, "work")


def test_user_frame_first_user_frame_wins() -> None:
    frames = [(CRASH_PY, 14, "work"), *RAY_FRAMES]
    assert user_frame(frames) == (CRASH_PY, 14, "work")


def test_user_frame_of_only_ray_frames_is_the_first() -> None:
    assert user_frame(RAY_FRAMES) == RAY_FRAMES[0]
    assert user_frame([]) is None


def test_frame_where() -> None:
    assert frame_where(CRASH_PY, 42, "fn") == "crash.py:42 in fn"
    assert frame_where("C:\\work\\train.py", 7, "step") == "train.py:7 in step"
    assert frame_where("crash.py", 8, "") == "crash.py:8"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (42, "42s"), (59, "59s"), (60, "1m00s"), (185, "3m05s"), (3599, "59m59s"), (3600, "1h00m")],
)
def test_describe_age(seconds: int, text: str) -> None:
    assert describe_age(1000.0, 1000.0 + seconds) == text


def test_describe_age_long_unknown_and_future() -> None:
    assert describe_age(0.0, 2 * 3600 + 10 * 60 + 59) == "2h10m"
    assert describe_age(None, 5.0) == "?"
    assert describe_age(100.0, 90.0) == "0s"  # a clock step back is not a negative age


# -- PausedCache -----------------------------------------------------------------------------------


def test_forget_missing_needs_two_polls_in_a_row() -> None:
    cache = PausedCache()
    cache.learn(worker("a", since=1.0))
    cache.learn(worker("b", since=1.0))
    cache.forget_missing(["b"])
    assert "a" in cache.known  # one poll without it: a peek may have unpaused it for a moment
    cache.forget_missing(["b"])
    assert "a" not in cache.known
    assert "b" in cache.known


def test_forget_missing_counts_only_consecutive_polls() -> None:
    cache = PausedCache()
    cache.learn(worker("a", since=1.0))
    cache.forget_missing([])
    cache.forget_missing(["a"])  # back: the count starts again
    cache.forget_missing([])
    assert "a" in cache.known
    cache.forget_missing([])
    assert "a" not in cache.known


def test_forget_missing_touches_only_its_mode() -> None:
    cache = PausedCache()
    legacy = worker("a", since=1.0, mode="legacy", port=6000)
    cache.learn(legacy)
    cache.learn(worker("b", since=1.0))
    for _ in range(3):
        cache.forget_missing([])  # debugpy polls never drop legacy sessions
    assert set(cache.known) == {legacy.key}
    for _ in range(2):
        cache.forget_missing([], mode="legacy")
    assert cache.known == {}


# -- find_paused -----------------------------------------------------------------------------------


async def test_find_paused_one_request_and_a_task_lookup_per_new_worker() -> None:
    client = FakeDashboard(worker_listing())
    cache = PausedCache()
    listing = await find_paused(client, cache)  # type: ignore[arg-type]

    assert len(client.worker_calls) == 1
    filters, _limit = client.worker_calls[0]
    assert ("num_paused_threads", "!=", "0") in filters
    assert len(client.task_calls) == 2
    assert {f for call in client.task_calls for f in call if f[0] == "worker_id"} == {
        ("worker_id", "=", ACTOR_WORKER),
        ("worker_id", "=", TASK_WORKER),
    }

    by_id = {w.worker_id: w for w in listing.workers}
    assert set(by_id) == {ACTOR_WORKER, TASK_WORKER}
    assert set(listing.new) == {ACTOR_WORKER, TASK_WORKER}
    actor = by_id[ACTOR_WORKER]
    assert (actor.mode, actor.ip, actor.pid, actor.port) == ("debugpy", "192.0.2.2", 9683, 58565)
    assert actor.address == "192.0.2.2:58565"
    assert actor.task_name == "BadActor.work"
    assert actor.actor_id == "520e6fbe17b1d7bd2055735a03000000"
    assert actor.job_id == "03000000"
    assert actor.label() == "BadActor.work pid 9683"
    task = by_id[TASK_WORKER]
    assert (task.task_name, task.actor_id, task.port, task.pid) == ("bad_task", "", 38959, 9682)
    assert task.since == listing.fetched_at
    assert listing.total_paused == 2


async def test_find_paused_again_makes_no_task_lookup() -> None:
    client = FakeDashboard(worker_listing())
    cache = PausedCache()
    first = await find_paused(client, cache)  # type: ignore[arg-type]
    lookups = len(client.task_calls)
    second = await find_paused(client, cache)  # type: ignore[arg-type]
    assert len(client.worker_calls) == 2
    assert len(client.task_calls) == lookups
    assert second.new == ()
    assert {w.worker_id: w.since for w in second.workers} == {w.worker_id: w.since for w in first.workers}


async def test_find_paused_keeps_what_a_peek_learnt() -> None:
    client = FakeDashboard(worker_listing())
    cache = PausedCache()
    await find_paused(client, cache)  # type: ignore[arg-type]
    boom = ExceptionSummary("RuntimeError", "actor boom", "crash.py:14 in work")
    cache.learn(replace(cache.known[ACTOR_WORKER], exception=boom))
    again = await find_paused(client, cache)  # type: ignore[arg-type]
    assert {w.worker_id: w.exception for w in again.workers}[ACTOR_WORKER] == boom


async def test_find_paused_follows_a_new_adapter_port() -> None:
    doc = sample("dbg_workers_paused.json")
    client = FakeDashboard(worker_listing(doc))
    cache = PausedCache()
    await find_paused(client, cache)  # type: ignore[arg-type]
    moved = copy.deepcopy(doc)
    for row in moved["data"]["result"]["result"]:
        if row["worker_id"] == ACTOR_WORKER:
            row["debugger_port"] = 41000
    client.worker_listing = worker_listing(moved)
    lookups = len(client.task_calls)
    listing = await find_paused(client, cache)  # type: ignore[arg-type]
    actor = next(w for w in listing.workers if w.worker_id == ACTOR_WORKER)
    assert actor.port == 41000
    assert actor.task_name == "BadActor.work"  # still known, not looked up again
    assert len(client.task_calls) == lookups
    assert cache.known[ACTOR_WORKER].port == 41000


async def test_find_paused_ignores_rows_not_paused_or_not_alive() -> None:
    doc = copy.deepcopy(sample("dbg_workers_paused.json"))
    rows = doc["data"]["result"]["result"]
    rows[0]["num_paused_threads"] = 0
    rows[1]["is_alive"] = False
    client = FakeDashboard(worker_listing(doc))
    listing = await find_paused(client, PausedCache())  # type: ignore[arg-type]
    assert listing.workers == ()
    assert client.task_calls == []  # nothing to look up either


async def test_find_paused_ignores_a_row_without_a_debugger_port() -> None:
    doc = copy.deepcopy(sample("dbg_workers_paused.json"))
    doc["data"]["result"]["result"][0]["debugger_port"] = 0
    listing = await find_paused(FakeDashboard(worker_listing(doc)), PausedCache())  # type: ignore[arg-type]
    assert [w.worker_id for w in listing.workers] == [TASK_WORKER]


async def test_find_paused_counts_what_the_head_filtered() -> None:
    doc = copy.deepcopy(sample("dbg_workers_paused.json"))
    doc["data"]["result"]["num_filtered"] = 1500
    listing = await find_paused(FakeDashboard(worker_listing(doc)), PausedCache())  # type: ignore[arg-type]
    assert len(listing.workers) == 2
    assert listing.total_paused == 1500


async def test_find_paused_forgets_a_worker_after_two_polls_without_it() -> None:
    doc = sample("dbg_workers_paused.json")
    client = FakeDashboard(worker_listing(doc))
    cache = PausedCache()
    await find_paused(client, cache)  # type: ignore[arg-type]
    gone = copy.deepcopy(doc)
    gone["data"]["result"]["result"] = [
        r for r in gone["data"]["result"]["result"] if r["worker_id"] != ACTOR_WORKER
    ]
    client.worker_listing = worker_listing(gone)
    listing = await find_paused(client, cache)  # type: ignore[arg-type]
    assert [w.worker_id for w in listing.workers] == [TASK_WORKER]
    assert ACTOR_WORKER in cache.known
    client.worker_listing = worker_listing(doc)
    back = await find_paused(client, cache)  # type: ignore[arg-type]
    assert back.new == ()  # back after one poll (a peek): no second bell

    client.worker_listing = worker_listing(gone)
    await find_paused(client, cache)  # type: ignore[arg-type]
    await find_paused(client, cache)  # type: ignore[arg-type]
    assert ACTOR_WORKER not in cache.known
    client.worker_listing = worker_listing(doc)
    returned = await find_paused(client, cache)  # type: ignore[arg-type]
    assert returned.new == (ACTOR_WORKER,)


async def test_find_paused_without_a_running_task() -> None:
    client = FakeDashboard(worker_listing())
    client.tasks_listing = replace(client.tasks_listing, rows=())
    listing = await find_paused(client, PausedCache())  # type: ignore[arg-type]
    assert {w.task_name for w in listing.workers} == {""}
    assert {w.label() for w in listing.workers} == {"task pid 9683", "task pid 9682"}


# -- as_dict ---------------------------------------------------------------------------------------

AS_DICT_KEYS = {
    "mode",
    "worker_id",
    "node_id",
    "ip",
    "pid",
    "port",
    "address",
    "job_id",
    "task_id",
    "task_name",
    "actor_id",
    "first_seen",
    "exception",
    "note",
}


async def test_as_dict_of_a_found_worker_is_json() -> None:
    listing = await find_paused(FakeDashboard(worker_listing()), PausedCache())  # type: ignore[arg-type]
    for found in listing.workers:
        doc = found.as_dict()
        assert set(doc) == AS_DICT_KEYS
        assert json.loads(json.dumps(doc)) == doc
        assert doc["exception"] is None
        assert doc["note"] is None
        assert doc["address"] == found.address
        assert doc["first_seen"] == found.since


def test_as_dict_with_an_exception() -> None:
    boom = ExceptionSummary("ValueError", "boom 2", "crash.py:8 in bad_task", traceback="Traceback ...")
    doc = worker("w", since=5.0, exception=boom, task_name="").as_dict()
    assert set(doc) == AS_DICT_KEYS
    assert doc["exception"] == {"type": "ValueError", "message": "boom 2", "where": "crash.py:8 in bad_task"}
    assert doc["actor_id"] is None
    assert json.loads(json.dumps(doc)) == doc
