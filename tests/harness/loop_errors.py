"""Provides a watch on what the event loop reports as unhandled (a task's exception never retrieved, a
callback that raised): each one is a bug, and a test using `fail_on_loop_errors` fails on it.

Such a report is logged from a finalizer at whatever moment the garbage collector picks; on Python
3.11.7 that can land inside `ast.parse` (pytest's assertion rewriting) and crash it with "AST
constructor recursion depth mismatch", far from its cause.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator
from typing import Any


async def fail_on_loop_errors() -> AsyncIterator[list[dict[str, Any]]]:
    """An async fixture body: records the loop's error reports, and fails the test if there were any."""
    loop = asyncio.get_running_loop()
    previous = loop.get_exception_handler()
    seen: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: seen.append(context))
    try:
        yield seen
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(previous)
    assert not seen, "the event loop reported: " + "; ".join(
        f"{c.get('message')} ({c.get('exception')!r})" for c in seen
    )
