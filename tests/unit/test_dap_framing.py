"""The DAP client's framing and reader, fed byte by byte through a real asyncio.StreamReader: split headers,
several messages in one read, unknown headers, and a hostile peer (oversized length, garbage, EOF), which
must end the session with a reason and never leak an exception from the reader task.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cockpit.core.debug.dap import DapClient
from cockpit.core.debug.dap_messages import (
    BAD_MESSAGE,
    MAX_HEADER_BYTES,
    MAX_MESSAGE_BYTES,
    MessageFramer,
    encode,
    exception_type_name,
    one_line,
)
from cockpit.core.debug.errors import DapClosed, DapError
from tests.harness.loop_errors import fail_on_loop_errors
from tests.harness.properties import examples

no_loop_errors = pytest.fixture(autouse=True)(fail_on_loop_errors)


class SentBytes:
    """The writer side: what the client sent, as messages (drain-less, like a minimal stream)."""

    def __init__(self) -> None:
        self.framer = MessageFramer()
        self.sent: list[dict[str, Any]] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.sent.extend(self.framer.feed(data))

    def close(self) -> None:
        self.closed = True


@pytest.fixture
async def wire() -> AsyncIterator[tuple[DapClient, asyncio.StreamReader, SentBytes]]:
    reader = asyncio.StreamReader()
    writer = SentBytes()
    client = DapClient(reader, writer, "worker 192.0.2.2:46045")
    try:
        yield client, reader, writer
    finally:
        await client.close()


def response(request_seq: int, body: dict[str, Any] | None = None, **fields: Any) -> bytes:
    message = {"seq": 100 + request_seq, "type": "response", "request_seq": request_seq, "success": True}
    message.update(command="x", body=body or {}, **fields)
    return encode(message)


def event(name: str, body: dict[str, Any]) -> bytes:
    return encode({"seq": 1, "type": "event", "event": name, "body": body})


async def sent(writer: SentBytes, count: int) -> None:
    for _ in range(100):
        if len(writer.sent) >= count:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"the client sent {len(writer.sent)} messages, not {count}")


async def test_a_response_split_byte_by_byte_answers_its_request(
    wire: tuple[DapClient, asyncio.StreamReader, SentBytes],
) -> None:
    client, reader, writer = wire
    pending = asyncio.ensure_future(client.request("threads", timeout=5))
    await sent(writer, 1)
    assert writer.sent[0] == {"seq": 1, "type": "request", "command": "threads"}
    data = b"X-Unknown: yes\r\n" + response(1, {"threads": [{"id": 1, "name": "Main \u2603"}]})
    for byte in data:
        reader.feed_data(bytes([byte]))
        await asyncio.sleep(0)
    assert await asyncio.wait_for(pending, 5) == {"threads": [{"id": 1, "name": "Main \u2603"}]}


async def test_two_messages_in_one_read(wire: tuple[DapClient, asyncio.StreamReader, SentBytes]) -> None:
    client, reader, writer = wire
    seen: list[str] = []
    client.on_event = lambda name, _body: seen.append(name)
    pending = asyncio.ensure_future(client.request("continue", {"threadId": 1}, timeout=5))
    await sent(writer, 1)
    reader.feed_data(
        event(
            "stopped",
            {
                "threadId": 1,
                "reason": "exception",
                "text": "E       (note: full exception trace is shown but execution is paused at: f)",
            },
        )
        + response(1)
        + event("continued", {"threadId": 1})
    )
    assert await asyncio.wait_for(pending, 5) == {}
    assert (await client.wait_event("stopped", 5))["threadId"] == 1
    assert seen == ["stopped", "continued"]
    assert client.stopped is None  # continued after the stop


async def test_stopped_event_sets_stopped_and_wait_event_keeps_early_events(
    wire: tuple[DapClient, asyncio.StreamReader, SentBytes],
) -> None:
    client, reader, _writer = wire
    reader.feed_data(
        event("stopped", {"threadId": 3, "reason": "exception", "description": "boom", "text": "E"})
    )
    body = await client.wait_event("stopped", 5)  # arrived before anyone waited: kept
    assert body["threadId"] == 3
    assert client.stopped is not None and (client.stopped.thread_id, client.stopped.description) == (
        3,
        "boom",
    )
    with pytest.raises(DapError) as error:
        await client.wait_event("stopped", 0.05)  # consumed once
    assert str(error.value) == "no 'stopped' event from worker 192.0.2.2:46045 within 0.05 s."
    assert not client.closed


async def test_a_failed_response_is_a_one_line_error_and_the_session_goes_on(
    wire: tuple[DapClient, asyncio.StreamReader, SentBytes],
) -> None:
    client, reader, writer = wire
    pending = asyncio.ensure_future(client.request("evaluate", {"expression": "y"}, timeout=5))
    await sent(writer, 1)
    reader.feed_data(
        encode(
            {
                "seq": 9,
                "type": "response",
                "request_seq": 1,
                "success": False,
                "command": "evaluate",
                "message": 'Traceback (most recent call last):\n  File "<string>", line 1\n'
                "NameError: name 'y' is not defined\n",
            }
        )
    )
    with pytest.raises(DapError) as error:
        await asyncio.wait_for(pending, 5)
    assert str(error.value) == "NameError: name 'y' is not defined"
    assert not isinstance(error.value, DapClosed) and not client.closed


async def test_no_answer_is_a_timeout_not_the_end(
    wire: tuple[DapClient, asyncio.StreamReader, SentBytes],
) -> None:
    client, reader, writer = wire
    with pytest.raises(DapError) as error:
        await client.request("threads", timeout=0.05)
    assert str(error.value) == "worker 192.0.2.2:46045 did not answer 'threads' within 0.05 s."
    assert not isinstance(error.value, DapClosed) and not client.closed
    reader.feed_data(response(1))  # the late answer is dropped
    pending = asyncio.ensure_future(client.request("threads", timeout=5))
    await sent(writer, 2)
    reader.feed_data(response(2, {"threads": []}))
    assert await asyncio.wait_for(pending, 5) == {"threads": []}


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"Content-Length: %d\r\n\r\n" % (MAX_MESSAGE_BYTES + 1), "64 MiB limit"),
        (b"Content-Length: 5\r\n\r\n{nope", BAD_MESSAGE),
        (b"Content-Length: 4\r\n\r\n\xff\xfe{}", BAD_MESSAGE),
        (b"Content-Length: 7\r\n\r\n[1, 2]\n", BAD_MESSAGE),
        (b"Content-Length: 2\r\n\r\n{}", BAD_MESSAGE),  # no "type"
        (b"Content-Length: 9" + b"9" * 40 + b"\r\n\r\n", "64 MiB limit"),
        (b"Content-Length: -1\r\n\r\n", "not a number"),
        (b"Content-Type: x\r\n\r\n{}", "no Content-Length"),
        (b"X" * (MAX_HEADER_BYTES + 1), "header block over"),
        (b"", "closed the connection"),
    ],
    ids=[
        "oversized",
        "garbage-json",
        "bad-utf8",
        "not-an-object",
        "no-type",
        "huge-number",
        "negative",
        "no-length",
        "endless-header",
        "eof",
    ],
)
async def test_a_broken_peer_ends_the_session_with_a_reason(
    wire: tuple[DapClient, asyncio.StreamReader, SentBytes], data: bytes, reason: str
) -> None:
    client, reader, writer = wire
    pending = asyncio.ensure_future(client.request("stackTrace", {"threadId": 1}, timeout=5))
    waiting = asyncio.ensure_future(client.wait_event("stopped", 5))
    await sent(writer, 1)
    if data:
        reader.feed_data(data)
    else:
        reader.feed_eof()
    with pytest.raises(DapClosed) as error:
        await asyncio.wait_for(pending, 5)
    assert reason in str(error.value)
    assert str(error.value).startswith("the debug session with worker 192.0.2.2:46045 ended: ")
    assert "\n" not in str(error.value)
    with pytest.raises(DapClosed):
        await asyncio.wait_for(waiting, 5)
    assert client.closed and client.close_reason is not None and reason in client.close_reason
    assert writer.closed
    with pytest.raises(DapClosed):
        await client.request("threads", timeout=5)


class ConnectionLost(Exception):
    """Like asyncssh's: a stream error that is not an OSError."""


@pytest.mark.parametrize(
    "failure", [ConnectionResetError(104, "Connection reset by peer"), ConnectionLost("lost")]
)
async def test_a_failing_stream_ends_the_session_not_the_reader(
    wire: tuple[DapClient, asyncio.StreamReader, SentBytes], failure: Exception
) -> None:
    client, reader, writer = wire
    pending = asyncio.ensure_future(client.request("threads", timeout=5))
    await sent(writer, 1)
    reader.set_exception(failure)
    with pytest.raises(DapClosed) as error:
        await asyncio.wait_for(pending, 5)
    assert str(error.value).startswith(
        "the debug session with worker 192.0.2.2:46045 ended: the connection failed ("
    )
    assert type(failure).__name__ in str(error.value)


async def test_close_is_idempotent_and_fails_what_waits(
    wire: tuple[DapClient, asyncio.StreamReader, SentBytes],
) -> None:
    client, _reader, writer = wire
    pending = asyncio.ensure_future(client.request("threads", timeout=5))
    await sent(writer, 1)
    await client.close()
    await client.close()
    with pytest.raises(DapClosed, match="ended: it was closed"):
        await asyncio.wait_for(pending, 5)
    assert client.close_reason == "it was closed"


async def test_a_broken_event_handler_is_reported_and_the_session_goes_on(
    wire: tuple[DapClient, asyncio.StreamReader, SentBytes], no_loop_errors: list[dict[str, Any]]
) -> None:
    client, reader, _writer = wire

    def handler(name: str, _body: dict[str, Any]) -> None:
        raise RuntimeError(name)

    client.on_event = handler
    reader.feed_data(event("output", {"output": "x"}))
    assert await client.wait_event("output", 5) == {"output": "x"}
    assert [c["message"] for c in no_loop_errors] == ["DapClient.on_event failed on 'output'"]
    no_loop_errors.clear()
    assert not client.closed


async def test_reverse_requests_are_refused(wire: tuple[DapClient, asyncio.StreamReader, SentBytes]) -> None:
    _client, reader, writer = wire
    reader.feed_data(encode({"seq": 5, "type": "request", "command": "runInTerminal", "arguments": {}}))
    await sent(writer, 1)
    assert writer.sent[0]["type"] == "response"
    assert (writer.sent[0]["request_seq"], writer.sent[0]["success"]) == (5, False)


def test_exception_type_name_and_one_line() -> None:
    assert (
        exception_type_name(
            "RuntimeError       (note: full exception trace is shown but execution is paused at: "
            "ray._raylet.execute_task)"
        )
        == "RuntimeError"
    )
    assert exception_type_name("my.Error (note: not debugpy's)") == "my.Error (note: not debugpy's)"
    assert one_line("Traceback ...\n  File x\nValueError: v\n\n") == "ValueError: v"
    assert one_line("") == ""


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
messages = st.lists(
    st.fixed_dictionaries(
        {"seq": st.integers(0, 2**31), "type": st.sampled_from(["event", "response", "request"])},
        optional={"body": st.dictionaries(st.text(max_size=8), json_values, max_size=4)},
    ),
    max_size=6,
)


@settings(max_examples=examples(200), deadline=None)
@given(messages, st.data())
def test_messages_split_anywhere_parse_to_the_same_messages(
    messages: list[dict[str, Any]], data: st.DataObject
) -> None:
    stream = b"".join(encode(m) for m in messages)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    framer = MessageFramer()
    parsed: list[dict[str, Any]] = []
    start = 0
    for cut in [*cuts, len(stream)]:
        parsed.extend(framer.feed(stream[start:cut]))
        start = cut
    assert parsed == [json.loads(json.dumps(m)) for m in messages]
