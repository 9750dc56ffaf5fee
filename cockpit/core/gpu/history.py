"""Provides the utilization history of every GPU: the last 10 minutes at one-second resolution, in memory.

One byte per second per GPU (0-100, or `NO_SAMPLE`), so 1,024 nodes x 8 GPUs cost 4.9 MB. A reading holds
until the next one (Ray's reporter samples every 5 s, the high-resolution agent every second); a gap
longer than `HOLD_SECONDS` is left empty rather than drawn as if the GPU had kept its last value.
Written by the poller's thread and read by the UI: a sparkline drawn mid-write may show one reading
early, never a wrong one.
"""

from __future__ import annotations

from collections.abc import Callable

from cockpit.core.snapshots import NA, Metric

HISTORY_SECONDS = 600
"""How far back the sparklines reach."""
HOLD_SECONDS = 30
"""The longest gap a reading is held across; beyond it the gap shows as "no sample"."""
NO_SAMPLE = 255

_FILL = [bytes([value]) * HISTORY_SECONDS for value in range(256)]
"""Runs of one value, sliced to fill a gap without a Python loop per second."""
_NO_SAMPLE_AS_ZERO = bytes(range(255)) + b"\x00"


class UtilHistory:
    """Utilization per GPU key, one ring of `HISTORY_SECONDS` bytes each."""

    def __init__(self, seconds: int = HISTORY_SECONDS) -> None:
        self.seconds = seconds
        self._rings: dict[str, bytearray] = {}
        self._last: dict[str, int] = {}
        """The newest second written per key."""

    def __len__(self) -> int:
        return len(self._rings)

    def record(self, key: str, when: float, utilization: Metric) -> None:
        """Write one reading taken at `when` (posix seconds); an older one than the newest is ignored."""
        second = int(when)
        value = NO_SAMPLE if utilization is NA else max(0, min(100, round(utilization)))
        ring = self._rings.get(key)
        last = self._last.get(key)
        size = self.seconds
        if ring is None:
            ring = self._rings[key] = bytearray(_FILL[NO_SAMPLE][:size])
        elif last is not None:
            if second < last:
                return
            gap = second - last
            if gap > 1:
                fill = ring[last % size] if gap <= HOLD_SECONDS else NO_SAMPLE
                self._fill(ring, last + 1, min(gap - 1, size), fill)
        ring[second % size] = value
        self._last[key] = second

    def _fill(self, ring: bytearray, start: int, count: int, value: int) -> None:
        size = self.seconds
        begin = start % size
        first = min(count, size - begin)
        ring[begin : begin + first] = _FILL[value][:first]
        if count > first:
            ring[0 : count - first] = _FILL[value][: count - first]

    def forget_unless(self, keep: Callable[[str], bool]) -> None:
        """Drop the history of the GPUs `keep` says no to (their node left the cluster for good)."""
        for key in [k for k in self._rings if not keep(k)]:
            del self._rings[key]
            self._last.pop(key, None)

    def series(self, key: str, now: float, buckets: int) -> list[int | None]:
        """The `HISTORY_SECONDS` up to `now` in `buckets` equal slices, oldest first: the highest reading
        of each slice (a short burst of work stays visible), None where a slice holds no sample."""
        ring = self._rings.get(key)
        last = self._last.get(key)
        if ring is None or last is None or buckets <= 0:
            return [None] * max(0, buckets)
        size = self.seconds
        cut = (last + 1) % size
        window = bytes(ring[cut:] + ring[:cut])
        """Seconds last-size+1 .. last, oldest first."""
        shift = min(max(0, int(now) - last), size)
        if shift:
            window = window[shift:] + _FILL[NO_SAMPLE][:shift]
        out: list[int | None] = []
        for b in range(buckets):
            chunk = window[(b * size) // buckets : ((b + 1) * size) // buckets]
            if not chunk or chunk.count(NO_SAMPLE) == len(chunk):
                out.append(None)
            else:
                out.append(max(chunk.translate(_NO_SAMPLE_AS_ZERO)))
        return out
