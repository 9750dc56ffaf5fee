"""What `cockpit metrics` prints, from a store filled by the parser (no cluster): CSV, JSON, the table, and
--follow's rows; and its flags refused in one line before anything is asked of the cluster."""

from __future__ import annotations

import csv
import io
import json
import math

import pytest

from cockpit.cli import main
from cockpit.cli.metrics import _print_whole, _Streamer
from cockpit.core.metrics.lines import MetricsParser
from cockpit.core.metrics.series import KeyFilter, SeriesStore

LOG = (
    "step=1 reward=0.201 kl=0.0211 throughput=3406 tok/s\n"
    "(PolicyTrainer pid=3) policy update step=1 loss=0.7071 version=1\n"
    "step=2 reward=nan kl=0.02 throughput=3500 tok/s\n"
    "step=3 reward=0.25 kl=1e-06 throughput=3600 tok/s\n"
)


def store_of(text: str, keys: list[str] | None = None) -> SeriesStore:
    store = SeriesStore(keys=KeyFilter(keys) if keys else None)
    parser = MetricsParser("demo")
    store.extend(parser.feed(text) + parser.flush())
    return store


def test_csv_one_row_per_step(capsys: pytest.CaptureFixture[str]) -> None:
    store = store_of(LOG)
    _print_whole(store, "csv", store.keys())
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows == [
        ["step", "reward", "kl", "throughput"],
        ["1", "0.201", "0.0211", "3406"],
        ["2", "nan", "0.02", "3500"],
        ["3", "0.25", "1e-06", "3600"],
    ]


def test_json_points_per_key(capsys: pytest.CaptureFixture[str]) -> None:
    store = store_of(LOG, ["kl", "reward"])
    _print_whole(store, "json", ["kl", "reward"])
    doc = json.loads(capsys.readouterr().out)  # Python's json reads NaN
    assert list(doc) == ["kl", "reward"]
    assert doc["kl"] == [[1, 0.0211], [2, 0.02], [3, 1e-06]]
    assert doc["reward"][0] == [1, 0.201] and math.isnan(doc["reward"][1][1])


def test_table_with_the_nan_alarm(capsys: pytest.CaptureFixture[str]) -> None:
    store = store_of(LOG)
    _print_whole(store, "table", store.keys())
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["KEY", "STEPS", "COUNT", "FIRST", "LAST", "MIN", "MAX"]
    assert lines[1].split() == ["reward", "1-3", "3", "0.201", "0.25", "0.201", "0.25"]
    assert lines[-1] == "! reward went nan at step 2 (finite again since)"


def test_follow_csv_keeps_its_columns_and_says_once_what_it_leaves_out(
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = store_of("step=1 reward=0.5 kl=0.01\n")
    streamer = _Streamer("csv", store, None)
    streamer.history()
    parser = MetricsParser("demo")
    streamer.new(store.extend(parser.feed("step=2 reward=0.6 kl=0.02 extra=1\nstep=3 reward=0.7 extra=2\n")))
    streamer.quiet()
    captured = capsys.readouterr()
    assert captured.out.splitlines() == ["step,reward,kl", "1,0.5,0.01", "2,0.6,0.02", "3,0.7,"]
    assert captured.err.count("not in the CSV columns") == 1 and "key extra" in captured.err


def test_follow_json_lines_start_with_the_history(capsys: pytest.CaptureFixture[str]) -> None:
    store = store_of("step=1 reward=0.5\n")
    streamer = _Streamer("json", store, None)
    streamer.history()
    streamer.done(MetricsParser("demo").feed("step=2 reward=0.75"))  # no newline: nothing complete
    parser = MetricsParser("demo")
    parser.feed("step=2 reward=0.75")
    streamer.done(parser.flush())
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line) for line in lines] == [{"step": 1, "reward": 0.5}, {"step": 2, "reward": 0.75}]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--format", "step=(\\d+"], "cockpit: --format: not a format (auto, verl, nemo_rl, rlinf, demo"),
        (
            ["--format", "wandb"],
            "cockpit: --format: not a format (auto, verl, nemo_rl, rlinf, demo, generic);",
        ),
        (["--keys", " , "], "cockpit: --keys: give key names separated by commas (e.g. reward,kl)."),
        (["--max-points", "1"], "cockpit: --max-points must be at least 2."),
        (["--phases", "--follow"], "cockpit: --phases reads the timing keys itself: leave out --follow"),
        (["--phases", "--keys", "gen"], "cockpit: --phases reads the timing keys itself"),
        (["--phases", "--last", "-1"], "cockpit: --last must be 0 (all steps) or more."),
    ],
)
def test_bad_flags_are_one_line_before_any_connection(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["metrics", "http://127.0.0.1:1", "job", *args]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(message)


def test_csv_and_json_together_are_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["metrics", "local", "job", "--csv", "--json"])
    assert info.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err
