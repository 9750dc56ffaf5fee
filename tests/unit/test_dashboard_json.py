"""Any JSON the dashboard sends gives a snapshot (NA where a value is missing or wrong) or a `CockpitError`.

Property tests of every public function of `cockpit.core.cluster.parse` and of the answer readers of
`cockpit.core.cluster.dashboard`: arbitrary JSON values, and the answers captured from Ray 2.60
(`shared/ray-2.60-samples`) with any of their values, at any depth, replaced by arbitrary JSON.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cockpit.core.cluster import answers as ray_api
from cockpit.core.cluster import errors as dashboard_errors
from cockpit.core.cluster import parse, transport
from cockpit.core.errors import CockpitError
from cockpit.core.snapshots import (
    NA,
    ActorRow,
    ClusterInfo,
    GpuSample,
    JobRow,
    Listing,
    ListMeta,
    LogIndex,
    NodeSnapshot,
    TaskRow,
    WorkerRow,
)
from tests.harness.hostile import hostile_text
from tests.harness.properties import examples

SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "ray-2.60-samples"
EXAMPLES = settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])

ODD_NUMBERS = [
    math.inf,
    -math.inf,
    math.nan,
    10**400,
    -(10**400),
    2**63,
    2**64 - 1,
    -1,
    1e308,
    "1e400",
    "-1e400",
    "Infinity",
    "NaN",
    "inf",
    "",
    " ",
    "\n\t ",
    "12abc",
]
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from(ODD_NUMBERS)
    | hostile_text
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)
"""Any JSON value `json.loads` can give (it reads `Infinity`, `NaN` and numbers of any size)."""
json_objects = st.dictionaries(st.text(max_size=8), json_values, max_size=6)


@functools.cache
def sample(name: str) -> Any:
    path = SAMPLES / name
    if not path.is_file():
        pytest.skip(f"captured Ray samples not found at {SAMPLES}")
    return json.loads(path.read_text())


@st.composite
def mutated(draw: st.DrawFn, value: Any, top: bool = False) -> Any:
    """VALUE (a captured answer) with any of its values, at any depth, replaced by arbitrary JSON (VALUE
    itself too, unless TOP: a row stays an object, as the readers hand the parsers only objects).
    Most subtrees are kept whole, so a large answer costs a few draws."""
    if not top:
        choice = draw(st.integers(0, 9))
        if choice == 0:
            return draw(json_values)
        if choice <= 5:
            return value
    if isinstance(value, dict):
        out = {key: draw(mutated(item)) for key, item in value.items() if draw(st.integers(0, 19))}
        if draw(st.booleans()):
            out[draw(st.text(max_size=8))] = draw(json_values)
        return out
    if isinstance(value, list):
        return [draw(mutated(item)) for item in value[:3]]
    return value


def rows(doc: Any) -> list[Any]:
    return list(doc["data"]["result"]["result"])


def summary_rows() -> list[Any]:
    return list(sample("nodes_summary_fakeamd.json")["data"]["summary"])


def a_row_of(rows_of: Callable[[], list[Any]]) -> st.SearchStrategy[Any]:
    """A captured row, mutated; or any JSON object at all."""
    return st.sampled_from(rows_of()).flatmap(lambda row: mutated(row, top=True)) | json_objects


def metric_ok(value: object) -> bool:
    return value is NA or (isinstance(value, float) and math.isfinite(value) and value >= 0)


def time_ok(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isfinite(value))


def check_node(node: NodeSnapshot) -> None:
    assert isinstance(node, NodeSnapshot)
    for field in ("node_id", "ip", "hostname", "state", "state_message", "python"):
        assert isinstance(getattr(node, field), str)
    for field in ("cpu_percent", "mem_used_bytes", "mem_total_bytes"):
        assert metric_ok(getattr(node, field))
    assert metric_ok(node.object_store_used_bytes) and metric_ok(node.object_store_total_bytes)
    assert time_ok(node.start_time) and time_ok(node.end_time) and time_ok(node.sample_time)
    assert all(math.isfinite(v) for v in node.resources_total.values())
    for gpu in node.gpus:
        check_gpu(gpu)


def check_gpu(gpu: GpuSample) -> None:
    assert isinstance(gpu, GpuSample) and isinstance(gpu.index, int)
    for field in ("utilization", "memory_used_mib", "memory_total_mib", "power_w", "temperature_c"):
        assert metric_ok(getattr(gpu, field))
    for process in gpu.processes:
        assert isinstance(process.pid, int) and metric_ok(process.memory_mib)


# -- known failures -----------------------------------------------------------------------------------


def test_a_whitespace_death_message_reads_as_no_reason() -> None:
    row = {"actor_id": "a", "death_cause": {"actor_died_error_context": {"error_message": " \n\t "}}}
    assert parse.actor_row(row).death_cause == ""


def test_a_constructor_that_raised_reads_as_its_exception_never_as_the_pickle() -> None:
    """Ray 2.60's shape when `__init__` raised (captured from the test job in tests/harness/jobs.py)."""
    traceback = (
        'Traceback (most recent call last):\n\n  File "doomed.py", line 16, in __init__\n'
        '    raise ValueError("rollout engine failed to start: CUDA out of memory (test)")\n'
        "ValueError: rollout engine failed to start: CUDA out of memory (test)\n"
    )
    death = {
        "creation_task_failure_context": {
            "serialized_exception": "gAWVugcAAAAAAACMDnJheS5leGNlcHRpb25z",
            "formatted_exception_string": traceback,
            "language": "PYTHON",
        }
    }
    cause = parse.actor_row({"actor_id": "a", "death_cause": death}).death_cause
    assert cause == "ValueError: rollout engine failed to start: CUDA out of memory (test)"
    assert parse.actor_row({"actor_id": "a", "death_cause": {"weird": {"x": 1}}}).death_cause == ""


@pytest.mark.parametrize("raw", ["Infinity", "-Infinity", "NaN", "1e400", str(10**400)])
def test_infinite_and_huge_numbers_read_as_na(raw: str) -> None:
    value = json.loads(raw)
    assert parse.as_int(value, 7) in (7, value)
    assert parse.as_metric(value) is NA or parse.as_metric(value) == float(value)
    assert parse.ms_to_seconds(value) is None
    entry = {
        "now": value,
        "cpu": value,
        "mem": [value, value, value, value],
        "raylet": {"startTimeMs": value},
    }
    check_node(parse.node_from_summary(entry))
    assert parse.gpu_sample({"index": value, "utilizationGpu": value, "powerMw": value}).utilization is NA


@pytest.mark.parametrize(
    "entry",
    [
        {"raylet": ["not", "a", "dict"]},
        {"raylet": "x", "mem": {"0": 1}, "gpus": 3, "cmdline": 5},
        {"gpus": [{"processesPids": 7}], "mem": 12},
        {"gpus": [{"processesPids": "pids"}], "now": True},
    ],
)
def test_wrong_types_read_as_na(entry: dict[str, Any]) -> None:
    check_node(parse.node_from_summary(entry))


# -- every public parse function ----------------------------------------------------------------------


@EXAMPLES
@given(json_values)
def test_scalar_readers_take_any_json(value: Any) -> None:
    number = parse.as_int(value, 3)
    assert isinstance(number, int)
    optional = parse.as_opt_int(value)
    assert optional is None or (isinstance(optional, int) and optional >= 0)
    assert metric_ok(parse.as_metric(value))
    assert isinstance(parse.as_str(value), str)
    assert time_ok(parse.ms_to_seconds(value))
    assert all(isinstance(k, str) and math.isfinite(v) for k, v in parse.resources(value).items())
    assert isinstance(parse.worker_python(value if isinstance(value, list) else ()), str)


@EXAMPLES
@given(a_row_of(summary_rows))
def test_node_summaries(entry: Any) -> None:
    check_node(parse.node_from_summary(entry))
    for gpu in entry.get("gpus") or () if isinstance(entry.get("gpus"), list) else ():
        if isinstance(gpu, Mapping):
            check_gpu(parse.gpu_sample(gpu))


@EXAMPLES
@given(a_row_of(lambda: rows(sample("v0_nodes.json"))), a_row_of(summary_rows))
def test_state_nodes_and_their_merge(row: Any, entry: Any) -> None:
    table = parse.node_from_state(row)
    check_node(table)
    raylet = entry.get("raylet") if isinstance(entry.get("raylet"), dict) else {}
    same = parse.node_from_summary({**entry, "raylet": {**raylet, "nodeId": table.node_id}})
    for node in parse.merge_nodes([table], [same, parse.node_from_summary(entry)]):
        check_node(node)


@EXAMPLES
@given(a_row_of(lambda: rows(sample("v0_actors.json"))))
def test_actor_rows(row: Any) -> None:
    actor = parse.actor_row(row)
    assert isinstance(actor, ActorRow) and isinstance(actor.death_cause, str)
    assert actor.pid is None or actor.pid > 0
    assert all(math.isfinite(v) for v in actor.required_resources.values())


@EXAMPLES
@given(a_row_of(lambda: rows(sample("v0_tasks.json"))), a_row_of(lambda: rows(sample("v0_workers.json"))))
def test_task_and_worker_rows(task: Any, worker: Any) -> None:
    assert isinstance(parse.task_row(task), TaskRow)
    assert isinstance(parse.worker_row(worker), WorkerRow)


@EXAMPLES
@given(a_row_of(lambda: list(sample("jobs_list.json"))))
def test_job_rows(row: Any) -> None:
    job = parse.job_row(row)
    assert isinstance(job, JobRow) and time_ok(job.start_time) and time_ok(job.end_time)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in job.metadata.items())


@EXAMPLES
@given(
    st.sampled_from([sample("version.json")]).flatmap(lambda doc: mutated(doc, top=True)) | json_objects,
    json_values | st.sampled_from([sample("cluster_meta.json")["data"]]).flatmap(mutated),
)
def test_cluster_info_and_list_meta(version: Any, metadata: Any) -> None:
    assert isinstance(parse.cluster_info(version, metadata), ClusterInfo)
    meta = parse.list_meta(version, 3)
    assert isinstance(meta, ListMeta) and isinstance(meta.describe(), str)


# -- the client's answer readers ----------------------------------------------------------------------

STATE_ANSWERS = {
    "v0_nodes.json": parse.node_from_state,
    "v0_actors.json": parse.actor_row,
    "v0_tasks.json": parse.task_row,
    "v0_workers.json": parse.worker_row,
}


def answer(name: str) -> st.SearchStrategy[Any]:
    """A captured answer, mutated; or any JSON at all."""
    return st.sampled_from([sample(name)]).flatmap(mutated) | json_values


def gives_or_refuses(read: Callable[[], object]) -> object | None:
    """What READ gives, or None when it refused the answer with a `CockpitError` (one line)."""
    try:
        return read()
    except CockpitError as exc:
        assert str(exc) and "\n" not in str(exc)
        return None


@EXAMPLES
@given(st.sampled_from(sorted(STATE_ANSWERS)).flatmap(lambda name: st.tuples(st.just(name), answer(name))))
def test_state_listings(named: tuple[str, Any]) -> None:
    name, doc = named
    listing = gives_or_refuses(lambda: ray_api.state_listing(doc, "/api/v0/x", STATE_ANSWERS[name]))
    if listing is not None:
        assert isinstance(listing, Listing) and isinstance(listing.meta.describe(), str)
        assert all(isinstance(w, str) for w in listing.warnings)


@EXAMPLES
@given(answer("nodes_summary_fakeamd.json"))
def test_node_summary_answers(doc: Any) -> None:
    nodes = gives_or_refuses(lambda: ray_api.node_summaries(doc))
    for node in nodes or ():  # type: ignore[attr-defined]
        check_node(node)


@st.composite
def spelled(draw: st.DrawFn, doc: Any) -> bytes:
    """DOC as a dashboard could send it: compact or indented, any key order kept, maybe with space
    around; now and then cut short, or followed by something that is not JSON."""
    text = json.dumps(doc, indent=draw(st.sampled_from([None, 1, 2])), ensure_ascii=draw(st.booleans()))
    text = draw(st.sampled_from(["", " ", "\n\t"])) + text + draw(st.sampled_from(["", "\n", " \r\n"]))
    spoil = draw(st.integers(0, 9))
    if spoil == 0:
        text = text[: draw(st.integers(0, max(0, len(text) - 1)))]
    elif spoil == 1:
        text += draw(st.sampled_from(["x", "{}", ",", "]"]))
    return text.encode("utf-8", "surrogatepass")


def read_both(body: bytes, whole: Callable[[Any], Any], streamed: Any) -> tuple[Any, Any]:
    """What the answer reader gives for BODY decoded whole and read item by item: a value, or the error
    message it refused BODY with."""
    out = []
    for then in (whole, streamed):
        try:
            out.append(transport._read_json(body, "/p", then))
        except CockpitError as exc:
            out.append(f"refused: {exc}")
    return out[0], out[1]


@EXAMPLES
@given(st.data())
def test_an_answer_read_item_by_item_is_the_answer_read_whole(data: st.DataObject) -> None:
    """The node summary and the state lists, read one item of their bulk at a time (as the client reads
    them), give what decoding the whole answer first gives: the same snapshots, or the same refusal."""
    doc = data.draw(answer("nodes_summary_fakeamd.json"))
    body = data.draw(spelled(doc))
    whole, streamed = read_both(body, ray_api.node_summaries, ray_api.node_summaries_streamed)
    assert whole == streamed
    name = data.draw(st.sampled_from(sorted(STATE_ANSWERS)))
    doc = data.draw(answer(name))
    body = data.draw(spelled(doc))
    build = STATE_ANSWERS[name]
    whole, streamed = read_both(
        body,
        functools.partial(ray_api.state_listing, path="/p", build=build),
        ray_api.state_listing_streamed("/p", build),
    )
    assert whole == streamed


@pytest.mark.parametrize(
    "body",
    [b"", b" ", b"{", b'{"data": {"summary": [', b'{"data": {"summary": [1,]}}',
     b'{"data": {"summary": []}} x', b"\xff\xfe\x00", b'{"result": true, "data": {"summary": [{}, 2, null]}}',
     b'{"data": {"summary": {}}}', b'{"data": {"summary": [], "summary": [{"raylet": {}}]}, "result": true}',
     b"[]", b"NaN", b'{"data": {"summary": [{"cpu": ' + b"1" * 5000 + b"}]}}",
     b'{"x": ' + b"1" * 5000 + b', "data": {"summary": []}}',
     b'{"data": {"summary": [' + b"[" * 100_000 + b"]}}"],
)  # fmt: skip
def test_odd_bodies_read_item_by_item_as_read_whole(body: bytes) -> None:
    whole, streamed = read_both(body, ray_api.node_summaries, ray_api.node_summaries_streamed)
    assert whole == streamed


@EXAMPLES
@given(answer("logs_list_head.json"), answer("cluster_status.json"), answer("cluster_meta.json"))
def test_log_index_status_and_metadata_answers(logs: Any, status: Any, meta: Any) -> None:
    index = gives_or_refuses(lambda: ray_api.log_index_of(logs, "node"))
    assert index is None or isinstance(index, LogIndex)
    gives_or_refuses(lambda: ray_api.cluster_status_of(status))
    gives_or_refuses(lambda: ray_api.envelope_data(meta, "/api/v0/cluster_metadata"))


@EXAMPLES
@given(answer("jobs_list.json"), answer("version.json"), answer("auth_mode.json"), json_values)
def test_job_version_and_auth_answers(jobs: Any, version: Any, auth: Any, doc: Any) -> None:
    listed = ray_api.jobs_of(jobs)
    assert all(isinstance(job, JobRow) for job in listed)
    one = gives_or_refuses(lambda: ray_api.job_of(doc, "raysubmit_1"))
    assert one is None or isinstance(one, JobRow)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in ray_api.version_of(version).items())
    assert isinstance(ray_api.auth_mode_of(auth), str)
    assert isinstance(ray_api.submission_id_of(doc), str)
    assert isinstance(ray_api.answer_flag(doc, "stopped"), bool)


@EXAMPLES
@given(st.integers(400, 599), json_values, hostile_text)
def test_error_answers_are_one_line(status: int, doc: Any, text: str) -> None:
    for body in (json.dumps(doc).encode(), text.encode("utf-8", errors="surrogatepass")):
        error = dashboard_errors.http_error(status, "/api/jobs/x", body)
        assert isinstance(error, CockpitError) and "\n" not in str(error)


def test_a_bare_500_points_at_the_head_s_logs() -> None:
    """Ray 2.47 answers a state request it failed on with aiohttp's bare 500 (seen on a real 2.47.1 head:
    a filter on a column it does not know, a log read right after a closed stream)."""
    error = dashboard_errors.http_error(
        500, "/api/v0/actors", b"500 Internal Server Error\n\nServer got itself in trouble"
    )
    assert isinstance(error, dashboard_errors.RequestRejected) and error.status == 500
    assert str(error) == (
        "the dashboard failed on /api/v0/actors and gave no reason (HTTP 500); the head's dashboard logs "
        "(dashboard*.log in its session's logs) say why."
    )


def test_the_cockpit_s_own_probe_jobs_are_not_listed() -> None:
    """The debugpy probe's job, deleted when done, can come back FAILED while Ray's supervisor ends: it is
    no job of the user's (no row, no "job failed" alert)."""
    jobs = sample("jobs_list.json")
    probe = {**jobs[0], "submission_id": f"{ray_api.PROBE_PREFIX}1a2b3c4d", "status": "FAILED"}
    listed = ray_api.jobs_of([*jobs, probe])
    assert [j.submission_id for j in listed] == [j.submission_id for j in ray_api.jobs_of(jobs)]
    assert len(listed) == len(jobs) and not any(ray_api.PROBE_PREFIX in j.submission_id for j in listed)
