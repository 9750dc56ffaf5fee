"""The run doctor's stacks (`cockpit.core.doctor.stacks`): parsing py-spy dumps, grouping and labelling
them, and
the report, on real dumps of a hung demo job (`tests/fixtures/stacks/`, see its README): RolloutWorker_0
hung in `wait_for_weights_sync`, the three other ranks in `ray.get` in `all_gather_weights`, the driver in
`ray.get` in `main`, and idle actors and pool workers."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cockpit.core.actors.roles import role_of
from cockpit.core.cluster import parse
from cockpit.core.doctor.errors import StackParseError
from cockpit.core.doctor.stacks import (
    IDLE_LABEL,
    MAX_DUMP_CHARS,
    MAX_FRAMES,
    MAX_THREADS,
    Collector,
    Failure,
    Member,
    ProcessStack,
    StackGroup,
    StacksReport,
    group_heading,
    group_stacks,
    merge_failures,
    parse_json,
    parse_text,
    render_text,
    report_json,
    stack_key,
    stack_label,
    working_threads,
)
from cockpit.core.text import clean
from tests.harness.hostile import controls, hostile_text
from tests.harness.properties import examples

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "stacks"
JOB = "02000000"

DRIVER = 9312
RANK0 = 9349
WAITING_RANKS = (9351, 9352, 9383)
IDLE = (9211, 9280, 9348, 9350, 9418)
PIDS = (DRIVER, RANK0, *WAITING_RANKS, *IDLE)

LABELS = {
    DRIVER: "in ray.get in main",
    RANK0: "in wait_for_weights_sync",
    **dict.fromkeys(WAITING_RANKS, "in ray.get in all_gather_weights"),
    **dict.fromkeys(IDLE, IDLE_LABEL),
}

Frames = Sequence[tuple[str, str, int]]
"""(function, file, line) innermost first; line 0 for a native frame."""


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def dump(pid: int, form: str = "text") -> ProcessStack:
    """The captured dump of PID: `text`, `json`, `native` (text) or `native_json`."""
    text = fixture(f"{pid}.{form}")
    return parse_json(text) if form.endswith("json") else parse_text(text)


def members() -> dict[int, Member]:
    """What the cluster said each dumped process was, from the captured worker and actor lists."""
    workers = {w["pid"]: w for w in json.loads(fixture("workers.json"))}
    found: dict[int, Member] = {}
    for row in json.loads(fixture("actors.json")):
        actor = parse.actor_row(row)
        found[actor.pid or 0] = Member(
            pid=actor.pid or 0,
            node_id=actor.node_id,
            node_ip=workers[actor.pid]["ip"],
            kind="actor",
            actor_id=actor.actor_id,
            actor_name=actor.name,
            class_name=actor.class_name,
            role=role_of(actor.class_name, actor.name),
            job_id=actor.job_id,
        )
    for pid, kind, title, job in ((DRIVER, "driver", "", JOB), (9211, "worker", "ray::IDLE", "")):
        row = workers[pid]
        found[pid] = Member(pid, row["node_id"], row["ip"], kind=kind, title=title, job_id=job)
    return found


def fixture_groups(form: str = "text") -> tuple[StackGroup, ...]:
    by_pid = members()
    return group_stacks((by_pid[pid], dump(pid, form)) for pid in PIDS)


def text_dump(pid: int, threads: Sequence[tuple[int, str, Frames]], title: str = "python") -> str:
    """A dump in py-spy's text form: THREADS as (os thread id, name, frames)."""
    lines = [f"Process {pid}: {title}", "Python v3.11.7 (/usr/bin/python3.11)", ""]
    for tid, name, frames in threads:
        lines.append(f'Thread {tid} (idle): "{name}"')
        lines += [f"    {f} ({file}:{line})" if line else f"    {f} ({file})" for f, file, line in frames]
    return "\n".join(lines) + "\n"


def json_dump(pid: int, threads: Sequence[tuple[int, str, Frames]]) -> str:
    """A dump as `py-spy dump --json` gives it (the fields the parser reads)."""
    return json.dumps(
        [
            {
                "pid": pid,
                "thread_id": 140_000_000_000_000 + tid,
                "thread_name": name,
                "os_thread_id": tid,
                "active": False,
                "frames": [
                    {"name": f, "filename": file, "short_filename": file, "line": line, "module": None}
                    for f, file, line in frames
                ],
            }
            for tid, name, frames in threads
        ]
    )


RAY_LOOP: Frames = (
    ("Worker.main_loop", "ray/_private/worker.py", 1069),
    ("<module>", "ray/_private/workers/default_worker.py", 323),
)
POOL_THREAD: Frames = (
    ("_WorkItem.run", "concurrent/futures/thread.py", 58),
    ("_worker", "concurrent/futures/thread.py", 83),
    ("Thread.run", "threading.py", 982),
)


# -- the captured dumps ----------------------------------------------------------------------------


@pytest.mark.parametrize("pid", PIDS)
def test_text_and_json_of_a_dump_have_one_key_and_one_label(pid: int) -> None:
    text, doc = dump(pid, "text"), dump(pid, "json")
    assert text.pid == doc.pid == pid
    assert len(text.threads) == len(doc.threads)
    assert stack_key(text) == stack_key(doc)
    assert stack_label(text) == stack_label(doc) == LABELS[pid]


def test_native_text_and_json_of_rank0_have_one_key_and_name_the_c_call() -> None:
    text, doc = dump(RANK0, "native"), dump(RANK0, "native_json")
    assert stack_key(text) == stack_key(doc)
    assert stack_label(text) == stack_label(doc) == "in clock_nanosleep in wait_for_weights_sync"
    # libc's unnamed addresses differ in every process: they are not part of the key
    assert all(not function.startswith("0x") for thread in stack_key(text) for function, _ in thread)


def test_native_dump_of_a_waiting_rank_keeps_the_ray_get_label() -> None:
    stack = dump(9351, "native")
    assert stack_label(stack) == "in ray.get in all_gather_weights"
    assert stack_key(stack) != stack_key(dump(9351, "text"))  # its native frames are compared too


def test_text_dump_carries_the_process_title_and_thread_ids() -> None:
    stack = dump(RANK0)
    assert stack.title == "ray::RolloutWorker.generate"
    assert [(t.thread_id, t.name) for t in stack.threads] == [(9349, "MainThread"), (9416, "PythonGCThread")]
    assert stack.threads[0].frames[0].where == "cockpit/demo/trainer.py:35"
    assert not stack.cut


def test_a_thread_without_name_or_frames_is_kept() -> None:
    """`Thread 9389 (idle)`: the async actor's thread that py-spy sees without a Python frame."""
    for form in ("text", "json"):
        unnamed = [t for t in dump(9350, form).threads if t.thread_id == 9389]
        assert [(t.name, t.frames) for t in unnamed] == [("", ())]


@pytest.mark.parametrize("pid", IDLE)
def test_an_idle_worker_has_the_empty_key(pid: int) -> None:
    assert stack_key(dump(pid)) == ()
    assert working_threads(dump(pid)) == []


def test_threads_of_ray_and_python_alone_are_left_out() -> None:
    """The GC thread (Python frames over native ones, with --native) is not what the worker is doing."""
    for form in ("text", "native", "native_json"):
        assert [t.name for t in working_threads(dump(RANK0, form))] == ["MainThread"]
    assert [t.name for t in working_threads(dump(DRIVER, "json"))] == ["MainThread"]


@pytest.mark.parametrize("form", ["text", "json"])
def test_the_hung_job_makes_four_groups_odd_ones_first_idle_last(form: str) -> None:
    groups = fixture_groups(form)
    assert [(g.label, [m.pid for m in g.members], g.idle) for g in groups] == [
        ("in wait_for_weights_sync", [RANK0], False),
        ("in ray.get in all_gather_weights", [9351, 9352, 9383], False),
        ("in ray.get in main", [DRIVER], False),
        (IDLE_LABEL, [9350, 9211, 9280, 9348, 9418], True),
    ]
    assert [m.who for m in groups[1].members] == ["RolloutWorker_1", "RolloutWorker_2", "RolloutWorker_3"]
    assert groups[0].roles == groups[1].roles == ("rollout",)
    assert groups[2].members[0].who == f"driver of {JOB}"


# -- what splits a group and what does not --------------------------------------------------------


def _shift_lines(text: str, by: int) -> str:
    return re.sub(r":(\d+)\)$", lambda m: f":{int(m.group(1)) + by})", text, flags=re.MULTILINE)


def _move_addresses(text: str) -> str:
    return re.sub(r"0x([0-9a-f]+)", lambda m: f"0x{int(m.group(1), 16) + 0x1230:x}", text)


@pytest.mark.parametrize("pid, form", [(9351, "text"), (RANK0, "native"), (9351, "native")])
def test_line_numbers_and_native_addresses_do_not_split_a_group(pid: int, form: str) -> None:
    original = fixture(f"{pid}.{form}")
    moved = _move_addresses(_shift_lines(original, 7))
    assert moved != original
    assert stack_key(parse_text(moved)) == stack_key(parse_text(original))
    groups = group_stacks(
        [(Member(pid, "n1"), parse_text(original)), (Member(pid + 1, "n2"), parse_text(moved))]
    )
    assert [g.count for g in groups] == [2]


def test_an_address_inside_a_native_function_name_does_not_split_a_group() -> None:
    def with_address(address: str) -> ProcessStack:
        frames = ((f"Closure_{address}::call", "libworker.so", 0), ("train_step", "train.py", 12), *RAY_LOOP)
        return parse_text(text_dump(1, [(1, "MainThread", frames)]))

    assert stack_key(with_address("0x7f3a4d8a3f16")) == stack_key(with_address("0x55d1c0ffee00"))
    assert stack_key(with_address("0x7f3a4d8a3f16")) != stack_key(with_address("Other"))


def test_another_function_innermost_makes_another_group() -> None:
    original = fixture(f"{RANK0}.text")
    changed = original.replace("wait_for_weights_sync (", "wait_for_rollouts (")
    assert changed != original
    assert stack_key(parse_text(changed)) != stack_key(parse_text(original))
    groups = group_stacks([(Member(1, "n"), parse_text(original)), (Member(2, "n"), parse_text(changed))])
    assert sorted(g.label for g in groups) == ["in wait_for_rollouts", "in wait_for_weights_sync"]


def test_the_same_function_in_another_file_makes_another_group() -> None:
    a = text_dump(1, [(1, "MainThread", (("step", "a/train.py", 3), *RAY_LOOP))])
    b = text_dump(2, [(2, "MainThread", (("step", "b/train.py", 3), *RAY_LOOP))])
    assert stack_key(parse_text(a)) != stack_key(parse_text(b))


@pytest.mark.parametrize("render, parse_dump", [(text_dump, parse_text), (json_dump, parse_json)])
def test_thread_order_and_pool_thread_names_do_not_split_a_group(
    render: Callable[[int, Sequence[tuple[int, str, Frames]]], str], parse_dump: Callable[[str], ProcessStack]
) -> None:
    handle = (("handle_request", "app/server.py", 40), *POOL_THREAD)
    load = (("load_batch", "app/data.py", 17), *POOL_THREAD)
    main = (("serve", "app/main.py", 9), *RAY_LOOP)
    pool_3, pool_7 = "ThreadPoolExecutor-0_3", "ThreadPoolExecutor-0_7"
    a = parse_dump(render(10, [(10, "MainThread", main), (11, pool_3, handle), (12, pool_7, load)]))
    b = parse_dump(render(20, [(20, pool_3, load), (21, "MainThread", main), (22, pool_7, handle)]))
    assert stack_key(a) == stack_key(b)
    groups = group_stacks([(Member(10, "n"), a), (Member(20, "n"), b)])
    assert [(g.count, g.label) for g in groups] == [(2, "in serve +2 threads")]


def test_an_idle_group_comes_last_even_when_smaller() -> None:
    busy = dump(9351)
    groups = group_stacks([(Member(1, "n"), dump(9211)), *((Member(p, "n"), busy) for p in (2, 3, 4))])
    assert [(g.count, g.idle) for g in groups] == [(3, False), (1, True)]


def test_a_busy_thread_that_is_not_the_main_one_is_named_in_the_label() -> None:
    threads = [
        (1, "MainThread", RAY_LOOP),
        (2, "ThreadPoolExecutor-0_3", (("load_batch", "app/data.py", 17), *POOL_THREAD)),
    ]
    assert stack_label(parse_text(text_dump(1, threads))) == "in load_batch (thread ThreadPoolExecutor-0_3)"


# -- hostile input ---------------------------------------------------------------------------------

DUMPS = sorted(p.name for p in FIXTURES.glob("[0-9]*.*"))


@st.composite
def mutated_dumps(draw: st.DrawFn) -> str:
    """A captured dump with lines dropped, cut short or garbage put in (JSON ones are indented: by line
    too)."""
    lines = fixture(draw(st.sampled_from(DUMPS))).splitlines()
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(lines)))
        what = draw(st.sampled_from(["drop", "cut", "insert", "append"]))
        if what == "insert" or not lines:
            lines.insert(at, draw(hostile_text))
            continue
        at = min(at, len(lines) - 1)
        if what == "drop":
            del lines[at]
        elif what == "cut":
            lines[at] = lines[at][: draw(st.integers(0, len(lines[at])))]
        else:
            lines[at] += draw(hostile_text)
    text = "\n".join(lines)
    if draw(st.booleans()):
        text = text[: draw(st.integers(0, len(text)))]
    return text


PY_SPY_FIELDS = ("pid", "frames", "name", "filename", "short_filename", "line", "module", "thread_name")
json_keys = st.sampled_from([*PY_SPY_FIELDS, "os_thread_id", "thread_id", "active"]) | hostile_text
json_shapes = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | hostile_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(json_keys, inner, max_size=6),
    max_leaves=40,
)
"""Any JSON document, with py-spy's field names in it often: wrong types in every place."""


def exercise(stack: ProcessStack) -> str:
    """Everything done with a parsed dump: key, label, group, report; the terminal text comes back."""
    stack_key(stack)
    stack_label(stack)
    report = StacksReport(groups=group_stacks([(Member(stack.pid, "node"), stack)]))
    json.dumps(report_json(report))
    return render_text(report, clean=clean)


def parsed_or_refused(parse_dump: Callable[[str], ProcessStack], text: str) -> None:
    try:
        stack = parse_dump(text)
    except StackParseError as exc:
        assert "\n" not in str(exc)
        return
    assert isinstance(stack, ProcessStack)
    assert len(stack.threads) <= MAX_THREADS
    for line in exercise(stack).splitlines():
        assert not controls(line), line


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_text)
def test_any_text_is_parsed_or_refused(text: str) -> None:
    parsed_or_refused(parse_text, text)
    parsed_or_refused(parse_json, text)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_dumps())
def test_a_mangled_dump_is_parsed_or_refused(text: str) -> None:
    parsed_or_refused(parse_text, text)  # each form also given to the other's parser
    parsed_or_refused(parse_json, text)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_shapes)
def test_json_of_any_shape_is_parsed_or_refused(doc: object) -> None:
    parsed_or_refused(parse_json, json.dumps(doc))


def test_json_nested_past_the_recursion_limit_is_refused() -> None:
    with pytest.raises(StackParseError):
        parse_json("[" * 100_000)


@pytest.mark.parametrize("frames", ["5", "true", '"abc"', '{"name": "f"}'])
def test_json_frames_that_are_not_a_list_make_a_thread_without_frames(frames: str) -> None:
    stack = parse_json(f'[{{"pid": 7, "thread_name": "MainThread", "frames": {frames}}}]')
    assert [(t.name, t.frames) for t in stack.threads] == [("MainThread", ())]


@pytest.mark.parametrize("number", ["\u00b2", "9" * 5000])
def test_a_line_number_int_refuses_is_not_a_line_number(number: str) -> None:
    """`²` passes `str.isdigit` and `int` refuses it, as it refuses 5000 digits."""
    stack = parse_text(f'Thread 1 (idle): "MainThread"\n    f (a.py:{number})\n')
    assert [(f.function, f.line) for f in stack.threads[0].frames] == [("f", 0)]


def test_a_pid_int_refuses_is_no_process_line() -> None:
    with pytest.raises(StackParseError):
        parse_text(f"Process {'9' * 5000}: python\n")


def test_a_dump_over_the_size_limit_is_refused() -> None:
    huge = "x" * (MAX_DUMP_CHARS + 1)
    for parse_dump in (parse_text, parse_json):
        with pytest.raises(StackParseError, match="too large"):
            parse_dump(huge)


@pytest.mark.parametrize("render, parse_dump", [(text_dump, parse_text), (json_dump, parse_json)])
def test_too_many_threads_are_cut(
    render: Callable[[int, Sequence[tuple[int, str, Frames]]], str], parse_dump: Callable[[str], ProcessStack]
) -> None:
    threads = [(t, f"worker-{t}", (("step", "train.py", t),)) for t in range(1, MAX_THREADS + 6)]
    stack = parse_dump(render(1, threads))
    assert stack.cut
    assert len(stack.threads) == MAX_THREADS
    assert stack.threads[-1].name == f"worker-{MAX_THREADS}"


@pytest.mark.parametrize("render, parse_dump", [(text_dump, parse_text), (json_dump, parse_json)])
def test_too_many_frames_are_cut(
    render: Callable[[int, Sequence[tuple[int, str, Frames]]], str], parse_dump: Callable[[str], ProcessStack]
) -> None:
    frames = [(f"recurse_{n}", "train.py", n) for n in range(1, MAX_FRAMES + 6)]
    stack = parse_dump(render(1, [(1, "MainThread", frames), (2, "other", frames[:3])]))
    assert stack.cut
    assert [len(t.frames) for t in stack.threads] == [MAX_FRAMES, 3]
    assert stack.threads[0].frames[0].function == "recurse_1"  # the innermost ones are kept


def test_only_the_first_process_of_a_subprocesses_dump_is_taken() -> None:
    text = parse_text(fixture(f"{RANK0}.text") + fixture("9351.text"))
    assert (text.pid, len(text.threads), stack_label(text)) == (RANK0, 2, LABELS[RANK0])
    merged = json.loads(fixture(f"{RANK0}.json")) + json.loads(fixture("9351.json"))
    doc = parse_json(json.dumps(merged))
    assert (doc.pid, len(doc.threads), stack_label(doc)) == (RANK0, 2, LABELS[RANK0])


HOSTILE_NAME = "[bold]x[/]\x1b[31mred\x1b[0m\x07\x00\x9b2J\u202eevil"


def test_markup_escapes_and_controls_in_names_are_kept_as_data() -> None:
    stack = parse_json(
        json_dump(1, [(1, "Main\x1b]0;title\x07", ((HOSTILE_NAME, "app/x.py", 3), *RAY_LOOP))])
    )
    assert stack.threads[0].frames[0].function == HOSTILE_NAME
    assert stack_label(stack) == f"in {HOSTILE_NAME} (thread Main\x1b]0;title\x07)"
    report = StacksReport(groups=group_stacks([(Member(1, "node", actor_name="[red]A\x1b[2J"), stack)]))
    assert report_json(report)["groups"][0]["threads"][0]["frames"][0]["function"] == HOSTILE_NAME
    raw = render_text(report)
    assert HOSTILE_NAME in raw  # no `clean`: the data as it came
    shown = render_text(report, clean=clean)
    assert "[bold]x[/]" in shown and "[red]A" in shown  # markup is text, not styling
    for line in shown.splitlines():
        assert not controls(line), line
        assert "\x1b" not in line and "\u202e" not in line


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_text, hostile_text, hostile_text, hostile_text)
def test_rendered_text_of_hostile_names_has_no_control_character(
    function: str, file: str, thread: str, who: str
) -> None:
    stack = parse_json(json_dump(1, [(1, thread, ((function, file, 3), ("main", "app/main.py", 9)))]))
    report = StacksReport(
        groups=group_stacks([(Member(1, who, hostname=who, actor_name=who, role=who), stack)]),
        failures=(Failure(who, 2, function),),
        missing_nodes=(who,),
        notes=(thread,),
    )
    for line in render_text(report, clean=clean).splitlines():
        assert not controls(line), line


# -- the report ------------------------------------------------------------------------------------


def fixture_report(form: str = "text") -> StacksReport:
    return StacksReport(groups=fixture_groups(form), source="local")


@pytest.mark.parametrize("form", ["text", "json"])
def test_report_json_round_trips_with_labels_and_roles(form: str) -> None:
    doc = report_json(fixture_report(form))
    assert json.loads(json.dumps(doc)) == doc
    assert doc["processes"] == len(PIDS)
    assert [g["label"] for g in doc["groups"]] == [
        "in wait_for_weights_sync",
        "in ray.get in all_gather_weights",
        "in ray.get in main",
        IDLE_LABEL,
    ]
    rollout = doc["groups"][1]
    assert (rollout["count"], rollout["roles"], rollout["idle"]) == (3, ["rollout"], False)
    assert [(m["actor_name"], m["role"], m["kind"]) for m in rollout["members"]] == [
        (f"RolloutWorker_{r}", "rollout", "actor") for r in (1, 2, 3)
    ]
    assert [t["name"] for t in rollout["threads"]] == ["MainThread"]
    assert rollout["threads"][0]["frames"][4] == {
        "function": "all_gather_weights",
        "file": "cockpit/demo/trainer.py",
        "line": 57,
        "native": False,
    }
    driver = doc["groups"][2]["members"][0]
    assert (driver["pid"], driver["kind"], driver["job_id"]) == (DRIVER, "driver", JOB)


@pytest.mark.parametrize("form", ["text", "json"])
def test_report_json_shows_the_main_thread_of_the_idle_group(form: str) -> None:
    """py-spy's JSON lists the main thread last: the idle group still shows it, not an empty thread."""
    idle = report_json(fixture_report(form))["groups"][-1]
    assert idle["idle"]
    assert [t["name"] for t in idle["threads"]] == ["MainThread"]
    assert [f["function"] for f in idle["threads"][0]["frames"]] == ["Worker.main_loop", "<module>"]


def test_render_text_has_one_heading_per_group() -> None:
    report = fixture_report()
    lines = render_text(report, clean=clean).splitlines()
    headings = [line for line in lines if not line.startswith(" ")]
    assert headings == [group_heading(g) for g in report.groups]
    assert headings[1] == (
        "3 processes in ray.get in all_gather_weights · rollout · "
        "RolloutWorker_1, RolloutWorker_2, RolloutWorker_3 · 192.0.2.2"  # 3 nodes, one machine
    )
    assert render_text(report, full=False).splitlines() == headings


def test_render_text_shows_the_stack_and_members_of_a_busy_group_only() -> None:
    lines = render_text(fixture_report(), clean=clean).splitlines()
    rank0 = lines.index(group_heading(fixture_report().groups[0]))
    block = lines[rank0 + 1 : rank0 + 10]
    assert block[:3] == [
        "    thread MainThread:",
        "      wait_for_weights_sync (cockpit/demo/trainer.py:35)",
        "      RolloutWorker.generate (cockpit/demo/trainer.py:80)",
    ]
    assert "    - pid 9349 on 192.0.2.2: RolloutWorker_0 [rollout]" in block
    assert lines[-1].startswith(f"5 processes {IDLE_LABEL}")  # the idle group: its heading alone


def test_render_text_ends_with_failures_missing_nodes_and_notes() -> None:
    report = StacksReport(
        groups=fixture_groups()[:1],
        failures=(Failure("node-2", 9400, "the process has exited"),),
        missing_nodes=("node-3",),
        notes=("taken with py-spy on this machine (the local cluster)",),
    )
    assert render_text(report, full=False).splitlines()[1:] == [
        "not taken: 1 process(es) on node-2: the process has exited",
        "no answer yet from: node-3",
        "taken with py-spy on this machine (the local cluster)",
    ]


def test_merge_failures_says_each_reason_once_with_its_count() -> None:
    refused = "py-spy may not read other processes there"
    failures = [
        Failure("node-1", 1, refused),
        Failure("node-1", 2, refused),
        Failure("node-2", 3, refused),
        Failure("node-9", 0, "cannot start py-spy there (connection refused)"),
    ]
    assert merge_failures(failures) == [
        f"3 process(es) on node-1, node-2: {refused}",
        "1 node(s) on node-9: cannot start py-spy there (connection refused)",
    ]
    many = [Failure(f"node-{n}", n, refused) for n in range(1, 6)]
    assert merge_failures(many) == [f"5 process(es) on node-1, node-2, node-3 and 2 more: {refused}"]


def test_collector_names_the_nodes_that_have_not_answered() -> None:
    by_pid = members()
    collector = Collector(expected={"node-a": [by_pid[RANK0]], "node-b": [by_pid[9351]]}, source="ssh")
    collector.dumps.append((by_pid[RANK0], dump(RANK0)))
    collector.done_nodes.add("node-a")
    collector.notes += ["ptrace refused on node-b", "ptrace refused on node-b"]
    report = collector.report()
    assert report.missing_nodes == ("node-b",)
    assert report.notes == ("ptrace refused on node-b",)
    assert [(g.label, g.count) for g in report.groups] == [("in wait_for_weights_sync", 1)]
    assert report.source == "ssh"
