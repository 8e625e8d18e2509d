"""Work started beside the caller: a greenlet under gevent (which a stop can interrupt in the
middle of a socket wait), a daemon thread elsewhere; and an OS thread whatever the runtime."""

from __future__ import annotations

import threading
from collections.abc import Callable

from runtime.patching import gevent_patched


def spawn(fn: Callable[[], None]) -> Callable[[], None]:
    """Run `fn` in the background; returns how to interrupt it. A thread cannot be interrupted:
    its stop does nothing, and `fn` notices it is no longer wanted at its next step."""
    if not gevent_patched():
        threading.Thread(target=fn, daemon=True).start()
        return lambda: None
    import gevent

    greenlet = gevent.spawn(fn)
    return lambda: greenlet.kill(block=False)


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
    threading.Thread(target=fn, name="heartbeat", daemon=True).start()
