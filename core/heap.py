"""Handing freed heap memory back to the system.

glibc's malloc keeps what a process frees, for reuse, and returns only the top of its heap on
its own. When thousands of chat streams open at once, the short-lived allocations of their
starts (request bodies, parsed headers, Redis replies, Celery messages) are freed between the
long-lived ones of the streams they opened, and those pages stay resident (docs/performance.md
says how much). So the api calls it on a timer. Where the C library has no `malloc_trim` (musl,
macOS) there is nothing to call.
"""

from __future__ import annotations

import ctypes
import gc
import logging
from collections.abc import Callable

log = logging.getLogger("mini_n8n.heap")

# Often enough that a burst's leftovers do not stay long; rare enough that the call's cost, which
# grows with the heap, is nothing beside the time between two (docs/performance.md).
TRIM_SECONDS = 10.0


def trimmer() -> Callable[[], None] | None:
    """A call that returns the heap's free pages to the system, or None on a C library
    without `malloc_trim`."""
    try:
        malloc_trim = ctypes.CDLL(None).malloc_trim  # the process's own C library
    except (AttributeError, OSError):
        return None
    malloc_trim.argtypes = [ctypes.c_size_t]
    malloc_trim.restype = ctypes.c_int

    def trim() -> None:
        malloc_trim(0)  # 0: keep no padding at the top of the heap

    return trim


def trim_forever(sleep: Callable[[float], object], seconds: float = TRIM_SECONDS) -> None:
    """Trim every `seconds` until the process ends (run it in a greenlet of its own)."""
    trim = trimmer()
    if trim is None:
        log.debug("no malloc_trim in this C library: freed memory stays with the allocator")
        return
    while True:
        sleep(seconds)
        trim()


# Python's cyclic collector runs its youngest generation after every 700 container objects
# allocated and not yet freed, and the oldest one as the others fill up, each time walking every
# object the process holds. A worker or an api holds some hundred thousand long-lived ones
# (Celery, Flask, the node modules), all loaded before the first message.
GC_GEN0_THRESHOLD = 20_000


def settle() -> None:
    """Once a process has loaded what it keeps for life (its warm start): the collector stops
    walking those objects (`gc.freeze`) and collects its youngest generation less often. A chat
    message allocates thousands of short-lived containers, and a collection of the oldest one
    landing in a message walked the whole heap (docs/performance.md)."""
    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GC_GEN0_THRESHOLD, gen1, gen2)
