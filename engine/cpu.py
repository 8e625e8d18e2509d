"""Checkpoints: where a run that computes rather than waits is stopped, and lets others run.

A run busy computing (expressions over large items, hundreds of nodes) makes no I/O, so under
gevent nothing else on its process runs meanwhile: not the other executions' streams, not the
timer of its own wall-clock timeout. So the engine calls its checkpoint between nodes, per item
of a node's loop, at every expression and every few thousand steps inside one. A checkpoint
raises ExecutionCanceled if the execution was stopped (the timeout stops it from outside), and
at most every PAUSE_SECONDS it checks the run's CPU time against its bound
(MINI_N8N_EXECUTION_CPU_SECONDS) and lets the rest of the process run.

The CPU time is read from the clock the runner lends (Services.cpu_clock): a thread's CPU time,
or under gevent the calling greenlet's own (runtime/cpu_clock.py). Work done for the execution
elsewhere, which that clock cannot see (a Code node's JavaScript, in a process of its own), is
charged to it once done, and bounds the time that work may take beforehand (`left`). Each run
of an execution is bounded on its own: one that waits for a chat reply starts again when it
resumes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from engine.errors import ExecutionCanceled, ExecutionLimitExceeded
from engine.services import Services

PAUSE_SECONDS = 0.005  # at most this long between two looks at the CPU time and two pauses


def paced(pause: Callable[[], None]) -> Callable[[], None]:
    """A checkpoint that only pauses, at most every PAUSE_SECONDS (the api's preview: no
    execution to stop, but other requests to serve)."""
    due = time.monotonic() + PAUSE_SECONDS

    def checkpoint() -> None:
        nonlocal due
        if time.monotonic() >= due:
            pause()
            due = time.monotonic() + PAUSE_SECONDS

    return checkpoint


class Checkpoints:
    def __init__(self, services: Services, cancel: threading.Event):
        self.limit = services.cpu_seconds
        self.clock = services.cpu_clock
        self.pause = services.pause
        self.cancel = cancel
        self.started = self.clock()
        self.charged = 0.0  # CPU seconds used on the execution's behalf off this clock
        self.next_look = time.monotonic() + PAUSE_SECONDS

    def __call__(self) -> None:
        if self.cancel.is_set():
            raise ExecutionCanceled()
        if time.monotonic() < self.next_look:
            return
        self.check_cpu()
        self.pause()
        self.next_look = time.monotonic() + PAUSE_SECONDS
        if self.cancel.is_set():  # the pause may have let the timeout fire
            raise ExecutionCanceled()

    def used(self) -> float:
        return self.clock() - self.started + self.charged

    def charge(self, seconds: float) -> None:
        """Count CPU time spent for the execution where its clock does not see it, and stop
        the execution if that takes it over its bound."""
        self.charged += max(seconds, 0.0)
        self.check_cpu()

    def left(self) -> float | None:
        """CPU seconds the execution may still use (None: unbounded)."""
        return None if self.limit is None else max(self.limit - self.used(), 0.0)

    def check_cpu(self) -> None:
        if self.limit is not None and self.used() > self.limit:
            raise ExecutionLimitExceeded(
                f"The execution used more than {self.limit:g} s of CPU time "
                "(MINI_N8N_EXECUTION_CPU_SECONDS)."
            )
