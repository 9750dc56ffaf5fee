"""Provides what travels on a Debug Adapter Protocol connection: the errors, the `Content-Length` framing
with its limits, and the frozen values the cockpit reads out of an adapter's answers.

The peer is not trusted (a debugger port is whatever listens there): a message over 64 MiB, a header
block over 8 KiB, a missing or non-numeric length or a body that is not a JSON object raises DapError,
and values of the wrong type read as "" or 0 instead of raising. Strings from the debuggee are kept as
they are; the UI escapes them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from cockpit.core.debug.errors import DapError

Json = dict[str, Any]

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""A Content-Length above this is a hostile or broken peer, not a big variable."""
MAX_HEADER_BYTES = 8 * 1024
BAD_MESSAGE = "bad message from adapter"
_HEADER_END = b"\r\n\r\n"
_PAUSED_NOTE = re.compile(
    r"\s*\(note: full exception trace is shown but execution is paused at: .*\)\s*\Z", re.S
)


@dataclass(frozen=True)
class Stopped:
    """Where and why the debuggee stopped (`text` without debugpy's "(note: ... paused at ...)")."""

    thread_id: int
    reason: str
    description: str
    text: str


@dataclass(frozen=True)
class ExceptionDetails:
    type_name: str
    message: str
    stack_trace: str


@dataclass(frozen=True)
class Frame:
    """One stack frame; `source_reference` > 0 means `DapClient.source` can fetch the file's text."""

    id: int
    name: str
    path: str
    line: int
    source_reference: int


@dataclass(frozen=True)
class Scope:
    name: str
    variables_reference: int
    expensive: bool


@dataclass(frozen=True)
class Variable:
    """A value as the debuggee renders it; `variables_reference` > 0 means it expands (`variables`)."""

    name: str
    value: str
    type: str
    variables_reference: int
    evaluate_name: str = ""
    """An expression giving this value in its frame (debugpy's `evaluateName`), "" when none."""


class MessageFramer:
    """Cuts `Content-Length: N\\r\\n\\r\\n<N bytes of UTF-8 JSON>` messages out of a byte stream.

    `feed` returns the messages completed so far; it raises DapError when the peer breaks the framing,
    after which the stream cannot be trusted.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._body_length: int | None = None

    def feed(self, data: bytes) -> list[Json]:
        self._buffer += data
        messages: list[Json] = []
        while True:
            if self._body_length is None:
                end = self._buffer.find(_HEADER_END)
                if end > MAX_HEADER_BYTES or (end < 0 and len(self._buffer) > MAX_HEADER_BYTES):
                    raise DapError(f"{BAD_MESSAGE} (a header block over {MAX_HEADER_BYTES} bytes)")
                if end < 0:
                    return messages
                self._body_length = content_length(bytes(self._buffer[:end]))
                del self._buffer[: end + len(_HEADER_END)]
            if len(self._buffer) < self._body_length:
                return messages
            body = bytes(self._buffer[: self._body_length])
            del self._buffer[: self._body_length]
            self._body_length = None
            messages.append(decode(body))


def content_length(header: bytes) -> int:
    """The body length a header block announces (other headers are allowed and ignored)."""
    length: int | None = None
    for line in header.split(b"\r\n"):
        name, sep, value = line.partition(b":")
        if sep and name.strip().lower() == b"content-length":
            text = value.strip()
            if not text.isdigit():
                raise DapError(f"{BAD_MESSAGE} (a Content-Length that is not a number)")
            length = int(text) if len(text) <= 12 else MAX_MESSAGE_BYTES + 1
    if length is None:
        raise DapError(f"{BAD_MESSAGE} (no Content-Length)")
    if length > MAX_MESSAGE_BYTES:
        raise DapError(f"the adapter announced a message over the {MAX_MESSAGE_BYTES >> 20} MiB limit")
    return length


def decode(body: bytes) -> Json:
    try:
        message = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise DapError(BAD_MESSAGE) from None
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise DapError(BAD_MESSAGE)
    return message


def encode(message: Json) -> bytes:
    """One framed message; ASCII JSON, so even a lone surrogate typed by the user encodes."""
    body = json.dumps(message).encode("ascii")
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def text_of(value: object) -> str:
    return value if isinstance(value, str) else ""


def number_of(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def object_of(value: object) -> Json:
    return value if isinstance(value, dict) else {}


def objects_in(body: Json, key: str, command: str) -> list[Json]:
    """The list `body[key]` of an answer to `command`, keeping only its objects."""
    items = body.get(key)
    if not isinstance(items, list):
        raise DapError(f"the adapter's answer to {command} has no {key}.")
    return [item for item in items if isinstance(item, dict)]


def exception_type_name(text: str) -> str:
    """`ValueError       (note: full exception trace is shown but execution is paused at: f)`
    -> `ValueError`."""
    return _PAUSED_NOTE.sub("", text).strip()


def one_line(text: str) -> str:
    """An adapter's error text as one line: a traceback's last line (`NameError: name 'x' is not defined`)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def stopped_from(body: Json) -> Stopped:
    return Stopped(
        thread_id=number_of(body.get("threadId")),
        reason=text_of(body.get("reason")),
        description=text_of(body.get("description")),
        text=exception_type_name(text_of(body.get("text"))),
    )


def exception_from(body: Json) -> ExceptionDetails:
    details = object_of(body.get("details"))
    return ExceptionDetails(
        type_name=exception_type_name(text_of(details.get("typeName")) or text_of(body.get("exceptionId"))),
        message=text_of(details.get("message")) or text_of(body.get("description")),
        stack_trace=text_of(details.get("stackTrace")),
    )


def frame_from(frame: Json) -> Frame:
    source = object_of(frame.get("source"))
    return Frame(
        id=number_of(frame.get("id")),
        name=text_of(frame.get("name")),
        path=text_of(source.get("path")),
        line=number_of(frame.get("line")),
        source_reference=number_of(source.get("sourceReference")),
    )


def scope_from(scope: Json) -> Scope:
    return Scope(
        name=text_of(scope.get("name")),
        variables_reference=number_of(scope.get("variablesReference")),
        expensive=scope.get("expensive") is True,
    )


def variable_from(name: str, value: Json, value_key: str) -> Variable:
    """A `variables` item (`value_key` "value") or an `evaluate` answer ("result") as a Variable."""
    return Variable(
        name=name,
        value=text_of(value.get(value_key)),
        type=text_of(value.get("type")),
        variables_reference=number_of(value.get("variablesReference")),
        evaluate_name=text_of(value.get("evaluateName")),
    )
