"""`cockpit actors` output: cluster text as is in --json, cleaned of escapes and controls in the table."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from cockpit.cli.actors import print_actors, print_pending
from cockpit.core.actors.listing import actor_list, parse_query
from cockpit.core.actors.pending import PendingReport, StuckItem
from cockpit.core.snapshots import ActorRow, Listing, ListMeta

HOSTILE = "evil\x1b[2J\x1b]0;pwned\x07name\nsecond\x9bline"


def listing() -> Listing[ActorRow]:
    row = ActorRow("ab" * 16, "RolloutWorker", HOSTILE, "ALIVE", "02000000", "n1", 42, 0, {"GPU": 1.0})
    return Listing(rows=(row,), meta=ListMeta(total=1, num_after_truncation=1, num_filtered=1, returned=1))


def test_json_keeps_the_cluster_text_as_is(capsys: pytest.CaptureFixture[str]) -> None:
    print_actors(actor_list(listing(), parse_query("")), as_json=True)
    doc = json.loads(capsys.readouterr().out)
    assert doc["actors"][0]["name"] == HOSTILE and doc["actors"][0]["role"] == "rollout"


def test_json_leaves_the_runtime_env_out(capsys: pytest.CaptureFixture[str]) -> None:
    secret = "0123456789abcdef0123456789abcdef01234567"
    row = replace(listing().rows[0], runtime_env=json.dumps({"env_vars": {"WANDB_API_KEY": secret}}))
    rows = Listing(rows=(row,), meta=listing().meta)
    print_actors(actor_list(rows, parse_query("")), as_json=True)
    out = capsys.readouterr().out
    assert secret not in out and "runtime_env" not in json.loads(out)["actors"][0]


def test_table_has_no_escape_or_control(capsys: pytest.CaptureFixture[str]) -> None:
    print_actors(actor_list(listing(), parse_query("")), as_json=False)
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out
    lines = out.splitlines()
    assert len(lines) == 3 and "RolloutWorker" in lines[1] and "rollout" in lines[1]
    assert lines[-1] == "1 actor"


def test_pending_table_is_cleaned(capsys: pytest.CaptureFixture[str]) -> None:
    item = StuckItem("actor", "x", HOSTILE, "PENDING_CREATION", "", f"actor X `{HOSTILE}` waits", False)
    print_pending(PendingReport(items=(item,), alive_nodes=3, largest_free={}), as_json=False)
    out = capsys.readouterr().out
    assert "\x1b" not in out and out.count("\n") == 1
