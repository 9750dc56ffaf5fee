"""The alert rules, their bookkeeping (each event once, a condition told, reminded, resolved) and where
alerts go (JSON, the terminal's notification sequences, the user's command): pure functions, real
subprocesses for the command."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from cockpit.core.alerts.book import AlertBook
from cockpit.core.alerts.rules import RULES, Finding, Observation, Thresholds, findings, looked_at
from cockpit.core.alerts.send import CommandSink, json_line, notification
from cockpit.core.config.settings import ALERT_RULES
from cockpit.core.doctor.hang import Verdict
from cockpit.core.metrics.series import NonFinite
from cockpit.core.slurm.queue import SlurmJob
from cockpit.core.snapshots import JobRow, NodeSnapshot


def job(key: str, status: str, message: str = "") -> JobRow:
    return JobRow(key, "", "SUBMISSION", status, "python x.py", message, 1.0, 2.0, driver_node_id="n1")


def verdict(hung: bool, straggler: str = "") -> Verdict:
    return Verdict(hung, 30.0, "no progress for 30s · no GPU readings" if hung else "", straggler, "", None)


def test_the_config_names_every_rule_and_only_them() -> None:
    assert set(ALERT_RULES) == set(RULES)


def test_each_rule_finds_what_it_is_for_and_names_the_job_node_or_step() -> None:
    dead = NodeSnapshot(
        "ab" * 14, "10.0.0.7", "gpu-07", False, "DEAD", "health check failed", None, 5.0, 8, 8
    )
    seen = Observation(
        jobs=[
            job("raysubmit_ok", "SUCCEEDED"),
            job(
                "raysubmit_bad",
                "FAILED",
                "Job entrypoint command failed with exit code 3, last available logs (truncated to 20,000 "
                "chars):\nTraceback ...",
            ),
            job(
                "raysubmit_oom",
                "FAILED",
                "1 Workers (tasks / actors) killed due to the node running low on memory.",
            ),
            job("raysubmit_run", "RUNNING"),
        ],
        nodes=[dead],
        hangs={"raysubmit_run": verdict(True), "raysubmit_two": verdict(False, "straggler? rollout idle")},
        nonfinite={"raysubmit_run": [NonFinite("loss", 812, float("nan"), 812, 1, True)]},
        slurm=SlurmJob("77", state="RUNNING", time_limit=3600.0, end_time=1000.0 + 600.0),
        now=1000.0,
    )
    found = {(f.rule, f.subject.split("@")[0]): f for f in findings(seen)}
    assert found[("job_succeeded", "raysubmit_ok")].message == "job raysubmit_ok SUCCEEDED"
    assert found[("job_failed", "raysubmit_bad")].message == (
        "job raysubmit_bad FAILED: Job entrypoint command failed with exit code 3"
    )
    assert "OOM (Ray memory monitor)" in found[("oom", "raysubmit_oom")].message
    assert ("oom", "raysubmit_bad") not in found
    assert found[("node_dead", dead.node_id)].message.startswith(
        "node gpu-07 (abababab) is DEAD: health check"
    )
    assert found[("hang", "raysubmit_run")].message.startswith("raysubmit_run: no progress for 30s")
    assert found[("straggler", "raysubmit_two")].message == "raysubmit_two: straggler? rollout idle"
    nan = found[("nan", "raysubmit_run/loss")]
    assert (nan.message, nan.step, nan.job) == (
        "raysubmit_run: loss went nan at step 812",
        812,
        "raysubmit_run",
    )
    assert "reaches its time limit in 10m00s" in found[("walltime", "77")].message
    assert not any(f.rule == "job_failed" and f.subject == "raysubmit_run" for f in found.values())
    off = findings(seen, Thresholds(off=frozenset({"job_succeeded", "hang"})))
    assert not any(f.rule in ("job_succeeded", "hang") for f in off)


def test_cluster_text_cannot_break_the_line_and_a_long_message_is_cut() -> None:
    hostile = job("raysubmit_x", "FAILED", "\x1b[31mred\x1b]9;pwned\x07 [bold]x[/bold]" + "y" * 5000)
    (failed,) = [f for f in findings(Observation(jobs=[hostile])) if f.rule == "job_failed"]
    assert "\x1b" not in failed.message and "\x07" not in failed.message
    assert len(failed.message) <= 300 and failed.message.endswith("…")


def test_an_event_is_told_once_and_what_was_over_before_the_watch_is_not_told() -> None:
    book = AlertBook("local")
    old = Observation(jobs=[job("old", "FAILED")], now=100.0)
    assert book.update(findings(old), 100.0, looked_at(old)) == []  # the baseline
    seen = Observation(jobs=[job("old", "FAILED"), job("new", "FAILED")], now=110.0)
    (alert,) = book.update(findings(seen), 110.0, looked_at(seen))
    assert (alert.rule, alert.job, alert.state, alert.severity) == ("job_failed", "new", "firing", "error")
    assert book.update(findings(seen), 120.0, looked_at(seen)) == []


def test_a_rule_first_looked_at_later_still_has_its_baseline() -> None:
    """A Slurm target is looked at (its queue) before its cluster: the cluster's first jobs are a baseline."""
    book = AlertBook("slurm:77")
    queued = Observation(slurm=SlurmJob("77", state="PENDING"), now=1.0)
    assert book.update(findings(queued), 1.0, looked_at(queued)) == []
    running = Observation(jobs=[job("yesterday", "FAILED")], slurm=SlurmJob("77", state="RUNNING"), now=2.0)
    assert book.update(findings(running), 2.0, looked_at(running)) == []


def test_a_condition_is_told_reminded_and_resolved_and_a_new_one_is_a_new_alert() -> None:
    book = AlertBook("local", remind_every=600.0)
    hung = Observation(jobs=[job("j", "RUNNING")], hangs={"j": verdict(True)})
    calm = Observation(jobs=[job("j", "RUNNING")], hangs={"j": verdict(False)})
    told = book.update(findings(hung), 0.0, looked_at(hung))
    assert [(a.rule, a.state) for a in told] == [("hang", "firing")]
    assert book.update(findings(hung), 300.0, looked_at(hung)) == []
    (reminder,) = book.update(findings(hung), 600.0, looked_at(hung))
    assert (reminder.state, reminder.id, reminder.since) == ("reminder", told[0].id, 0.0)
    assert [a.id for a in book.open] == [told[0].id]
    (resolved,) = book.update(findings(calm), 700.0, looked_at(calm))
    assert (resolved.state, resolved.id, resolved.severity) == ("resolved", told[0].id, "info")
    assert resolved.line.startswith("✔ resolved: local: j: no progress")
    assert book.open == []
    (again,) = book.update(findings(hung), 800.0, looked_at(hung))
    assert again.state == "firing" and again.id != told[0].id and again.number == 2


def test_a_condition_with_a_threshold_waits_for_it_and_a_blind_look_resolves_nothing() -> None:
    book = AlertBook("local")
    limits = Thresholds(unreachable_after=120.0)
    away = Observation(unreachable="connection refused")
    assert book.update(findings(away, limits), 0.0, looked_at(away)) == []
    (alert,) = book.update(findings(away, limits), 130.0, looked_at(away))
    assert alert.rule == "unreachable" and alert.since == 0.0
    hung = Observation(jobs=[], hangs={"j": verdict(True)})
    seen = book.update(findings(hung, limits), 140.0, looked_at(hung))
    assert [(a.rule, a.state) for a in seen] == [("hang", "firing"), ("unreachable", "resolved")]
    # The cluster gone again: the hang is not seen, and not resolved either (nothing was looked at).
    assert book.update(findings(away, limits), 150.0, looked_at(away)) == []
    assert [a.rule for a in book.open] == ["hang"]


def test_the_json_of_an_alert_has_every_field_a_script_needs() -> None:
    book = AlertBook("local")
    book.update([], 0.0)
    nan = Observation(jobs=[], nonfinite={"raysubmit_a": [NonFinite("loss", 4, float("inf"), 4, 1, True)]})
    (alert,) = book.update(findings(nan), 1_700_000_000.0, looked_at(nan))
    data = json.loads(json_line(alert))
    assert data == {
        "id": "local|nan|raysubmit_a/loss|1700000000",
        "target": "local",
        "rule": "nan",
        "severity": "error",
        "state": "firing",
        "message": "raysubmit_a: loss went inf at step 4",
        "job": "raysubmit_a",
        "node": None,
        "step": 4,
        "since": "2023-11-14T22:13:20Z",
        "time": "2023-11-14T22:13:20Z",
    }


def _alert(message: str):  # type: ignore[no-untyped-def]
    book = AlertBook("local")
    book.update([], 0.0)
    (alert,) = book.update([Finding("job_failed", "j", message, job="j")], 1.0)
    return alert


def test_the_notification_sequences_of_each_style_inside_and_outside_tmux() -> None:
    alert = _alert("job j FAILED")
    assert notification(alert, "osc9") == "\x1b]9;ray-cockpit: ✖ local: job j FAILED\x07\a"
    assert notification(alert, "osc777") == "\x1b]777;notify;ray-cockpit;✖ local: job j FAILED\x1b\\\a"
    wrapped = notification(alert, "osc9", tmux=True)
    assert wrapped == "\x1bPtmux;\x1b\x1b]9;ray-cockpit: ✖ local: job j FAILED\x07\x1b\\\a"
    assert notification(alert, "osc9", tmux=False) == "\a"  # tmux that does not pass them: the bell
    assert notification(alert, "bell") == "\a" and notification(alert, "off") == ""


@given(st.text(max_size=400))
def test_no_cluster_text_ends_the_sequence_early_or_starts_another(text: str) -> None:
    for style in ("osc9", "osc777"):
        out = notification(_alert(text), style)  # type: ignore[arg-type]
        body = out[len("\x1b]9;") : -2] if style == "osc9" else out[len("\x1b]777;notify;") : -3]
        assert "\x1b" not in body and "\x07" not in body and "\x9c" not in body
        if style == "osc777":
            assert body.count(";") == 1  # only the one between the title and the text


async def test_the_command_gets_each_alert_once_as_json_and_its_failures_are_one_line(tmp_path: Path) -> None:
    out = tmp_path / "got.jsonl"
    script = tmp_path / "take.py"
    script.write_text(
        "import json, sys\n"
        "data = sys.stdin.read()\n"
        f"open({str(out)!r}, 'a').write(data)\n"
        "sys.exit(4 if json.loads(data)['job'] == 'bad' else 0)\n"
    )
    said: list[str] = []
    sink = CommandSink([sys.executable, str(script)], report=said.append, timeout=20)
    good, bad = _alert("job ok FAILED"), AlertBook("local")
    bad.update([], 0.0)
    (bad_alert,) = bad.update([Finding("job_failed", "bad", "job bad FAILED", job="bad")], 1.0)
    for alert in (good, good, bad_alert):
        sink.send(alert)
    await sink.idle()
    await sink.close()
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert [g["job"] for g in got] == ["j", "bad"]
    assert got[0] == json.loads(json_line(good))
    assert said == [f"alerts.command {Path(sys.executable).name} exited 4 for {bad_alert.id}"]
    assert (sink.ran, sink.failed) == (2, 1)


async def test_a_missing_program_and_a_slow_one_are_reported_and_the_slow_one_ended(tmp_path: Path) -> None:
    said: list[str] = []
    missing = CommandSink([str(tmp_path / "nope")], report=said.append)
    missing.send(_alert("x"))
    await missing.idle()
    assert said and said[0].startswith("alerts.command nope could not start")
    pid_file = tmp_path / "pid"
    slow = CommandSink(
        ["sh", "-c", f"echo $$ > {pid_file}; sleep 300 & wait"], report=said.append, timeout=1.0, grace=1.0
    )
    slow.send(_alert("y"))
    await slow.idle()
    assert said[-1].startswith("alerts.command sh took more than 1 s for local|job_failed|j|1: ended")
    pid = int(pid_file.read_text())
    await asyncio.sleep(0.1)
    assert not Path(f"/proc/{pid}").exists() or "zombie" in _state(pid)
    await slow.close()


def _state(pid: int) -> str:
    try:
        return (Path(f"/proc/{pid}/status").read_text().split("State:")[1].split("\n")[0]).lower()
    except (OSError, IndexError):
        return "zombie"


def test_the_command_line_keeps_its_subcommand_and_bad_flags_are_one_line(capsys) -> None:  # type: ignore[no-untyped-def]
    from cockpit.cli import build_parser, main

    args = build_parser().parse_args(["alerts", "local", "slurm:7", "--command", "notify-send 'ray run'"])
    assert (args.command, args.targets, args.alert_command) == (
        "alerts",
        ["local", "slurm:7"],
        "notify-send 'ray run'",
    )
    for flags, says in (
        (["--command", "  "], "cockpit: --command is empty"),
        (["--command", "'unclosed"], "cockpit: --command: No closing quotation"),
        (["--hang-after", "soon"], "cockpit: --hang-after: "),
    ):
        assert main(["alerts", "local", *flags]) == 1
        lines = capsys.readouterr().err.splitlines()
        assert len(lines) == 1 and lines[0].startswith(says), lines


def test_sigterm_ends_the_watch_cleanly_and_under_nohup_a_closed_terminal_does_not(tmp_path: Path) -> None:
    """A real `cockpit alerts` process (its one target out of reach: no cluster here)."""
    import os
    import signal
    import subprocess
    import time

    env = {**os.environ, "COCKPIT_STATE_DIR": str(tmp_path), "COCKPIT_ALERTS_NOTIFY": "off"}

    def started(nohup: bool) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cockpit.cli", "alerts", "local"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
            preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN if nohup else signal.SIG_DFL),
        )  # fmt: skip
        assert proc.stderr is not None
        while "watching local" not in proc.stderr.readline():
            assert proc.poll() is None
        return proc

    plain, nohup = started(False), started(True)
    for proc in (plain, nohup):
        proc.send_signal(signal.SIGHUP)
    assert plain.wait(timeout=30) == 0
    time.sleep(1.0)
    assert nohup.poll() is None  # nohup's SIGHUP stays ignored
    nohup.send_signal(signal.SIGTERM)
    assert nohup.wait(timeout=30) == 0
    for proc in (plain, nohup):
        _, said = proc.communicate()
        assert said.rstrip().endswith("cockpit: stopped"), said


def test_a_worker_rays_memory_monitor_killed_is_an_oom_alert_a_maybe_is_not() -> None:
    """From the real kills of tests/fixtures/oom (Ray 2.60's worker table): the two the monitor chose are
    told, with their job, node and pid; the SIGKILL that may have been the kernel's is not."""
    from cockpit.core.memory.report import oom_kills
    from tests.unit.test_oom import workers

    kills = oom_kills(workers(), ())
    found = [f for f in findings(Observation(oom_kills=kills)) if f.rule == "oom"]
    assert len(found) == 2 and len(kills) == 3
    hog = next(f for f in found if "pid 17604" in f.message)
    assert hog.message.startswith(
        "job 01000000: OOM (Ray memory monitor) killed a worker (node 192.0.2.2, pid 17604)"
    )
    assert hog.job == "01000000" and hog.subject == next(k.worker_id for k in kills if k.pid == 17604)
    assert "oom" in looked_at(Observation(oom_kills=kills)) and "oom" not in looked_at(Observation())


def test_a_new_cluster_reusing_a_job_id_and_a_slurm_only_look_are_judged_right() -> None:
    """Ray numbers a new cluster's drivers from 01000000 again: a new failure of `02000000` is news. A
    look at the Slurm queue alone says nothing of whether the cluster is reachable."""
    book = AlertBook("head-node")
    book.update([], 0.0)
    first = Observation(jobs=[job("02000000", "FAILED")])
    assert [a.rule for a in book.update(findings(first), 1.0, looked_at(first))] == ["job_failed"]
    again = JobRow("", "02000000", "DRIVER", "FAILED", "python x.py", "", 500.0, 600.0)
    later = Observation(jobs=[again])
    assert [a.rule for a in book.update(findings(later), 700.0, looked_at(later))] == ["job_failed"]
    assert "unreachable" not in looked_at(Observation(slurm=SlurmJob("7", state="RUNNING")))
    assert "unreachable" in looked_at(Observation(unreachable="refused")) and "unreachable" in looked_at(
        first
    )


async def test_every_reminder_reaches_the_command_once(tmp_path: Path) -> None:
    out = tmp_path / "got.jsonl"
    sink = CommandSink(["sh", "-c", f"cat >> {out}"], report=lambda _line: None)
    book = AlertBook("local", remind_every=600.0)
    hung = Observation(jobs=[], hangs={"j": verdict(True)})
    for now in (0.0, 600.0, 1200.0, 1200.0):
        for alert in book.update(findings(hung), now, looked_at(hung)):
            sink.send(alert)
            sink.send(alert)  # the same alert twice: run once
    await sink.idle()
    await sink.close()
    states = [json.loads(line)["state"] for line in out.read_text().splitlines()]
    assert states == ["firing", "reminder", "reminder"]


async def test_a_profile_that_cannot_be_read_is_said_once_a_job(tmp_path: Path) -> None:
    """Its hang policy and its metrics format read the same profile: the one problem was said once by
    each reader and again at each start of the job's follow (two and three times a job)."""
    from cockpit.core.alerts.watch import TargetWatch, WatchSettings
    from cockpit.core.connect.connection import ConnectOptions
    from cockpit.core.targets import parse_target

    said: list[str] = []
    watch = TargetWatch(
        parse_target("http://127.0.0.1:1"),
        ConnectOptions(),
        WatchSettings(profile_dirs=(tmp_path,)),
        emit=lambda _alert: None,
        say=said.append,
    )
    job = JobRow(
        submission_id="failer-20261129-000000-abcd",
        job_id="03000000",
        type="SUBMISSION",
        status="RUNNING",
        entrypoint="python3 fail.py",
        message="",
        start_time=1_795_642_346.0,
        end_time=None,
        metadata={"cockpit_profile": "failer"},
    )
    for _ in range(3):
        await watch._start(job)
    assert len(said) == 1 and "failer" in said[0] and "no profile named" in said[0]
