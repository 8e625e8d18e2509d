"""A loop that runs for the life of the process, started on first use."""

from __future__ import annotations

import threading
from collections.abc import Callable


class Background:
    """A daemon thread (a greenlet under gevent) that runs `target`, started by `ensure` on first
    use and again should it ever die (a BaseException: the loops themselves survive any
    Exception). A flag of its own says whether it runs, not Thread.is_alive(): under gevent that
    call switches to the hub and back, and the outbox asks on every token."""

    def __init__(self, target: Callable[[], None], name: str):
        self._target, self._name = target, name
        self._lock = threading.Lock()
        self._running = False
        self.thread: threading.Thread | None = None

    def ensure(self) -> None:
        if self._running:
            return
        with self._lock:
            if self._running:
                return
            self._running = True
            self.thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self.thread.start()

    def _run(self) -> None:
        try:
            self._target()
        finally:
            with self._lock:
                self._running = False
