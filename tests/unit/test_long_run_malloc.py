"""`malloc_for_a_long_run` (the TUI and `cockpit alerts` call it at start): after it, large blocks freed
in the middle of the heap go back to the system. Without it, glibc raises its mmap threshold to the
largest block freed so far, and such blocks stay held: the soak's RSS growth (BENCHMARKS.md, Soak)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

PROBE = r"""
import sys
from cockpit.cli.common import malloc_for_a_long_run

def rss_mib():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) // 1024

if sys.argv[1] == "on":
    assert malloc_for_a_long_run()
big = b"\x01" * (20 << 20)
del big  # an mapped block of 20 MiB freed: glibc (left alone) serves blocks up to that size from the heap
before = rss_mib()
blocks = [b"\x01" * (5 << 20) for _ in range(6)]
del blocks[:5]  # 25 MiB freed below the last block
print(rss_mib() - before)
"""


def held_mib(mode: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, mode], cwd=REPO, capture_output=True, text=True, timeout=60, check=True
    )
    return int(done.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_large_blocks_freed_go_back_to_the_system() -> None:
    left_alone, tuned = held_mib("off"), held_mib("on")
    assert left_alone >= 25, left_alone  # the probe shows what it is meant to
    assert tuned <= 10, tuned  # only the last 5 MiB block is still held
