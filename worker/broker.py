"""Celery's Redis broker, without the per-call costs kombu pays under our load.

kombu's Redis channel builds a new `redis.Redis` for every publish and for each half of a task's
ack bookkeeping (the unacked hash and its index, written when a task is received and again when
it is acknowledged): about 50 us each, since a client copies a table of some 170 response
callbacks when it is built, on every message. A client is only its connection pool and that
table, safe to share between greenlets and threads; each channel keeps one per pool.
"""

from __future__ import annotations

import threading

_installed = threading.Lock()
_done = False


def install() -> None:
    """Give kombu's Redis channels one client each (idempotent; a process-wide change, made
    before any channel opens)."""
    global _done
    with _installed:
        if _done:
            return
        from kombu.transport import redis as kombu_redis

        build = kombu_redis.Channel._create_client

        def _create_client(self, asynchronous=False):
            if asynchronous:
                return build(self, asynchronous=True)
            client = self.__dict__.get("_mini_n8n_client")
            if client is None or client.connection_pool is not self.pool:
                client = self.__dict__["_mini_n8n_client"] = build(self)
            return client

        # setattr: a plain assignment to a method is refused by mypy
        setattr(kombu_redis.Channel, "_create_client", _create_client)  # noqa: B010
        _done = True
