"""Provides a watch on files opened by the event loop's thread (the main thread in these tests): what
must happen in worker threads (known_hosts on a slow home directory, /proc scans) is checked with it."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_WATCHED: list[tuple[str, list[str]]] = []


def _hook(event: str, args: tuple[object, ...]) -> None:
    if event != "open" or not _WATCHED or threading.current_thread() is not threading.main_thread():
        return
    path = os.fsdecode(args[0]) if isinstance(args[0], (str, bytes)) else ""
    for prefix, seen in _WATCHED:
        if path.startswith(prefix):
            seen.append(path)


sys.addaudithook(_hook)  # for good (audit hooks cannot be removed); idle while nothing is watched


@contextmanager
def opened_on_main_thread(*prefixes: str) -> Iterator[list[str]]:
    """The paths starting with one of `prefixes` that the main thread opens inside the block."""
    seen: list[str] = []
    entries = [(prefix, seen) for prefix in prefixes]
    _WATCHED.extend(entries)
    try:
        yield seen
    finally:
        for entry in entries:
            _WATCHED.remove(entry)
