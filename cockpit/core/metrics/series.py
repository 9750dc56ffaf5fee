"""Provides the series that a metrics parser's samples make: per key, (step, value) points in step order,
bounded, with exact statistics and the NaN / Inf alarm; and rows of one step each, for printing.

Caps, so the memory stays fixed whatever the log holds:

- `max_points` points kept per key (default 8,192, 16 bytes each: 128 KiB a key). Past it every other
  kept point is dropped and from then on only every 2nd (4th, 8th ...) new step is kept, so the points
  stay spread evenly over the whole run; the newest point is always there (`points()` ends with it).
  Count, first, last, min, max and the non-finite alarm are over every value read, kept or not.
- `max_keys` keys (default 1,024): samples of any further key are dropped and counted in `refused`.
- Keys are at most `metrics.MAX_KEY_CHARS` characters (the parser skips longer ones).

Steps: a series keeps its points in step order. The same step again replaces its value (a line printed
twice); a step before the last one drops the points from that step on and goes on from there (a run
resumed from a checkpoint logs those steps again).
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from fnmatch import fnmatchcase
from heapq import merge

from cockpit.core.metrics.lines import Sample

DEFAULT_MAX_POINTS = 8192
DEFAULT_MAX_KEYS = 1024
_MAX_DECISIONS = 8192
"""Keys whose `--keys` verdict is remembered (beyond that, patterns are matched again each time)."""


@dataclass(frozen=True, slots=True)
class NonFinite:
    """A key that went NaN or infinite: the alarm the status bar shows."""

    key: str
    step: int
    """The first step with a NaN or infinite value."""
    value: float
    """That value (nan, inf or -inf)."""
    latest_step: int
    """The last step with a NaN or infinite value."""
    count: int
    """How many of its values were NaN or infinite."""
    now: bool
    """Its last value is NaN or infinite (not recovered)."""

    @property
    def line(self) -> str:
        """`critic/score/mean went nan at step 812` (`... (now finite again)` once it recovered)."""
        said = f"{self.key} went {self.value} at step {self.step}"
        return said if self.now else f"{said} (finite again since)"


@dataclass(frozen=True, slots=True)
class Summary:
    """One key's statistics over every value read."""

    key: str
    count: int
    first_step: int
    last_step: int
    first: float
    last: float
    minimum: float | None
    """Smallest finite value; None when no value was finite."""
    maximum: float | None
    kept: int
    """Points kept (at most the store's `max_points`, plus the newest)."""
    stride: int
    """1: every step is kept; N: one step in N (the series was thinned)."""
    nonfinite: NonFinite | None


class Series:
    """One key's points, in step order, at most `max_points` of them (see the module docstring)."""

    __slots__ = (
        "_arrivals",
        "_nonfinite_count",
        "_nonfinite_first",
        "_nonfinite_last",
        "_steps",
        "_values",
        "count",
        "first",
        "first_step",
        "key",
        "last",
        "last_step",
        "max_points",
        "maximum",
        "minimum",
        "stride",
    )

    def __init__(self, key: str, max_points: int = DEFAULT_MAX_POINTS) -> None:
        if max_points < 2:
            raise ValueError(f"max_points must be at least 2, not {max_points}")
        self.key = key
        self.max_points = max_points
        # Arrays of C numbers: 16 bytes a point and nothing for the cyclic GC to walk.
        self._steps = array("q")
        self._values = array("d")
        self.stride = 1
        self._arrivals = 0
        self.count = 0
        self.first_step = self.last_step = 0
        self.first = self.last = math.nan
        self.minimum = math.inf
        self.maximum = -math.inf
        self._nonfinite_first: tuple[int, float] | None = None
        self._nonfinite_last = 0
        self._nonfinite_count = 0

    def add(self, step: int, value: float) -> None:
        if not self.count:
            self.first_step, self.first = step, value
        elif step <= self.last_step:
            steps = self._steps
            if step == self.last_step:  # printed again: the new value stands
                if steps and steps[-1] == step:
                    self._values[-1] = value
                self._read(step, value)
                return
            cut = bisect_left(steps, step)  # a resumed run: it goes on from STEP
            del steps[cut:], self._values[cut:]
        arrivals = self._arrivals
        if arrivals % self.stride == 0:
            if len(self._steps) >= self.max_points:
                self._steps = self._steps[::2]
                self._values = self._values[::2]
                self.stride *= 2
            if arrivals % self.stride == 0:
                self._steps.append(step)
                self._values.append(value)
        self._arrivals = arrivals + 1
        self._read(step, value)

    def _read(self, step: int, value: float) -> None:
        """Count VALUE in the statistics (every value read, kept or not)."""
        self.count += 1
        self.last_step, self.last = step, value
        if -math.inf < value < math.inf:
            if value < self.minimum:
                self.minimum = value
            if value > self.maximum:
                self.maximum = value
        else:  # NaN compares false with everything: it lands here too
            if self._nonfinite_first is None:
                self._nonfinite_first = (step, value)
            self._nonfinite_last = step
            self._nonfinite_count += 1

    def points(self) -> list[tuple[int, float]]:
        """The kept points in step order, the newest one always last."""
        out = list(zip(self._steps, self._values, strict=True))
        if self.count and (not out or out[-1][0] != self.last_step):
            out.append((self.last_step, self.last))
        return out

    def nonfinite(self) -> NonFinite | None:
        if self._nonfinite_first is None:
            return None
        step, value = self._nonfinite_first
        return NonFinite(
            self.key, step, value, self._nonfinite_last, self._nonfinite_count, not math.isfinite(self.last)
        )

    def summary(self) -> Summary:
        finite = self.minimum <= self.maximum
        return Summary(
            key=self.key,
            count=self.count,
            first_step=self.first_step,
            last_step=self.last_step,
            first=self.first,
            last=self.last,
            minimum=self.minimum if finite else None,
            maximum=self.maximum if finite else None,
            kept=len(self.points()),
            stride=self.stride,
            nonfinite=self.nonfinite(),
        )


class KeyFilter:
    """Which keys to keep: exact names, or shell patterns (`critic/score/*`, `timing_s/?en`)."""

    def __init__(self, wanted: Iterable[str]) -> None:
        self.names = [w for w in wanted if w]
        self._exact = {w for w in self.names if not any(c in w for c in "*?[")}
        self._patterns = [w for w in self.names if w not in self._exact]
        self._decided: dict[str, bool] = {}

    @property
    def exact(self) -> bool:
        """Only exact names: the columns are known before any line is read."""
        return not self._patterns

    def __call__(self, key: str) -> bool:
        decided = self._decided.get(key)
        if decided is None:
            decided = key in self._exact or any(fnmatchcase(key, p) for p in self._patterns)
            if len(self._decided) < _MAX_DECISIONS:
                self._decided[key] = decided
        return decided


class SeriesStore:
    """Every key's series, in the order keys were first seen."""

    def __init__(
        self,
        max_points: int = DEFAULT_MAX_POINTS,
        max_keys: int = DEFAULT_MAX_KEYS,
        keys: KeyFilter | None = None,
    ) -> None:
        self.max_points = max_points
        self.max_keys = max_keys
        self.wanted = keys
        self._series: dict[str, Series] = {}
        self._alarmed: dict[str, None] = {}
        """Keys that had a NaN or infinite value, in the order they first had one."""
        self.refused = 0
        """Samples dropped because `max_keys` keys were already kept."""
        self.version = 0
        """Bumped by every `extend` that kept a sample (caches keyed on it are valid while it stands)."""
        self.last_step: int | None = None

    def extend(self, samples: Iterable[Sample]) -> list[Sample]:
        """Keep SAMPLES (those of wanted keys, while there is room); returns the ones kept."""
        kept: list[Sample] = []
        series, wanted = self._series, self.wanted
        for sample in samples:
            step, key, value = sample
            one = series.get(key)
            if one is None:
                if wanted is not None and not wanted(key):
                    continue
                if len(series) >= self.max_keys:
                    self.refused += 1
                    continue
                one = series[key] = Series(key, self.max_points)
            one.add(step, value)
            if not -math.inf < value < math.inf:
                self._alarmed.setdefault(key)
            kept.append(sample)
        if kept:
            self.last_step = kept[-1][0]
            self.version += 1
        return kept

    def keys(self) -> list[str]:
        return list(self._series)

    def __len__(self) -> int:
        return len(self._series)

    def __contains__(self, key: object) -> bool:
        return key in self._series

    def __getitem__(self, key: str) -> Series:
        return self._series[key]

    def get(self, key: str) -> Series | None:
        return self._series.get(key)

    def summaries(self) -> list[Summary]:
        return [s.summary() for s in self._series.values()]

    def nonfinite(self) -> list[NonFinite]:
        """The keys that went NaN or infinite, in the order they did, each with its first such step."""
        out = [self._series[key].nonfinite() for key in self._alarmed]
        return [alarm for alarm in out if alarm is not None]

    def thinned(self) -> list[str]:
        """Keys whose series kept only one step in `stride` (more steps than `max_points`)."""
        return [s.key for s in self._series.values() if s.stride > 1]

    def rows(self, keys: list[str]) -> Iterator[tuple[int, dict[str, float]]]:
        """(step, {key: value}) for every step any of KEYS has a kept point at, in step order; memory for
        one row at a time (the series are merged, not gathered)."""
        names = [key for key in keys if key in self._series]
        columns = [_tagged(self._series[key].points(), index) for index, key in enumerate(names)]
        step: int | None = None
        row: dict[str, float] = {}
        for at, index, value in merge(*columns):
            if at != step:
                if step is not None:
                    yield step, row
                step, row = at, {}
            row[names[index]] = value
        if step is not None:
            yield step, row


def _tagged(points: list[tuple[int, float]], index: int) -> Iterator[tuple[int, int, float]]:
    return ((step, index, value) for step, value in points)


class StepRows:
    """Samples grouped into one row per step as they arrive: a row is given out when a sample of another
    step comes, or on `flush` (the stream went quiet, or ended). A step's samples that come after its row
    was given out make a second row for that step."""

    def __init__(self) -> None:
        self._step: int | None = None
        self._row: dict[str, float] = {}

    def add(self, samples: Iterable[Sample]) -> list[tuple[int, dict[str, float]]]:
        done: list[tuple[int, dict[str, float]]] = []
        for step, key, value in samples:
            if step != self._step:
                done += self.flush()
                self._step = step
            self._row[key] = value
        return done

    def flush(self) -> list[tuple[int, dict[str, float]]]:
        if self._step is None or not self._row:
            return []
        done = [(self._step, self._row)]
        self._step, self._row = None, {}
        return done


def format_value(value: float) -> str:
    """A value as text that reads back to the same float: `0.512`, `3406` (a whole number), `1e-06`,
    `nan`, `inf`, `-inf`."""
    if not math.isfinite(value):
        return str(value)
    if value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return repr(value)
