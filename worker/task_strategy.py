"""How a gevent worker takes a run_execution task off the queue: Celery's strategy for it.

Celery hands each task message to a strategy (celery/worker/strategy.py `default`): it builds a
Request, logs "received", and the pool runs Celery's tracer around the task once the consumer
has read its next message. For our task most of that does nothing (no result is stored; no time
limit, ETA, expiry, rate limit, retry or callback is ever set; tasks are acknowledged as they
start), and it sat on every first item's path: about 0.25 ms of the 0.5 ms from the broker's
answer to the execution's claim, and a tenth of the worker's CPU per message.

A plain message takes a short path here: its body decoded once, the same "received" and
"succeeded" lines on Celery's loggers, the worker's bookkeeping of reserved and active tasks
kept (so `celery inspect active`, `revoke` and the worker's counters see it as before), and a
greenlet of the pool's own (a warm shutdown waits for it; the concurrency limit holds) that runs
at once, up to its claim on Redis, before the consumer turns its loop. Anything else goes to
Celery's strategy unchanged: a message with an ETA, an expiry, a time limit or callbacks, a
revoked id (or any revocation by stamped headers), task events on (Flower turns them on, and is
then told of every task as before), receivers of Celery's task signals, another serializer or
protocol, or another pool.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import orjson

# Celery's own loggers (and, in `lean`, its formats): a task's lines read and route as always.
_strategy_log = logging.getLogger("celery.worker.strategy")
_trace_log = logging.getLogger("celery.app.trace")
_EMBED_KEYS = ("callbacks", "errbacks", "chain", "chord")


class LeanRequest:
    """What Celery's worker state and remote control read of a task (`id`, `name`, `info`,
    `terminate`), without the parsing Celery's Request does for what this task never uses."""

    __slots__ = (
        "id",
        "name",
        "args",
        "argsrepr",
        "kwargsrepr",
        "hostname",
        "delivery_info",
        "time_start",
        "worker_pid",
        "acknowledged",
        "received_told",
        "greenlet",
        "_ack",
        "_connection_errors",
        "__weakref__",  # Celery's worker state keeps requests in weak sets
    )

    def __init__(self, message, args: list, hostname: str, ack, connection_errors) -> None:
        headers = message.headers
        self.id: str = headers["id"]
        self.name: str = headers["task"]
        self.args = args
        self.argsrepr = headers.get("argsrepr") or ""
        self.kwargsrepr = headers.get("kwargsrepr") or "{}"
        self.hostname = hostname
        info = message.delivery_info
        self.delivery_info = {
            key: info.get(key) for key in ("exchange", "routing_key", "priority", "redelivered")
        }
        self.time_start: float | None = None
        self.worker_pid: int | None = None
        self.acknowledged = False
        self.received_told = False  # its "received" line was logged
        self.greenlet: Any = None
        self._ack = ack
        self._connection_errors = connection_errors

    def acknowledge(self) -> None:
        if not self.acknowledged:
            self._ack(_strategy_log, self._connection_errors)  # as Celery's Request calls it
            self.acknowledged = True

    def info(self, safe: bool = False) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "args": self.argsrepr if safe else self.args,
            "kwargs": self.kwargsrepr if safe else {},
            "type": self.name,
            "hostname": self.hostname,
            "time_start": self.time_start,
            "acknowledged": self.acknowledged,
            "delivery_info": self.delivery_info,
            "worker_pid": self.worker_pid,
        }

    def terminate(self, pool, signal=None) -> None:
        """`revoke(terminate=True)`: as Celery's gevent pool does, the greenlet is killed."""
        if self.greenlet is not None:
            self.greenlet.kill(block=False)

    def humaninfo(self) -> str:
        return f"{self.name}[{self.id}]"

    __str__ = humaninfo


def lean(task, app, consumer, **kwargs):
    """The strategy factory (`Task.Strategy`): Celery calls it once per consumer start."""
    from celery import signals
    from celery.app.trace import LOG_FAILURE, LOG_RECEIVED, LOG_SUCCESS
    from celery.worker import state as worker_state
    from celery.worker.strategy import default

    fallback = default(task, app, consumer, **kwargs)
    if not getattr(consumer.pool, "is_green", False) or task.acks_late:
        return fallback
    if (
        task.time_limit
        or task.soft_time_limit
        or (task.rate_limit and not consumer.disable_rate_limits)
    ):
        return fallback
    signalled = (
        signals.task_received,
        signals.task_prerun,
        signals.task_postrun,
        signals.task_success,
        signals.task_failure,
    )
    if any(signal.receivers for signal in signalled):
        return fallback

    import gevent

    eventer = consumer.event_dispatcher
    revoked = worker_state.revoked
    run = task.run

    def task_events_on() -> bool:
        return bool(eventer and eventer.enabled) and (
            not eventer.groups or "task" in eventer.groups
        )

    def plain(message, body, ack, callbacks) -> LeanRequest | None:
        """The message's request if it is one the short path runs as Celery would."""
        headers = message.headers
        if (
            body is not None  # decoded already: an older protocol
            or callbacks  # Celery's autoscaler listens
            or message.content_type != "application/json"
            or message.content_encoding != "utf-8"
            or headers.get("eta")
            or headers.get("expires")
            or any(headers.get("timelimit") or ())
            or headers.get("id") in revoked
            or worker_state.revoked_stamps  # revoked by stamped headers: Celery checks those
            or task_events_on()
        ):
            return None
        args, task_kwargs, embed = orjson.loads(message.body)
        if not isinstance(args, list) or task_kwargs or any(embed.get(k) for k in _EMBED_KEYS):
            return None
        return LeanRequest(message, args, consumer.hostname, ack, consumer.connection_errors)

    def told_received(request: LeanRequest) -> None:
        """Its "received" line, once, and always before the line that says how it ended."""
        if request.received_told:
            return
        request.received_told = True
        if _strategy_log.isEnabledFor(logging.INFO):
            context = {
                "id": request.id,
                "name": request.name,
                "args": request.argsrepr,
                "kwargs": request.kwargsrepr,
                "eta": None,
            }
            _strategy_log.info(LOG_RECEIVED, context, extra={"data": context})

    def execute(request: LeanRequest) -> None:
        request.worker_pid = id(gevent.getcurrent())
        request.time_start = time.time()
        worker_state.task_accepted(request)
        request.acknowledge()
        started = time.monotonic()
        try:
            result = run(*request.args)
        except BaseException as exc:
            told_received(request)
            worker_state.task_ready(request)
            context: dict[str, Any] = {
                "id": request.id,
                "name": request.name,
                "description": "raised unexpected",
                "exc": repr(exc),
            }
            _trace_log.error(LOG_FAILURE, context, exc_info=True, extra={"data": context})
            if not isinstance(exc, Exception):
                raise  # GreenletExit (a terminate), a KeyboardInterrupt: the greenlet ends
            return
        told_received(request)
        worker_state.task_ready(request, successful=True)
        if _trace_log.isEnabledFor(logging.INFO):
            context = {
                "id": request.id,
                "name": request.name,
                "return_value": repr(result),
                "runtime": time.monotonic() - started,
                "args": request.argsrepr,
                "kwargs": request.kwargsrepr,
            }
            _trace_log.info(LOG_SUCCESS, context, extra={"data": context})

    def handler(message, body, ack, reject, callbacks):
        try:
            request = plain(message, body, ack, callbacks)
        except (ValueError, TypeError, AttributeError, KeyError):  # not our message's shape
            request = None
        if request is None:
            return fallback(message, body, ack, reject, callbacks)
        worker_state.task_reserved(request)
        request.greenlet = consumer.pool._quick_put(execute, request)
        # The task runs now, up to its first wait (the claim on Redis), and the consumer logs
        # it and reads its next message while the claim is on its way, not before the task has
        # begun: the line's formatting and write (tens of microseconds) are off its path.
        gevent.sleep(0)
        told_received(request)

    return handler
