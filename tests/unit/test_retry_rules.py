"""The one retry rule: `is_permanent` on an error of every class, and `cockpit wait`'s loop (the core's
`wait_for_shape`) giving up on the permanent ones at once and riding out the transient ones.

The TUI's cluster feed is driven into the same errors in `tests/ui/test_retry_rules.py`; the real head
with a wrong token and a dashboard that does not answer are in `tests/integration/test_token_auth.py`
and `tests/integration/test_cli.py`.
"""

from __future__ import annotations

import asyncio
import importlib
import pkgutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import pytest

import cockpit.core
from cockpit.core.cluster.errors import RequestRejected
from cockpit.core.connect.connection import ConnectOptions
from cockpit.core.connect.wait import WaitRound, wait_for_shape
from cockpit.core.errors import CockpitError, is_permanent
from cockpit.core.slurm import queue as slurm
from cockpit.core.snapshots import NodeSnapshot
from cockpit.core.targets import parse_target
from tests.harness.retry_cases import CASES, Case


@pytest.mark.parametrize("case", CASES, ids=str)
def test_each_error_is_permanent_or_transient_by_the_one_rule(case: Case) -> None:
    assert is_permanent(case.make()) is case.permanent


def _subclasses(cls: type) -> set[type]:
    found = set()
    for sub in cls.__subclasses__():
        found |= {sub, *_subclasses(sub)}
    return found


def test_every_error_class_of_the_core_has_a_case() -> None:
    """A new error class gets a case above, so someone decides whether it is retried."""
    for module in pkgutil.walk_packages(cockpit.core.__path__, "cockpit.core."):
        if module.name.endswith(("gpu.nvml", "gpu.amd", "gpu.agent")):
            continue  # vendor libraries (optional), and the agent's program
        importlib.import_module(module.name)
    classes = {c for c in _subclasses(CockpitError) if c.__module__.startswith("cockpit.")}
    covered = {type(case.make()) for case in CASES}
    missing = {f"{c.__module__}.{c.__qualname__}" for c in classes - covered}
    assert not missing


def test_a_5xx_is_transient_and_a_4xx_permanent_whoever_raises_it() -> None:
    assert not is_permanent(RequestRejected("restarting", status=503))
    assert is_permanent(RequestRejected("bad", status=400))
    assert is_permanent(RequestRejected("unreadable"))


# -- cockpit wait's loop, driven into each error ----------------------------------------------------------


def node(i: int) -> NodeSnapshot:
    return NodeSnapshot(
        node_id=f"{i:02x}" * 28,
        ip=f"10.0.0.{i}",
        hostname=f"gpu{i}",
        is_head=i == 0,
        state="ALIVE",
        state_message="",
        start_time=1.0,
        end_time=None,
        logical_cpus=8,
        logical_gpus=2,
    )


@dataclass
class _Client:
    without_dashboard = None

    async def nodes(self, fresh: bool = False) -> tuple[NodeSnapshot, ...]:
        return (node(0), node(1))


@dataclass
class _Connection:
    client: _Client
    slurm: None = None
    link: None = None
    head: None = None


class FailingHead:
    """Opens a connection that fails with ERROR the first FAILURES times, then answers with 2 nodes."""

    def __init__(self, error: BaseException, failures: int = 2) -> None:
        self.error = error
        self.failures = failures
        self.opened = 0

    @asynccontextmanager
    async def __call__(self, target: object, options: object) -> AsyncIterator[_Connection]:
        self.opened += 1
        if self.opened <= self.failures:
            raise self.error
        yield _Connection(_Client())


def wait_through(case: Case) -> tuple[str, list[WaitRound], int]:
    """`wait_for_shape` against a head that fails twice with CASE's error: "gave up" (raised at once) or
    "retried" (and then ready); the rounds it reported; how often it opened a connection."""
    error = case.make()
    head = FailingHead(error)
    rounds: list[WaitRound] = []

    async def run() -> str:
        target = parse_target("http://127.0.0.1:9")
        try:
            outcome = await wait_for_shape(
                target,
                ConnectOptions(),
                2,
                None,
                timeout=600,
                interval=0.01,
                on_round=rounds.append,
                opener=head,  # type: ignore[arg-type]
            )
        except BaseException as exc:
            assert exc is error
            return "gave up"
        assert outcome.ready
        return "retried"

    return asyncio.run(run()), rounds, head.opened


@pytest.mark.parametrize("case", CASES, ids=str)
def test_wait_gives_up_on_permanent_errors_and_retries_the_rest(
    case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(slurm, "PENDING_POLL_SECONDS", 0.02)  # Slurm's own pace, shortened
    verdict, rounds, opened = wait_through(case)
    if case.permanent:
        assert (verdict, rounds, opened) == ("gave up", [], 1)
    else:
        assert verdict == "retried" and opened == 3
        assert [r.problem for r in rounds] == [str(case.make())] * 2 + [""]
        assert rounds[-1].line == "2/2 nodes, 4 GPUs — ready"
