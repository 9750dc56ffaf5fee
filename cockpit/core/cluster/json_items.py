"""Provides the reading of a large JSON answer one item of its bulk at a time.

`/nodes?view=summary` is 17 MB at 2,000 nodes and `/api/v0/actors` 7.5 MB at 10,000 rows. `json.loads`
of the whole answer makes all of its small objects at once (about 47 MiB for the node summary) while
the snapshots kept are built among them; pymalloc then keeps most of those arenas, pinned by the few
objects kept, and the process's memory creeps up with every refresh. `Streamed.read` walks the envelope
and decodes the list it names one item at a time (each by `json`'s own C decoder), handing each to the
item's reader at once: the peak is one item's objects, and the answer reads in half the time. Anything
`json.loads` would refuse, it refuses (`NotJson`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")


class NotJson(ValueError):
    """The body is not JSON (what `json.loads` would have refused)."""


class Built(list):  # type: ignore[type-arg]
    """The list at a `Streamed` reading's path, each item already read by its ITEM function."""


def _value(s: str, i: int) -> tuple[Any, int]:
    try:
        return _DECODER.raw_decode(s, i)
    except (ValueError, RecursionError):  # JSONDecodeError, an int past the digit limit, nesting too deep
        raise NotJson from None


def _space(s: str, i: int) -> int:
    match = _SPACE.match(s, i)
    assert match is not None
    return match.end()


def _next(s: str, i: int, close: str) -> tuple[int, bool]:
    """Past the separator after a container's member at s[i]: where the next member starts, and whether
    CLOSE ended the container instead (then the index after it)."""
    i = _space(s, i)
    if s.startswith(",", i):
        return _space(s, i + 1), False
    if s.startswith(close, i):
        return i + 1, True
    raise NotJson


def _walk(s: str, i: int, at: tuple[str, ...], item: Callable[[Any], Any]) -> tuple[Any, int]:
    """The JSON value at s[i], with the list at AT (keys below it) read one item at a time (a `Built`)."""
    opening = "{" if at else "["
    if not s.startswith(opening, i):
        return _value(s, i)
    i = _space(s, i + 1)
    if not at:
        out = Built()
        ended = s.startswith("]", i)
        i += 1 if ended else 0
        while not ended:
            value, i = _value(s, i)
            built = item(value)
            if built is not None:
                out.append(built)
            i, ended = _next(s, i, "]")
        return out, i
    doc: dict[str, Any] = {}
    ended = s.startswith("}", i)
    i += 1 if ended else 0
    while not ended:
        if not s.startswith('"', i):
            raise NotJson
        key, i = _value(s, i)
        i = _space(s, i)
        if not s.startswith(":", i):
            raise NotJson
        i = _space(s, i + 1)
        doc[key], i = _walk(s, i, at[1:], item) if key == at[0] else _value(s, i)
        i, ended = _next(s, i, "}")
    return doc, i


R = TypeVar("R")


@dataclass(frozen=True, eq=False)
class Streamed(Generic[R]):
    """How to read an answer whose bulk is one list at AT (`data.summary`: 17 MB at 2,000 nodes): each of
    its items decoded and read by ITEM (None: left out) one after the other, then FINISH given the document
    with that list as a `Built` of what ITEM made. `json.loads` of the whole answer first would make all
    of its objects at once (about 47 MiB of small ones for the node summary), which pymalloc keeps as
    arenas pinned by the few objects made meanwhile and kept; read an item at a time, the peak is one
    item's. Called with a decoded document, it reads that (FINISH alone)."""

    at: tuple[str, ...]
    item: Callable[[Any], Any]
    finish: Callable[[Any], R]

    def read(self, body: bytes) -> R:
        try:
            text = body.decode(json.detect_encoding(body), "surrogatepass")
        except UnicodeDecodeError:
            raise NotJson from None
        doc, end = _walk(text, _space(text, 0), self.at, self.item)
        if _space(text, end) != len(text):
            raise NotJson
        del text
        return self.finish(doc)

    def __call__(self, doc: Any) -> R:
        return self.finish(doc)
