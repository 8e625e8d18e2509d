"""Background work under the worker's (and the api's) gevent pool: a greenlet, which a stop can
interrupt in the middle of a socket wait. Outside gevent (tests, `mini-n8n run`), a thread."""

from __future__ import annotations

import sys
from collections.abc import Callable

from engine.services import spawn_thread


def spawn(fn: Callable[[], None]) -> Callable[[], None]:
    if not gevent_patched():
        return spawn_thread(fn)
    import gevent

    greenlet = gevent.spawn(fn)
    return lambda: greenlet.kill(block=False)


def gevent_patched() -> bool:
    if "gevent" not in sys.modules:
        return False
    from gevent import monkey

    return bool(monkey.is_module_patched("socket") and monkey.is_module_patched("threading"))
