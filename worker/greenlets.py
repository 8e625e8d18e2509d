"""Background work under the worker's (and the api's) gevent pool: a greenlet, which a stop can
interrupt in the middle of a socket wait. Outside gevent (tests, `mini-n8n run`), a thread."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable

from engine.services import spawn_thread


def spawn(fn: Callable[[], None]) -> Callable[[], None]:
    if not gevent_patched():
        return spawn_thread(fn)
    import gevent

    greenlet = gevent.spawn(fn)
    return lambda: greenlet.kill(block=False)


def call_later(seconds: float, fn: Callable[[], None]) -> Callable[[], None]:
    """Call `fn` in `seconds` unless the returned cancel is called first: a timer of gevent's
    loop (10 us to start and cancel), where a threading.Timer is a thread, a greenlet under
    gevent, with its own events (110 us, measured: once per execution)."""
    if not gevent_patched():
        timer = threading.Timer(seconds, fn)
        timer.daemon = True
        timer.start()
        return timer.cancel
    import gevent

    greenlet = gevent.spawn_later(seconds, fn)
    return lambda: greenlet.kill(block=False)


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


# A pause long enough for one turn of gevent's loop: gevent.sleep(0) only runs the greenlets
# already scheduled, without polling sockets or timers, so a chat waiting on its model's next
# token would wait until the computing greenlet finished. Every 5 ms of computing (engine/cpu.py)
# this costs a tenth at most, and only while others wait.
PAUSE_SECONDS = 0.0005


def pause() -> None:
    """Let the rest of the process run: under gevent one turn of the loop (sockets and timers
    polled), under threads a yield of the GIL."""
    time.sleep(PAUSE_SECONDS if gevent_patched() else 0)


_patched = False  # once patched, a process stays so


def gevent_patched() -> bool:
    global _patched
    if _patched or "gevent" not in sys.modules:
        return _patched
    from gevent import monkey

    _patched = bool(monkey.is_module_patched("socket") and monkey.is_module_patched("threading"))
    return _patched


def start_os_thread(fn: Callable[[], None]) -> None:
    """Run `fn` on an OS thread of its own, even under gevent's monkey-patching (which makes
    `threading.Thread` a greenlet): it then gets the interpreter every few milliseconds
    whatever the greenlets do. Under gevent, the thread runs a hub of its own, so the sockets it
    opens (patched) wait on that hub: it must open its own, never share a greenlet's."""
    if gevent_patched():
        from gevent import monkey

        start_new_thread = monkey.get_original("_thread", "start_new_thread")
        start_new_thread(fn, ())
        return
    import threading

    threading.Thread(target=fn, name="heartbeat", daemon=True).start()


def use_unpatched_poll() -> None:
    """Under gevent, the model client looks at its pooled sockets with the C library's poll
    (engine/model_connection.py): a look that never waits, where gevent's took a turn of its
    loop."""
    if not gevent_patched():
        return
    from gevent.monkey import get_original

    from engine import model_connection

    model_connection.poll = get_original("select", "poll")
