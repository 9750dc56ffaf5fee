"""The TUI's cluster feed driven into an error of every class (the connection fails with it): it gives up
on the permanent ones (says "not retrying", asks about an unknown host key, says the Slurm job ended)
and retries the transient ones (says when, or that the Slurm job waits in the queue): the same verdicts
as `cockpit wait` in `tests/unit/test_retry_rules.py`, both from `cockpit.core.errors.is_permanent`.

The connection is replaced by one that fails (no head is needed to fail); the real head with a wrong
token is in `tests/integration/test_token_auth.py`, a dashboard that does not answer in
`tests/ui/test_cluster_screen.py`.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from cockpit.core.errors import CockpitError
from cockpit.core.targets import parse_target
from cockpit.ui import messages
from cockpit.ui.app import CockpitApp
from cockpit.ui.feeds import NOT_RETRYING
from cockpit.ui.feeds import cluster as cluster_feed
from tests.harness.retry_cases import CASES, Case
from tests.harness.run import until

ERRORS = [case for case in CASES if isinstance(case.make(), CockpitError)]
"""A bug is not the feed's to sort: the app's worker handler reports it (`ClusterFeed.crashed`)."""


@pytest.mark.parametrize("case", ERRORS, ids=str)
async def test_the_tui_gives_up_and_retries_as_wait_does(case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    error = case.make()
    opened = 0

    @asynccontextmanager
    async def failing(target: object, options: object) -> AsyncIterator[None]:
        nonlocal opened
        opened += 1
        raise error
        yield  # an async generator, as open_connection is

    monkeypatch.setattr(cluster_feed, "open_connection", failing)
    posted: list[object] = []
    app = CockpitApp(parse_target("http://127.0.0.1:9"))
    async with app.run_test(size=(120, 30), message_hook=posted.append) as pilot:
        connection = app.state.connection
        await until(pilot, lambda: connection.detail != "", timeout=30)
        detail, phase = connection.detail, connection.phase
        if case.name == "ssh-host-key-unknown":  # the user is asked; nothing is tried before the answer
            verdict = "gave up"
            assert any(isinstance(m, messages.HostKeyUnknown) for m in posted)
            assert detail == "unknown host key: waiting for your answer"
        elif case.name.startswith("slurm-") and phase in ("queued", "ended"):
            verdict = "retried" if phase == "queued" else "gave up"
            assert detail.endswith("(not retrying)") == (phase == "ended")
        elif detail.endswith(NOT_RETRYING):
            verdict = "gave up"
            assert detail == str(error) + NOT_RETRYING
        else:
            verdict = "retried"
            # The first retry comes after 1 s; a loaded machine may have tried again before this reads it.
            assert re.fullmatch(re.escape(f"{error} · retry ") + r"[1-9]\d* in [1-9]\d* s", detail), detail
        assert verdict == ("gave up" if case.permanent else "retried"), detail
        if verdict == "retried" and phase != "queued":
            await until(pilot, lambda: opened >= 2, timeout=30)  # and it does ask again
        await pilot.press("q")
