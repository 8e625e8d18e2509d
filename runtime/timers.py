"""Time handed to the rest of the process: a call later, a pause."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from runtime.patching import gevent_patched

# A pause long enough for one turn of gevent's loop: gevent.sleep(0) only runs the greenlets
# already scheduled, without polling sockets or timers, so a chat waiting on its model's next
# token would wait until the computing greenlet finished. Taken every few milliseconds of
# computing (engine/cpu.py), and only while others wait.
PAUSE_SECONDS = 0.0005


def call_later(seconds: float, fn: Callable[[], None]) -> Callable[[], None]:
    """Call `fn` in `seconds` unless the returned cancel is called first: a timer of gevent's
    loop, where a threading.Timer is a thread (a greenlet under gevent, with its own events:
    several times the cost, once per execution)."""
    if not gevent_patched():
        timer = threading.Timer(seconds, fn)
        timer.daemon = True
        timer.start()
        return timer.cancel
    import gevent

    greenlet = gevent.spawn_later(seconds, fn)
    return lambda: greenlet.kill(block=False)


def pause() -> None:
    """Let the rest of the process run: under gevent one turn of the loop (sockets and timers
    polled), under threads a yield of the GIL."""
    time.sleep(PAUSE_SECONDS if gevent_patched() else 0)
