"""Provides the hang detector's rule: `ProgressWatch` turns a job's driver-log lines and GPU readings
into a `Verdict` (hung or not, the one status-bar line, a straggler hint); `hang_policy` reads a profile's
`progress:` and `hang_after:` and `--hang-after` (`parse_duration`, from `units`, reads `10m`, `1h30m`).

Progress is a driver-log line (any non-blank one, or one the profile's `progress:` regex finds) and,
without a regex, a GPU sample that differs from the one before (a compute step moves utilization; an NCCL
collective wait sits flat near 100 %, a deadlock flat near 0 %). No progress for `hang_after` is a hang.
Nothing here reads a clock or a file: the caller passes `now` (monotonic seconds) to every call, so the
TUI's status bar and `cockpit watch` share the rule and the tests drive time by hand. Memory is bounded
whatever is fed (a window of at most `WINDOW_SAMPLES` samples of at most `MAX_GPUS` GPUs and `MAX_ROLES`
roles), and a call costs O(GPUs) or O(lines scanned from the end until the last progress line).
"""

from __future__ import annotations

import math
import re
from array import array
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice, repeat
from typing import TYPE_CHECKING

from cockpit.core.text import clean
from cockpit.core.units import parse_duration as parse_duration

if TYPE_CHECKING:
    from cockpit.core.jobs.profile_load import Profile

DEFAULT_HANG_AFTER = 600.0
"""No progress for this long (seconds) is a hang, unless the profile or `--hang-after` says otherwise."""
SCAN_CHARS = 4096
"""Only a line's first characters are looked at: a 10 MB line costs what a 4 kB one does."""
DEBUGGER_LINES = re.compile(
    r"Ray debugger is (?:listening on|already open on)"
    r"|Waiting for debugger to attach|Debugger client is connected"
)
"""What Ray's debugpy integration logs while a worker is paused (ray/util/debugpy.py), each time a
debugger (the cockpit's own peek at a newly paused worker included) attaches: no progress of the job,
which waits on that worker. Only without a `progress:` regex, where any line would count."""
WINDOW_SECONDS = 300.0
WINDOW_SAMPLES = 120
"""The GPU summary and the straggler hint read the samples of the last 5 minutes, 120 at the most."""
MOVED_POINTS = 10.0
"""A GPU whose utilization moved this many points since the previous sample is computing."""
BUSY_PERCENT = 90.0
"""Every GPU averaging this much while nothing progresses: most likely a collective waiting for a peer."""
IDLE_PERCENT = 5.0
"""Every GPU averaging this little: idle (a deadlock, or a wait on something off the GPU)."""
WORKING_PERCENT = 30.0
"""A role whose GPUs average this much is working (the straggler hint compares it with an idle one)."""
MAX_GPUS = 4096
MAX_ROLES = 64
ROLE_NAME_CHARS = 80
"""What one sample keeps at most, whatever it is fed: GPUs, roles, characters of a role's name."""
MIN_ROLE_SAMPLES = 3
"""Rollout and training GPUs take turns in RL: one sample of an idle role says nothing; three might."""


@dataclass(frozen=True)
class HangPolicy:
    """What counts as progress for one job, and how long without it is a hang."""

    hang_after: float = DEFAULT_HANG_AFTER
    progress: re.Pattern[str] | None = None
    """Only driver-log lines this finds are progress (GPU activity is not); None: any non-blank line is,
    and so is GPU activity that moves."""

    def __post_init__(self) -> None:
        if not self.hang_after > 0:
            raise ValueError(f"hang_after must be more than 0 seconds, not {self.hang_after!r}.")


def hang_policy(
    profile: Profile | None, override: float | None = None, *, default: float = DEFAULT_HANG_AFTER
) -> HangPolicy:
    """The policy for a job launched from PROFILE (None: not from a profile): its `progress` regex, and
    `override` (`--hang-after`), else its `hang_after`, else `default` (the config's `hang_after`, which
    the caller passes)."""
    progress = re.compile(profile.progress) if profile is not None and profile.progress else None
    hang_after = override
    if hang_after is None and profile is not None:
        hang_after = profile.hang_after
    if hang_after is None:
        hang_after = default
    return HangPolicy(hang_after=hang_after, progress=progress)


@dataclass(frozen=True)
class Verdict:
    """What the watch concludes at one moment."""

    hung: bool
    quiet_for: float
    """Seconds since the last progress (or since the watch started, if none came yet)."""
    line: str
    """The status-bar line when hung ("no progress for 12 min · 64 GPUs at 100 % (collective wait?)");
    empty otherwise."""
    straggler: str
    """While progress comes but one role's GPUs idle, e.g. "straggler? RolloutWorker GPUs at 0 % while
    PolicyTrainer's are at 87 %"; empty otherwise (and while hung: `line` says it all)."""
    last_progress: str
    """The last driver-log line that counted as progress, cleaned to one safe line; empty: none yet."""
    last_progress_age: float | None
    """Seconds since that line came; None: none yet."""


UNKNOWN = -1
"""A reading in a sample that is not known (None, NaN, not a number)."""


def _readings(utilizations: Iterable[float | None]) -> array[int]:
    """Utilizations as hundredths of a percent (0-10000; UNKNOWN: none), MAX_GPUS at most. Whole numbers
    keep the window's sums exact however long it runs (no float drift), in 2 bytes a GPU."""
    out = array("h")
    for value in islice(utilizations, MAX_GPUS):
        try:
            number = math.nan if value is None else float(value)
        except (TypeError, ValueError):
            number = math.nan
        out.append(round(min(100.0, max(0.0, number)) * 100) if math.isfinite(number) else UNKNOWN)
    return out


class _Window:
    """Sums and counts per key (a GPU's index, a role's name) over the samples of the last WINDOW_SECONDS
    (WINDOW_SAMPLES at most), kept as samples come and go, so a mean per key costs O(keys), not
    O(samples). A sample is its keys, their sums in hundredths of a percent (UNKNOWN: no reading) and
    their counts (None: one reading each): 2 bytes a GPU, 1 MB for 120 samples of 4096 GPUs."""

    def __init__(self) -> None:
        self.samples: deque[tuple[float, Sequence[int | str], array[int], array[int] | None]] = deque()
        self.sums: dict[int | str, int] = {}
        self.counts: dict[int | str, int] = {}

    def add(
        self, now: float, keys: Sequence[int | str], sums: array[int], counts: array[int] | None = None
    ) -> None:
        self.prune(now)
        if len(self.samples) >= WINDOW_SAMPLES:
            self._drop()
        self.samples.append((now, keys, sums, counts))
        for key, total, count in zip(keys, sums, repeat(1) if counts is None else counts, strict=False):
            if total != UNKNOWN:
                self.sums[key] = self.sums.get(key, 0) + total
                self.counts[key] = self.counts.get(key, 0) + count

    def prune(self, now: float) -> None:
        while self.samples and self.samples[0][0] < now - WINDOW_SECONDS:
            self._drop()

    def _drop(self) -> None:
        _at, keys, sums, counts = self.samples.popleft()
        for key, total, count in zip(keys, sums, repeat(1) if counts is None else counts, strict=False):
            if total == UNKNOWN:
                continue
            left = self.counts[key] - count
            if left:
                self.counts[key] = left
                self.sums[key] -= total
            else:  # gone from the window
                del self.counts[key], self.sums[key]

    def means(self) -> dict[int | str, float]:
        """Mean utilization in percent per key with a reading in the window."""
        return {key: self.sums[key] / count / 100 for key, count in self.counts.items()}


class ProgressWatch:
    """One running job's progress, fed as lines and GPU samples arrive; `verdict` says whether it hangs."""

    def __init__(self, policy: HangPolicy, now: float) -> None:
        self.policy = policy
        self._last_at = now
        self._progressed = False
        self._line = ""
        self._line_at: float | None = None
        self._previous: array[int] | None = None
        self._gpus = _Window()
        self._roles = _Window()

    def excuse(self, seconds: float, now: float) -> None:
        """Do not count SECONDS of silence (the cockpit could not see the job: a dropped connection)."""
        if seconds > 0:
            self._last_at = min(now, self._last_at + seconds)

    def _progress(self, now: float) -> None:
        self._last_at = max(self._last_at, now)
        self._progressed = True

    def feed_lines(self, lines: Iterable[str], now: float) -> None:
        """New driver-log lines. Only the last one that counts matters, so they are read from the end."""
        if isinstance(lines, str):
            lines = lines.splitlines()
        items = lines if isinstance(lines, Sequence) else list(lines)
        pattern = self.policy.progress
        for line in reversed(items):
            if not isinstance(line, str):
                continue
            head = line[:SCAN_CHARS]
            if pattern is not None:
                is_progress = pattern.search(head) is not None
            else:
                is_progress = bool(head) and not head.isspace() and DEBUGGER_LINES.search(head) is None
            if is_progress:
                self._line = clean(head).strip()
                self._line_at = now
                self._progress(now)
                return

    def feed_gpus(self, utilizations: Sequence[float | None], now: float) -> None:
        """One sample of the job's GPUs' utilization in percent (None: not known). Without a progress
        regex, a sample in which any GPU moved by MOVED_POINTS since the previous one is progress."""
        sample = _readings(utilizations)
        previous, self._previous = self._previous, sample
        # A GPU that came or went (a sample of another length) is no movement: only common indices count.
        if (
            self.policy.progress is None
            and previous is not None
            and any(
                abs(new - old) >= MOVED_POINTS * 100
                for new, old in zip(sample, previous, strict=False)
                if new != UNKNOWN and old != UNKNOWN
            )
        ):
            self._progress(now)
        self._gpus.add(now, range(len(sample)), sample)

    def feed_roles(self, per_role: Mapping[str, Sequence[float | None]], now: float) -> None:
        """One sample of each role's GPUs (role name -> their utilizations), for the straggler hint."""
        names: list[str] = []
        sums, counts = array("q"), array("q")
        for name, utilizations in islice(per_role.items(), MAX_ROLES):
            known = [value for value in _readings(utilizations) if value != UNKNOWN]
            if known:
                names.append(clean(name)[:ROLE_NAME_CHARS])
                sums.append(sum(known))
                counts.append(len(known))
        self._roles.add(now, names, sums, counts)

    def verdict(self, now: float) -> Verdict:
        self._gpus.prune(now)
        self._roles.prune(now)
        quiet = max(0.0, now - self._last_at)
        hung = quiet >= self.policy.hang_after
        return Verdict(
            hung=hung,
            quiet_for=quiet,
            line=f"no progress for {_quiet(quiet)} · {self._gpu_summary()}" if hung else "",
            straggler="" if hung or not self._progressed else self._straggler(),
            last_progress=self._line,
            last_progress_age=None if self._line_at is None else max(0.0, now - self._line_at),
        )

    def _gpu_summary(self) -> str:
        means = list(self._gpus.means().values())
        if not means:
            return "GPU activity unknown"
        count = len(means)
        figure = f"{count} GPU{'' if count == 1 else 's'} at {math.fsum(means) / count:.0f} %"
        if min(means) >= BUSY_PERCENT:
            return f"{figure} (collective wait?)"
        if max(means) <= IDLE_PERCENT:
            return f"{figure} (idle)"
        return f"{figure} mean"

    def _straggler(self) -> str:
        if len(self._roles.samples) < MIN_ROLE_SAMPLES:
            return ""
        means = sorted(self._roles.means().items(), key=lambda item: (item[1], str(item[0])))
        if len(means) < 2:
            return ""
        (idle, low), (busy, high) = means[0], means[-1]
        if low > IDLE_PERCENT or high < WORKING_PERCENT:
            return ""
        return f"straggler? {idle} GPUs at {low:.0f} % while {busy}'s are at {high:.0f} %"


def _quiet(seconds: float) -> str:
    """Whole minutes from one minute on, seconds below: what a glance at the status bar needs."""
    return f"{int(seconds // 60)} min" if seconds >= 60 else f"{int(seconds)} s"
