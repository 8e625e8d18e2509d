"""Background work under the worker's (and the api's) gevent pool: a greenlet, which a stop can
interrupt in the middle of a socket wait. Outside gevent (tests, `mini-n8n run`), a thread."""

from __future__ import annotations

import sys
from collections.abc import Callable

from engine.services import spawn_thread


def spawn(fn: Callable[[], None]) -> Callable[[], None]:
    if not _gevent_patched():
        return spawn_thread(fn)
    import gevent

    greenlet = gevent.spawn(fn)
    return lambda: greenlet.kill(block=False)


def _gevent_patched() -> bool:
    if "gevent" not in sys.modules:
        return False
    from gevent import monkey

    return bool(monkey.is_module_patched("socket") and monkey.is_module_patched("threading"))


def start_os_thread(fn: Callable[[], None]) -> None:
    """Run `fn` on an OS thread of its own, even under gevent's monkey-patching (which makes
    `threading.Thread` a greenlet): it then gets the interpreter every few milliseconds
    whatever the greenlets do. Under gevent, the thread runs a hub of its own, so the sockets it
    opens (patched) wait on that hub: it must open its own, never share a greenlet's."""
    if _gevent_patched():
        from gevent import monkey

        start_new_thread = monkey.get_original("_thread", "start_new_thread")
        start_new_thread(fn, ())
        return
    import threading

    threading.Thread(target=fn, name="heartbeat", daemon=True).start()
