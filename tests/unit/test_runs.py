"""The runs overview's list of targets (each once, in order) and the recent-targets file (private,
bounded, never a password), with no cluster."""

from __future__ import annotations

import stat
from pathlib import Path

from cockpit.core.runs.overview import RunTarget, gather_targets
from cockpit.core.runs.recent import MAX_RECENT, recent, remember
from cockpit.core.slurm.queue import SlurmJob


def test_every_target_is_listed_once_local_first_then_slurm_config_recent() -> None:
    listed = gather_targets(
        True,
        [SlurmJob("41", state="RUNNING"), SlurmJob("42", state="PENDING")],
        ["head-node", "slurm:41"],
        ["gpu-login", "head-node", "local"],
    )
    assert listed == [
        RunTarget("local", "local"),
        RunTarget("slurm:41", "slurm"),
        RunTarget("slurm:42", "slurm"),
        RunTarget("head-node", "config"),
        RunTarget("gpu-login", "recent"),
    ]
    assert gather_targets(False, [], [], []) == []


def test_recent_targets_newest_first_private_bounded_and_never_a_password(tmp_path: Path) -> None:
    for name in ("a", "b", "a", "user@head:2222", "http://u:secret@10.0.0.1:8265", "local", "bad\x1b[31m"):
        remember(name, tmp_path)
    assert recent(tmp_path) == ["user@head:2222", "a", "b"]
    path = tmp_path / "recent-targets.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "secret" not in path.read_text()
    for n in range(MAX_RECENT + 5):
        remember(f"host-{n}", tmp_path)
    assert len(recent(tmp_path)) == MAX_RECENT and recent(tmp_path)[0] == f"host-{MAX_RECENT + 4}"


def test_an_unreadable_or_foreign_file_is_an_empty_list_and_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "recent-targets.json"
    path.write_text("{not json")
    assert recent(tmp_path) == []
    path.write_text('[{"target": 5}, "x", {"target": "ok"}]')
    assert recent(tmp_path) == ["ok"]
    remember("new", tmp_path)
    assert recent(tmp_path) == ["new", "ok"]
