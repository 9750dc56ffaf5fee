"""`heap.for_a_long_run` (the TUI and `cockpit alerts` call it at start): after it, large blocks freed
in the middle of the heap go back to the system. Without it, glibc raises its mmap threshold to the
largest block freed so far, and such blocks stay held: the soak's RSS growth (BENCHMARKS.md, Soak)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

RSS_MIB = r"""
import sys
from cockpit.core import heap

def rss_mib():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) // 1024
"""


def probe(code: str, arg: str) -> str:
    """What CODE printed, run after `RSS_MIB` in a fresh interpreter (its heap its own) with ARG."""
    done = subprocess.run(
        [sys.executable, "-c", RSS_MIB + code, arg],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


PROBE = r"""
if sys.argv[1] == "on":
    assert heap.for_a_long_run()
big = b"\x01" * (20 << 20)
del big  # an mapped block of 20 MiB freed: glibc (left alone) serves blocks up to that size from the heap
before = rss_mib()
blocks = [b"\x01" * (5 << 20) for _ in range(6)]
del blocks[:5]  # 25 MiB freed below the last block
print(rss_mib() - before)
"""


def held_mib(mode: str) -> int:
    return int(probe(PROBE, mode))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_large_blocks_freed_go_back_to_the_system() -> None:
    left_alone, tuned = held_mib("off"), held_mib("on")
    assert left_alone >= 25, left_alone  # the probe shows what it is meant to
    assert tuned <= 10, tuned  # only the last 5 MiB block is still held


GIVE_BACK_PROBE = r"""
assert heap.for_a_long_run()
blocks = [b"\x01" * (200 << 10) for _ in range(400)]  # 80 MiB of heap blocks (below the 1 MiB threshold)
del blocks[:-1]  # all freed but the last, which keeps the heap from shrinking at its top
before = rss_mib()
free = heap.give_back(threshold=int(sys.argv[1]) << 20)
print(free >> 20, before - rss_mib())
"""


def give_back(threshold_mib: int) -> tuple[int, int]:
    """What `heap.give_back` said it found free, and the MiB of RSS it gave back, in a fresh process."""
    free, returned = probe(GIVE_BACK_PROBE, str(threshold_mib)).split()
    return int(free), int(returned)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_free_heap_left_by_a_burst_goes_back_to_the_system() -> None:
    free, returned = give_back(16)
    assert free >= 70, free  # the 80 MiB freed are seen free inside the heap
    assert returned >= 60, returned  # and most of it leaves the process's RSS
    free, returned = give_back(1024)  # less free than the threshold: nothing done
    assert free == 0 and returned <= 2, (free, returned)
