"""`cockpit debug`'s numbering and `--attach` choice: stable from one run to the next, whatever a peek
learnt in between, so `--attach N` opens the worker that was listed as N."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cockpit.cli.debug import chosen, numbered
from cockpit.core.debug.paused import ExceptionSummary, PausedWorker
from cockpit.core.errors import CockpitError


def worker(
    worker_id: str, job: str = "03000000", task: str = "Rollout.generate", mode: str = "debugpy"
) -> PausedWorker:
    return PausedWorker(
        mode=mode,
        worker_id=worker_id,
        node_id="n",
        ip="10.0.0.1",
        pid=1,
        port=4000,
        job_id=job,
        task_name=task,
    )


def test_numbering_ignores_what_peeks_learnt() -> None:
    a, b, c = worker("bb11"), worker("aa22"), worker("cc33", task="Critic.update")
    legacy = worker("0000", mode="legacy")
    before = numbered([a, b, c, legacy])
    learnt = [replace(b, exception=ExceptionSummary("ValueError", "x", "f.py:1 in g")), a, legacy, c]
    assert [w.worker_id for w in numbered(learnt)] == [w.worker_id for w in before]
    assert before[-1].mode == "legacy"  # debugpy sessions first
    assert [w.worker_id for w in before[:3]] == ["cc33", "aa22", "bb11"]  # by job, task, then worker id


def test_attach_by_number_or_worker_id_prefix() -> None:
    listed = numbered([worker("aa22"), worker("bb11"), worker("bb19")])
    assert chosen(listed, "2").worker_id == "bb11"
    assert chosen(listed, "aa").worker_id == "aa22"
    assert chosen(listed, "BB19").worker_id == "bb19"
    with pytest.raises(CockpitError, match=r"1\.\.3"):
        chosen(listed, "4")
    with pytest.raises(CockpitError, match="2 paused worker ids"):
        chosen(listed, "bb1")
    with pytest.raises(CockpitError, match="no paused worker ids"):
        chosen(listed, "ffff0")
    with pytest.raises(CockpitError, match="no worker is paused"):
        chosen([], "1")
