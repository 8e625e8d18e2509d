"""CPU time per task (thread or greenlet): what bounds an execution's CPU (engine/cpu.py) reads.

With threads, a thread's CPU time is its own (time.thread_time). Under gevent every greenlet of a
process shares one thread, so the thread's clock would charge an execution with the work of every
other execution that ran while it waited on Redis or a model. Here each greenlet switch charges
the thread's CPU time since the previous switch to the greenlet that was running (greenlet's
trace hook, chained to any other), so a greenlet's clock counts its own work only: from the
first time it reads the clock, which is all an execution's bound compares (engine/cpu.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from runtime.patching import gevent_patched


def task_clock() -> Callable[[], float]:
    """The clock to lend executions in this process: per greenlet under gevent, else per thread."""
    if gevent_patched():
        return GreenletClock.for_this_thread()
    return time.thread_time


class GreenletClock:
    """CPU seconds used by the calling greenlet since the clock was installed (on the greenlets
    of the thread that installed it; other threads read their own thread's CPU time)."""

    _installed: dict[int, GreenletClock] = {}
    _lock = threading.Lock()

    @classmethod
    def for_this_thread(cls) -> GreenletClock:
        with cls._lock:
            ident = threading.get_native_id()
            clock = cls._installed.get(ident)
            if clock is None:
                clock = cls._installed[ident] = cls()
            return clock

    def __init__(self) -> None:
        import greenlet

        self._greenlet = greenlet
        self._thread = threading.get_native_id()
        self._mark = time.thread_time()
        self._previous = greenlet.settrace(self._trace)

    def _trace(self, event: str, args: Any) -> None:
        # Only greenlets that read the clock are charged (an attribute on the greenlet: it goes
        # with it); a switch between two others (the hub, the outbox, a model call's reader,
        # Celery's consumer), most of a worker's switches, reads no clock at all.
        if event in ("switch", "throw"):
            origin, target = args
            used = getattr(origin, _USED, None)
            if used is not None:
                now = time.thread_time()
                setattr(origin, _USED, used + (now - self._mark))
                self._mark = now
            elif getattr(target, _USED, None) is not None:
                self._mark = time.thread_time()
        if self._previous is not None:
            self._previous(event, args)

    def __call__(self) -> float:
        if threading.get_native_id() != self._thread:
            return time.thread_time()
        current = self._greenlet.getcurrent()
        used = getattr(current, _USED, None)
        now = time.thread_time()
        if used is None:  # charged from now on; what it used before, nobody asked about
            setattr(current, _USED, 0.0)
            self._mark = now
            return 0.0
        return used + (now - self._mark)


_USED = "_mini_n8n_cpu_used"
