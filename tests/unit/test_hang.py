"""The hang detector's rule (`cockpit.core.doctor.hang`): durations as typed, what counts as progress
(lines, a
profile's regex, GPU activity that moves), the status-bar line after `hang_after` and not before, the
GPU figure, the straggler hint, and hostile or endless input. Time is passed in by hand."""

from __future__ import annotations

import re
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cockpit.core.doctor import hang
from cockpit.core.doctor.hang import HangPolicy, ProgressWatch, hang_policy, parse_duration
from cockpit.core.jobs.profile_load import Profile
from cockpit.core.units import MAX_DURATION, duration
from tests.harness.hostile import controls, hostile_text

STEP = re.compile(r"step=\d+")
T0 = 1000.0


# -- parse_duration ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90),
        ("10m", 600),
        ("1h", 3600),
        ("1h30m", 5400),
        ("2m30s", 150),
        ("3m05s", 185),
        ("2h07m", 7620),
        ("1h 30m", 5400),
        ("45", 45),
        (" 45 ", 45),
        ("1.5m", 90),
        ("0.5", 0.5),
        ("10M", 600),
        ("168h", 7 * 24 * 3600),
    ],
)
def test_parse_duration_reads_what_users_type(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "is not a duration"),
        ("   ", "is not a duration"),
        ("-5m", "is not a duration"),
        ("+5m", "is not a duration"),
        ("ten minutes", "is not a duration"),
        ("10x", "is not a duration"),
        ("m", "is not a duration"),
        ("10ms", "is not a duration"),
        ("1d", "is not a duration"),
        ("30m1h", "is not a duration"),
        ("inf", "is not a duration"),
        ("nan", "is not a duration"),
        ("1e3", "is not a duration"),
        ("\u0663m", "is not a duration"),  # an Arabic-Indic 3: digits are ASCII digits
        ("0", "no time at all"),
        ("0m0s", "no time at all"),
        ("169h", "more than 7 days"),
        ("9" * 400 + "s", "more than 7 days"),
    ],
)
def test_parse_duration_refuses_in_one_line_saying_what_it_takes(text: str, says: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_duration(text)
    message = str(info.value)
    assert says in message and "\n" not in message and len(message) < 200
    if says != "more than 7 days":
        assert "90s, 10m" in message  # the accepted forms


@given(st.integers(min_value=1, max_value=7 * 24 * 3600))
def test_what_duration_writes_parse_duration_reads_back(seconds: int) -> None:
    # `duration` drops the seconds from an hour on (2h07m): what it shows is what comes back.
    expected = seconds if seconds < 3600 else seconds - seconds % 60
    assert parse_duration(duration(seconds)) == expected


@given(st.one_of(st.text(), hostile_text, st.from_regex(r"[0-9.hms \-+e]{0,12}", fullmatch=True)))
def test_garbage_gives_a_duration_or_a_one_line_value_error(text: str) -> None:
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        assert "\n" not in str(exc) and str(exc).isprintable()
    else:
        assert 0 < seconds <= MAX_DURATION


# -- hang_policy ------------------------------------------------------------------------------------


def profile(progress: str = "", hang_after: float | None = None) -> Profile:
    from pathlib import Path

    return Profile(name="p", path=Path("p.yaml"), entrypoint="x", progress=progress, hang_after=hang_after)


def test_hang_policy_override_then_profile_then_default() -> None:
    assert hang_policy(None) == HangPolicy(hang_after=600.0, progress=None)
    assert hang_policy(None, 30.0).hang_after == 30.0
    assert hang_policy(profile(hang_after=60.0)).hang_after == 60.0
    assert hang_policy(profile(hang_after=60.0), 5.0).hang_after == 5.0
    assert hang_policy(profile()).hang_after == hang.DEFAULT_HANG_AFTER
    progress = hang_policy(profile(progress=r"step=\d+")).progress
    assert progress is not None and progress.pattern == r"step=\d+"


def test_a_policy_that_never_fires_is_a_bug() -> None:
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError):
            HangPolicy(hang_after=bad)


# -- the rule ---------------------------------------------------------------------------------------


def test_fires_at_hang_after_without_progress_and_not_before() -> None:
    watch = ProgressWatch(HangPolicy(hang_after=600.0), T0)
    watch.feed_lines(["step=1 loss=0.5"], T0 + 100)
    before = watch.verdict(T0 + 699.9)
    assert not before.hung and before.line == "" and before.quiet_for == pytest.approx(599.9)
    at = watch.verdict(T0 + 700)
    assert at.hung and at.quiet_for == 600
    assert at.line == "no progress for 10 min · GPU activity unknown"
    later = watch.verdict(T0 + 100 + 12 * 60 + 59)
    assert later.line.startswith("no progress for 12 min · ")
    assert later.last_progress == "step=1 loss=0.5" and later.last_progress_age == 12 * 60 + 59
    watch.feed_lines(["step=2"], T0 + 900)
    assert not watch.verdict(T0 + 900).hung  # progress again: the line goes


def test_without_any_progress_the_clock_runs_from_the_start() -> None:
    watch = ProgressWatch(HangPolicy(hang_after=45.0), T0)
    assert not watch.verdict(T0 + 44).hung
    verdict = watch.verdict(T0 + 45)
    assert verdict.hung and verdict.line.startswith("no progress for 45 s · ")
    assert verdict.last_progress == "" and verdict.last_progress_age is None


def test_the_ray_debuggers_own_lines_are_no_progress() -> None:
    """A worker paused in the post-mortem debugger: each attach (the cockpit's own peek included) makes
    Ray log these, which kept a job with no `progress:` regex from ever looking hung."""
    watch = ProgressWatch(HangPolicy(hang_after=60.0), T0)
    watch.feed_lines(["step=3 loss=0.5"], T0 + 5)
    paused = [
        "(RolloutWorker pid=9) Ray debugger is listening on 10.0.0.2:41000",
        "(RolloutWorker pid=9) Waiting for debugger to attach (see https://docs.ray.io/en/latest/"
        "ray-observability/ray-distributed-debugger.html)...",
        "(RolloutWorker pid=9) Debugger client is connected",
        "(RolloutWorker pid=9) Ray debugger is already open on 41000",
    ]
    for second in (20, 40, 60):
        watch.feed_lines(paused, T0 + second)
    verdict = watch.verdict(T0 + 65)
    assert verdict.hung and verdict.last_progress == "step=3 loss=0.5"


def test_with_a_regex_only_matching_lines_count() -> None:
    watch = ProgressWatch(HangPolicy(hang_after=60.0, progress=STEP), T0)
    watch.feed_lines(["step=7 reward=0.1", "waiting for weights", "(RolloutWorker pid=9) heartbeat"], T0 + 10)
    watch.feed_lines(iter(["heartbeat"] * 1000), T0 + 50)  # any iterable, thousands of lines
    verdict = watch.verdict(T0 + 70)
    assert verdict.hung and verdict.last_progress == "step=7 reward=0.1"
    assert verdict.last_progress_age == 60


def test_the_last_progress_line_of_a_batch_is_remembered() -> None:
    watch = ProgressWatch(HangPolicy(progress=STEP), T0)
    watch.feed_lines(["step=1", "step=2", "noise", "step=3 loss=1", "noise"], T0 + 5)
    assert watch.verdict(T0 + 5).last_progress == "step=3 loss=1"
    watch.feed_lines("step=4\nstep=5\nnoise\n", T0 + 6)  # one chunk of text is its lines
    assert watch.verdict(T0 + 6).last_progress == "step=5"


def test_without_a_regex_blank_lines_are_no_progress() -> None:
    watch = ProgressWatch(HangPolicy(hang_after=60.0), T0)
    watch.feed_lines(["loading"], T0 + 1)
    watch.feed_lines(["", "   ", "\t", "\r", "\n"], T0 + 30)
    verdict = watch.verdict(T0 + 61)
    assert verdict.hung and verdict.last_progress == "loading"
    watch.feed_lines(["", "epoch 2", "  "], T0 + 62)
    assert not watch.verdict(T0 + 62).hung and watch.verdict(T0 + 62).last_progress == "epoch 2"


# -- GPU activity -----------------------------------------------------------------------------------


def gpus_every(watch: ProgressWatch, start: float, end: float, sample: list[float | None]) -> None:
    at = start
    while at <= end:
        watch.feed_gpus(sample, at)
        at += 5


def test_flat_busy_gpus_are_a_collective_wait() -> None:
    watch = ProgressWatch(HangPolicy(hang_after=600.0), T0)
    gpus_every(watch, T0, T0 + 720, [100.0] * 63 + [97.0])
    verdict = watch.verdict(T0 + 720)
    assert verdict.hung
    assert verdict.line == "no progress for 12 min · 64 GPUs at 100 % (collective wait?)"


def test_flat_idle_gpus_are_idle() -> None:
    watch = ProgressWatch(HangPolicy(hang_after=600.0), T0)
    gpus_every(watch, T0, T0 + 720, [0.0] * 7 + [3.0])
    assert watch.verdict(T0 + 720).line == "no progress for 12 min · 8 GPUs at 0 % (idle)"


def test_mixed_flat_gpus_show_their_mean() -> None:
    watch = ProgressWatch(HangPolicy(hang_after=600.0), T0)
    gpus_every(watch, T0, T0 + 720, [100.0] * 3 + [0.0] * 4 + [44.0])
    assert watch.verdict(T0 + 720).line == "no progress for 12 min · 8 GPUs at 43 % mean"


def test_one_gpu_is_singular_and_unknown_ones_are_not_counted() -> None:
    watch = ProgressWatch(HangPolicy(hang_after=60.0), T0)
    gpus_every(watch, T0, T0 + 60, [None, 100.0, None])
    assert watch.verdict(T0 + 60).line == "no progress for 1 min · 1 GPU at 100 % (collective wait?)"


def test_unknown_gpus_say_so() -> None:
    watch = ProgressWatch(HangPolicy(hang_after=60.0), T0)
    gpus_every(watch, T0, T0 + 60, [None] * 8)  # logical GPUs (the demo): no readings
    verdict = watch.verdict(T0 + 60)
    assert verdict.hung and verdict.line == "no progress for 1 min · GPU activity unknown"


def test_readings_older_than_the_window_are_unknown() -> None:
    watch = ProgressWatch(HangPolicy(hang_after=60.0), T0)
    watch.feed_gpus([100.0] * 4, T0)  # then the GPU feed went quiet
    assert "4 GPUs at 100 %" in watch.verdict(T0 + 60).line
    assert watch.verdict(T0 + 60 + hang.WINDOW_SECONDS).line.endswith("GPU activity unknown")


def test_moving_gpus_are_progress_without_a_regex() -> None:
    watch = ProgressWatch(HangPolicy(hang_after=60.0), T0)
    for n in range(40):  # 200 s of a compute loop: utilization swings by tens of points
        watch.feed_gpus([95.0 if n % 2 else 40.0, 60.0], T0 + 5 * n)
    verdict = watch.verdict(T0 + 200)
    assert not verdict.hung and verdict.quiet_for == 5
    assert verdict.last_progress == ""  # GPU activity is progress, not a line


def test_small_wobble_is_no_progress() -> None:
    watch = ProgressWatch(HangPolicy(hang_after=60.0), T0)
    for n in range(20):
        watch.feed_gpus([100.0 - (n % 2) * 9.9, 99.0], T0 + 5 * n)  # below MOVED_POINTS
    verdict = watch.verdict(T0 + 95)
    assert verdict.hung and "(collective wait?)" in verdict.line


def test_moving_gpus_are_no_progress_with_a_regex() -> None:
    watch = ProgressWatch(HangPolicy(hang_after=60.0, progress=STEP), T0)
    for n in range(20):
        watch.feed_gpus([95.0 if n % 2 else 40.0], T0 + 5 * n)
    verdict = watch.verdict(T0 + 95)
    assert verdict.hung and verdict.line == "no progress for 1 min · 1 GPU at 68 % mean"


def test_a_gpu_that_appears_or_goes_is_no_progress() -> None:
    watch = ProgressWatch(HangPolicy(hang_after=60.0), T0)
    watch.feed_gpus([100.0, 100.0], T0)
    watch.feed_gpus([100.0, 100.0, 0.0], T0 + 10)
    watch.feed_gpus([100.0], T0 + 20)
    watch.feed_gpus([None, 0.0], T0 + 30)  # unknown -> known is no movement either
    assert watch.verdict(T0 + 60).hung


# -- the straggler hint -----------------------------------------------------------------------------


def test_straggler_hint_appears_while_steps_come_and_goes_when_roles_even_out() -> None:
    watch = ProgressWatch(HangPolicy(hang_after=600.0, progress=STEP), T0)
    roles = {"RolloutWorker": [0.0, 0.0, None], "PolicyTrainer": [87.0, 87.0], "Critic": [None]}
    for n in range(3):
        watch.feed_lines([f"step={n}"], T0 + 10 * n)
        assert watch.verdict(T0 + 10 * n).straggler == ""  # one or two samples say nothing yet
        watch.feed_roles(roles, T0 + 10 * n)
    verdict = watch.verdict(T0 + 20)
    assert not verdict.hung
    assert verdict.straggler == "straggler? RolloutWorker GPUs at 0 % while PolicyTrainer's are at 87 %"
    even = {"RolloutWorker": [80.0, 70.0], "PolicyTrainer": [87.0, 87.0]}
    for n in range(3, 3 + hang.WINDOW_SAMPLES):
        watch.feed_lines([f"step={n}"], T0 + 10 * n)
        watch.feed_roles(even, T0 + 10 * n)
    assert watch.verdict(T0 + 10 * (2 + hang.WINDOW_SAMPLES)).straggler == ""


def test_no_straggler_hint_without_steps_or_once_hung() -> None:
    roles = {"RolloutWorker": [0.0], "PolicyTrainer": [90.0]}
    starting = ProgressWatch(HangPolicy(hang_after=600.0, progress=STEP), T0)
    for n in range(5):
        starting.feed_roles(roles, T0 + 10 * n)
    assert starting.verdict(T0 + 40).straggler == ""  # no step yet: loading, not straggling
    starting.feed_lines(["step=1"], T0 + 40)
    assert starting.verdict(T0 + 40).straggler.startswith("straggler? RolloutWorker")
    hung = starting.verdict(T0 + 40 + 600)
    assert hung.hung and hung.straggler == ""  # the hang line says it all


def test_no_straggler_hint_when_every_role_works_or_idles() -> None:
    watch = ProgressWatch(HangPolicy(hang_after=600.0), T0)
    for n in range(5):
        watch.feed_lines(["tick"], T0 + n)
        watch.feed_roles({"A": [6.0], "B": [90.0], "C": [None]}, T0 + n)
    assert watch.verdict(T0 + 5).straggler == ""
    idle = ProgressWatch(HangPolicy(hang_after=600.0), T0)
    for n in range(5):
        idle.feed_lines(["tick"], T0 + n)
        idle.feed_roles({"A": [0.0], "B": [29.0]}, T0 + n)
    assert idle.verdict(T0 + 5).straggler == ""


# -- hostile and endless input ----------------------------------------------------------------------


def test_hostile_lines_never_raise_and_the_kept_line_is_clean() -> None:
    watch = ProgressWatch(HangPolicy(progress=STEP), T0)
    huge = "x" * (10 * 2**20) + " step=1"  # the match beyond the scanned head does not count
    watch.feed_lines([huge], T0)
    assert watch.verdict(T0).last_progress == ""
    watch.feed_lines(["\x1b]0;pwned\x07[bold]step=3[/bold]\x00\u202e\x9b31m\ud800 " + "y" * 2**20], T0 + 1)
    kept = watch.verdict(T0 + 1).last_progress
    assert kept.startswith("[bold]step=3[/bold]\ufffd\ufffd\ufffd31m\ufffd")  # markup is text, not style
    assert controls(kept) == [] and "\x1b" not in kept and len(kept) <= hang.SCAN_CHARS
    plain = ProgressWatch(HangPolicy(), T0)
    plain.feed_lines([huge, b"bytes", None, 42], T0 + 2)  # type: ignore[list-item]
    assert plain.verdict(T0 + 2).last_progress == "x" * hang.SCAN_CHARS


@given(lines=st.lists(hostile_text, max_size=20), regex=st.booleans())
def test_any_text_gives_a_verdict(lines: list[str], regex: bool) -> None:
    watch = ProgressWatch(HangPolicy(hang_after=1.0, progress=STEP if regex else None), T0)
    watch.feed_lines(lines, T0)
    verdict = watch.verdict(T0 + 2)
    assert verdict.hung and "\n" not in verdict.line
    assert verdict.last_progress == verdict.last_progress.strip() and controls(verdict.last_progress) == []


def test_hostile_gpu_readings_and_role_names_never_raise() -> None:
    watch = ProgressWatch(HangPolicy(hang_after=60.0), T0)
    bad: list[object] = [float("nan"), float("inf"), -50.0, 250.0, "busy", None, True]
    watch.feed_gpus(bad, T0)  # type: ignore[arg-type]
    watch.feed_roles({"\x1b[2J" + "R" * 500: bad, "B": [float("-inf")]}, T0)  # type: ignore[dict-item]
    verdict = watch.verdict(T0 + 60)
    # Readable ones are clamped to 0-100 (-50 -> 0, 250 -> 100, True -> 1); the rest are unknown.
    assert verdict.line == "no progress for 1 min · 3 GPUs at 34 % mean"


def test_memory_stays_bounded_whatever_is_fed() -> None:
    watch = ProgressWatch(HangPolicy(), T0)
    for n in range(100_000):
        watch.feed_gpus([float(n % 100)] * 8, T0 + n * 0.001)
        if n % 100 == 0:
            watch.feed_roles({f"role{k}-{n}": [1.0] for k in range(200)}, T0 + n * 0.001)
    assert len(watch._gpus.samples) == hang.WINDOW_SAMPLES
    assert len(watch._roles.samples) == hang.WINDOW_SAMPLES
    assert len(watch._roles.counts) <= hang.WINDOW_SAMPLES * hang.MAX_ROLES  # role names come and go
    watch.feed_gpus([50.0] * 10**6, T0 + 200)  # a million "GPUs": the first MAX_GPUS are kept
    assert len(watch._gpus.counts) == hang.MAX_GPUS
    assert sys.getsizeof(watch._gpus.samples[-1][2]) < hang.MAX_GPUS * 4  # a few bytes a GPU
    assert not watch.verdict(T0 + 200).hung  # the samples moved: progress


def test_window_means_survive_eviction_exactly() -> None:
    watch = ProgressWatch(HangPolicy(hang_after=1.0, progress=STEP), T0)
    for n in range(1000):  # values whose float sums would drift, added to and taken from the window
        watch.feed_gpus([0.1 * (n % 7) + 33.3], T0 + n)
    for n in range(1000, 1000 + hang.WINDOW_SAMPLES):
        watch.feed_gpus([0.0], T0 + n)
    assert watch.verdict(T0 + 1000 + hang.WINDOW_SAMPLES).line.endswith("1 GPU at 0 % (idle)")
    assert watch._gpus.means() == {0: 0.0}
