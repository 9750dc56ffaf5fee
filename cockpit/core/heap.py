"""Provides what a process that stays up for days (the TUI, `cockpit alerts`) asks of glibc's allocator.

Python keeps its small objects in arenas of its own (pymalloc); glibc's heap holds the larger blocks:
answers' text, log chunks, lists of many items. Two things keep that heap from growing with the hours:

- `for_a_long_run`, at start: a block of 1 MiB or more (a 17 MB node summary's text, a log window) is a
  mapping of its own, given back to the system when freed, instead of heap kept after glibc raised its
  threshold to the largest block freed so far; and the threads that decode answers share 2 arenas
  instead of one each.
- `give_back`, once a minute: the free pages inside the heap returned to the system (`malloc_trim`) when
  there are `GIVE_BACK_FROM_BYTES` of them. A burst (a log at 60,000 lines a second, the 17 MB summary
  read on a thread) leaves tens of MiB free between blocks still in use, which glibc keeps otherwise:
  the soak's RSS held 40 MiB of it after 16 minutes (BENCHMARKS.md, Soak).

Elsewhere (musl, macOS) both do nothing.
"""

from __future__ import annotations

import ctypes
import functools
import sys

M_MMAP_THRESHOLD, M_ARENA_MAX = -3, -8
"""glibc's `mallopt` parameters (malloc.h)."""
LARGE_BLOCK_BYTES = 1 << 20
MALLOC_ARENAS = 2
GIVE_BACK_FROM_BYTES = 16 << 20
"""Free bytes inside the heap from which `give_back` trims: a trim costs about 15 ms when it has tens of
MiB to return (and 0.5 ms when it has none), a look at the figures 0.06 ms."""
GIVE_BACK_EVERY_S = 60.0
"""How often a long-running process calls `give_back`."""


_MALLINFO_FIELDS = (
    "arena",
    "ordblks",
    "smblks",
    "hblks",
    "hblkhd",
    "usmblks",
    "fsmblks",
    "uordblks",
    "fordblks",
    "keepcost",
)
"""The fields of glibc's `struct mallinfo` and `mallinfo2`, in order."""


class _Mallinfo2(ctypes.Structure):
    """glibc's `struct mallinfo2` (2.33 and later): the same fields as `mallinfo`, as `size_t`."""

    _fields_ = [(name, ctypes.c_size_t) for name in _MALLINFO_FIELDS]


class _Mallinfo(ctypes.Structure):
    """glibc's older `struct mallinfo` (RHEL 8's glibc 2.28 has only this one): `int` fields."""

    _fields_ = [(name, ctypes.c_int) for name in _MALLINFO_FIELDS]


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """glibc, loaded once; None where there is none (musl, macOS)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")  # glibc's name; `ctypes.util.find_library` starts a process
        libc.mallopt  # noqa: B018 - glibc's, not musl's
        libc.malloc_trim  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


def for_a_long_run() -> bool:
    """Large blocks as mappings of their own and 2 arenas (see the module's docstring); whether it
    applied (False without glibc)."""
    libc = _libc()
    if libc is None:
        return False
    return bool(libc.mallopt(M_MMAP_THRESHOLD, LARGE_BLOCK_BYTES)) and bool(
        libc.mallopt(M_ARENA_MAX, MALLOC_ARENAS)
    )


def free_in_heap() -> int | None:
    """Bytes free inside glibc's heap (its main arena and the others), None without glibc. Reads
    `mallinfo2`, or `mallinfo` on a glibc older than 2.33 (whose `int` may wrap: then it says 0)."""
    libc = _libc()
    if libc is None:
        return None
    try:
        info2 = libc.mallinfo2
    except AttributeError:
        info = libc.mallinfo
        info.restype = _Mallinfo
        return max(0, int(info().fordblks))
    info2.restype = _Mallinfo2
    return int(info2().fordblks)


def give_back(threshold: int = GIVE_BACK_FROM_BYTES) -> int:
    """Return the heap's free pages to the system when at least THRESHOLD bytes are free in it; the bytes
    that were free when it trimmed, 0 when it did nothing."""
    free = free_in_heap()
    if free is None or free < threshold:
        return 0
    libc = _libc()
    assert libc is not None  # free_in_heap found it
    libc.malloc_trim(0)
    return free
