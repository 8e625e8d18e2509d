"""Whether this process runs under gevent's monkey-patching, and what it patched away."""

from __future__ import annotations

import select
import sys
from collections.abc import Callable
from typing import Any

_patched = False  # once patched, a process stays so


def gevent_patched() -> bool:
    global _patched
    if _patched or "gevent" not in sys.modules:
        return _patched
    from gevent import monkey

    _patched = bool(monkey.is_module_patched("socket") and monkey.is_module_patched("threading"))
    return _patched


def unpatched_poll() -> Callable[[], Any] | None:
    """select.poll as the C library gives it: a look at a socket that never waits. Under gevent
    its patched poll took a timer and a turn of the loop for each look, and the model client
    looks at every idle pooled connection on every request (models/sockets.py). None where the
    platform has no poll."""
    if gevent_patched():
        from gevent.monkey import get_original

        return get_original("select", "poll")
    return getattr(select, "poll", None)
