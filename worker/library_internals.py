"""Every place mini-n8n reaches past Celery's and kombu's public API, and the fence around them.

Three shortcuts, each worth a measured share of the CPU a chat message costs
(docs/performance.md, "Figures behind the code"), each with the libraries' own path kept as its
fallback:

- **The worker's short path for its task** (`strategy`, Celery's `Task.Strategy` hook). Celery's
  default strategy decodes a message with kombu's JSON, logs "received", and has the pool run
  its tracer around the task once the consumer has read its next message: CPU per message, and
  time between the broker's answer and the execution's claim.
  Here a plain message is decoded once with orjson, its request is Celery's own `Request` (built
  by Celery's own `__init__` from the decoded body: every Celery path that touches a reserved or
  running request, a consumer restart, a revoke, an inspect, finds what it expects), and it runs
  at once in a greenlet of the pool's own, which Celery's `on_accepted` and `on_success` report.
  Anything else goes to Celery's strategy unchanged: an ETA, an expiry, a time limit, callbacks,
  a revoked id, any revocation by stamped headers, task events on, receivers of Celery's task
  signals, another serializer, an acks_late task, a pool that is not gevent's.
- **One Redis client per kombu channel** (`install_broker_client`). kombu's Redis channel builds
  a `redis.Redis` for every publish and for each ack, copying a table of some 170 response
  callbacks each time; a client is only its pool and that table, safe to share, so each channel
  keeps one per pool.
- **The api writes a task's message itself** (`redis_message`), in the transaction that records
  the execution, when the broker is the store's own Redis: Celery's send built the same message
  with three JSON encodings and a Redis client per publish, on a thread of its own.

The private names used, and why:

- `celery.worker.strategy.default`: the fallback, built once per consumer start beside ours.
- `celery.worker.request.Request.__init__(..., body=, decoded=True)` and its `_body`,
  `_decoded`, `_content_type`, `_content_encoding` slots: the request Celery would build, from
  a body we decoded; the four slots then say what Celery's own decoding would have said.
- `celery.worker.state.task_reserved`, `task_ready`, `revoked`, `revoked_stamps`: the worker's
  bookkeeping (inspect, stats, revoke) and the checks its strategy makes before running a task.
- `celery.app.trace.LOG_RECEIVED`, `LOG_SUCCESS`, `LOG_FAILURE`: Celery's own formats for a
  task's "received", "succeeded" and "raised unexpected" lines, so they read and route as always.
- `celery.concurrency.gevent.TaskPool._quick_put` and `_add_to_pool_map`: the pool's greenlet
  spawn (its concurrency limit and warm shutdown's wait hold) and the map in which its
  `terminate_job` finds a task's greenlet (`revoke(terminate=True)`).
- `kombu.transport.redis.Channel._create_client`: where a channel builds its clients.
- Celery's task message, protocol 2, as kombu's Redis transport stores it (`redis_message`).

They were written against celery and kombu 5.7 (`SUPPORTED`), the series pyproject.toml allows;
tests/worker/test_library_internals.py checks each against the installed libraries. With any
other version installed, or with MINI_N8N_LIBRARY_SHORTCUTS=off, every shortcut is off and the
libraries' own paths run (Celery's strategy, kombu's clients, Celery's send_task), said once in
the log.
"""

from __future__ import annotations

import base64
import functools
import logging
import os
import socket
import threading
import time
import uuid
from importlib import metadata
from typing import TYPE_CHECKING, Any

import orjson
from packaging.version import Version

from core import jsontext

if TYPE_CHECKING:
    from core.task import TaskPayload

log = logging.getLogger("mini_n8n.worker")

# The series each library's internals were read in: (first version, first version not allowed).
SUPPORTED = {"celery": ("5.7", "5.8"), "kombu": ("5.7", "5.8")}
SWITCH = "MINI_N8N_LIBRARY_SHORTCUTS"  # "off": the libraries' own paths, whatever is installed
# Celery's Request as the short path knows it: a slot added or renamed is a Request this module
# has not been read against.
REQUEST_SLOTS = (
    "_app", "_type", "name", "id", "_root_id", "_parent_id", "_on_ack", "_body", "_hostname",
    "_eventer", "_connection_errors", "_task", "_eta", "_expires", "_request_dict", "_on_reject",
    "_utc", "_content_type", "_content_encoding", "_argsrepr", "_kwargsrepr", "_args", "_kwargs",
    "_decoded", "__payload", "__weakref__", "__dict__",
)  # fmt: skip
_EMBED_KEYS = ("callbacks", "errbacks", "chain", "chord")
_told = threading.Lock()
_told_reasons: set[str] = set()


def _say_once(reason: str) -> None:
    with _told:
        if reason in _told_reasons:
            return
        _told_reasons.add(reason)
    log.warning("library shortcuts off, the libraries' own paths run: %s", reason)


@functools.cache
def why_off() -> str | None:
    """Why the shortcuts are off in this process (None: they are on). Read once: the installed
    packages do not change under a running process."""
    if os.environ.get(SWITCH, "on").strip().lower() in ("off", "0", "false", "no"):
        return f"{SWITCH} is off"
    for package, (low, high) in SUPPORTED.items():
        try:
            installed = metadata.version(package)
        except metadata.PackageNotFoundError:
            return f"{package} is not installed"
        if not Version(low) <= Version(installed) < Version(high):
            return f"{package} {installed} is installed; they were written against {low}.x"
    return None


def shortcuts_on() -> bool:
    reason = why_off()
    if reason is not None:
        _say_once(reason)
    return reason is None


# --- the api's own task message ----------------------------------------------------------------
TASK_NAME = "mini_n8n.run_execution"
# What Celery puts after a task's args and kwargs in its body (task protocol 2): no workflow.
_EMBED = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}
_ORIGIN = f"gen{os.getpid()}@{socket.gethostname()}"


def redis_message(payload: TaskPayload, queue: str) -> bytes:
    """The message Celery's `send_task` has kombu's Redis transport LPUSH onto the queue's list
    (a task of priority 0, task protocol 2, its body base64 JSON), built in one pass."""
    record = payload.record
    body = jsontext.dumps_bytes([[payload.encode()], {}, _EMBED])
    summary = f"[execution {record.id} of workflow {record.workflow_id}]"
    headers: dict[str, Any] = {
        "lang": "py",
        "task": TASK_NAME,
        "id": record.id,
        "shadow": None,
        "eta": None,
        "expires": None,
        "group": None,
        "group_index": None,
        "retries": 0,
        "timelimit": [None, None],
        "root_id": record.id,
        "parent_id": None,
        "argsrepr": summary,
        "kwargsrepr": "{}",
        "origin": _ORIGIN,
        "ignore_result": None,
        "replaced_task_nesting": 0,
        "stamped_headers": None,
        "stamps": {},
    }
    properties = {
        "correlation_id": record.id,
        "reply_to": "",
        "delivery_mode": 2,
        "delivery_info": {"exchange": "", "routing_key": queue},
        "priority": 0,
        "body_encoding": "base64",
        "delivery_tag": str(uuid.uuid4()),
    }
    return orjson.dumps(
        {
            "body": base64.b64encode(body).decode("ascii"),
            "content-encoding": "utf-8",
            "content-type": "application/json",
            "headers": headers,
            "properties": properties,
        }
    )


# --- kombu's Redis channel: one client each ------------------------------------------------------
_installed = threading.Lock()
_broker_patched = False


def install_broker_client() -> bool:
    """Give kombu's Redis channels one client each (idempotent; a process-wide change, made before
    any channel opens). False when the shortcuts are off: kombu builds its clients as it will."""
    global _broker_patched
    if not shortcuts_on():
        return False
    with _installed:
        if _broker_patched:
            return True
        from kombu.transport import redis as kombu_redis

        build = getattr(kombu_redis.Channel, "_create_client", None)
        if build is None:
            _say_once("kombu's Redis channel has no _create_client")
            return False

        def _create_client(self, asynchronous=False):
            if asynchronous:
                return build(self, asynchronous=True)
            client = self.__dict__.get("_mini_n8n_client")
            if client is None or client.connection_pool is not self.pool:
                client = self.__dict__["_mini_n8n_client"] = build(self)
            return client

        # setattr: a plain assignment to a method is refused by mypy
        setattr(kombu_redis.Channel, "_create_client", _create_client)  # noqa: B010
        _broker_patched = True
        return True


# --- the worker's short path -------------------------------------------------------------------
@functools.cache
def lean_request_class() -> type:
    """Celery's Request, built from a body decoded here (Celery imported on first use only)."""
    from celery.worker.request import Request

    class LeanRequest(Request):
        def __init__(self, message, decoded: list, **options) -> None:
            super().__init__(message, body=decoded, decoded=True, **options)
            # What Celery's own decoding of the message would have left: only the decoding was
            # done elsewhere.
            self._body = message.body
            self._decoded = False
            self._content_type = message.content_type
            self._content_encoding = message.content_encoding
            self.received_told = False  # its "received" line was logged

    return LeanRequest


def fits(request_class: type, pool: Any) -> str | None:
    """Why the short path does not fit these classes (None: it does)."""
    if tuple(getattr(request_class.__mro__[1], "__slots__", ())) != REQUEST_SLOTS:
        return "Celery's Request has other slots than the short path was written against"
    if not callable(getattr(pool, "_quick_put", None)) or not callable(
        getattr(pool, "_add_to_pool_map", None)
    ):
        return "Celery's gevent pool has no _quick_put or _add_to_pool_map"
    return None


def strategy(task, app, consumer, **kwargs):
    """The strategy factory (`Task.Strategy`): Celery calls it once per consumer start."""
    from celery import signals
    from celery.worker.strategy import default

    fallback = default(task, app, consumer, **kwargs)
    pool = consumer.pool
    if not getattr(pool, "is_green", False) or task.acks_late or not shortcuts_on():
        return fallback
    reason = fits(lean_request_class(), pool)
    if reason is not None:
        _say_once(reason)
        return fallback
    if task.time_limit or task.soft_time_limit:
        return fallback
    if task.rate_limit and not consumer.disable_rate_limits:
        return fallback
    signalled = (signals.task_received, signals.task_prerun, signals.task_postrun,
                 signals.task_success, signals.task_failure)  # fmt: skip
    if any(signal.receivers for signal in signalled):
        return fallback
    return _ShortPath(task, app, consumer, fallback).handle


class _ShortPath:
    """One consumer's handler of its task's messages (rebuilt at every consumer start)."""

    def __init__(self, task, app, consumer, fallback) -> None:
        import gevent
        from celery.app.trace import LOG_FAILURE, LOG_RECEIVED, LOG_SUCCESS
        from celery.worker import state

        self.task, self.app, self.consumer, self.fallback = task, app, consumer, fallback
        self.state = state
        self.formats = (LOG_RECEIVED, LOG_SUCCESS, LOG_FAILURE)
        self.gevent = gevent
        self.request_class = lean_request_class()
        self.eventer = consumer.event_dispatcher
        # Celery's own loggers: a task's lines read and route as always.
        self.strategy_log = logging.getLogger("celery.worker.strategy")
        self.trace_log = logging.getLogger("celery.app.trace")

    def _events_on(self) -> bool:
        eventer = self.eventer
        return bool(eventer and eventer.enabled) and (
            not eventer.groups or "task" in eventer.groups
        )

    def _request(self, message, body, ack, reject, callbacks):
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
            or headers.get("id") in self.state.revoked
            or self.state.revoked_stamps  # revoked by stamped headers: Celery checks those
            or self._events_on()
        ):
            return None
        args, task_kwargs, embed = decoded = orjson.loads(message.body)
        if not isinstance(args, list) or task_kwargs or any(embed.get(k) for k in _EMBED_KEYS):
            return None
        consumer = self.consumer
        return self.request_class(
            message,
            decoded,
            on_ack=ack,
            on_reject=reject,
            hostname=consumer.hostname,
            eventer=self.eventer,
            app=self.app,
            connection_errors=consumer.connection_errors,
            task=self.task,
        )

    def handle(self, message, body, ack, reject, callbacks):
        try:
            request = self._request(message, body, ack, reject, callbacks)
        except (ValueError, TypeError, AttributeError, KeyError):  # not our message's shape
            request = None
        if request is None:
            return self.fallback(message, body, ack, reject, callbacks)
        self.state.task_reserved(request)
        pool = self.consumer.pool
        greenlet = pool._quick_put(self._execute, request)
        pool._add_to_pool_map(id(greenlet), greenlet)  # so revoke(terminate=True) finds it
        # The task runs now, up to its first wait (the claim on Redis), and the consumer logs
        # it and reads its next message while the claim is on its way, not before the task has
        # begun: the line's formatting and write (tens of microseconds) are off its path.
        self.gevent.sleep(0)
        self._told_received(request)

    def _told_received(self, request) -> None:
        """Its "received" line, once, and always before the line that says how it ended."""
        if request.received_told:
            return
        request.received_told = True
        if self.strategy_log.isEnabledFor(logging.INFO):
            context = {"id": request.id, "name": request.name, "args": request.argsrepr,
                       "kwargs": request.kwargsrepr, "eta": None}  # fmt: skip
            self.strategy_log.info(self.formats[0], context, extra={"data": context})

    def _execute(self, request) -> None:
        # Celery's own: the pid its gevent pool knows the greenlet by, the start time, the worker
        # state's active set, the ack, the task-started event, a terminate asked meanwhile.
        request.on_accepted(id(self.gevent.getcurrent()), time.monotonic())
        started = time.monotonic()
        try:
            result = self.task.run(*request.args)
        except Exception as exc:
            self._told_received(request)
            self.state.task_ready(request)
            context = {"id": request.id, "name": request.name,
                       "description": "raised unexpected", "exc": repr(exc)}  # fmt: skip
            self.trace_log.error(self.formats[2], context, exc_info=True, extra={"data": context})
            return
        except BaseException:  # GreenletExit (terminated: Celery said so), KeyboardInterrupt
            self.state.task_ready(request)
            raise
        runtime = time.monotonic() - started
        self._told_received(request)
        request.on_success((False, repr(result), runtime))  # worker state; task-succeeded
        if self.trace_log.isEnabledFor(logging.INFO):
            context = {"id": request.id, "name": request.name, "return_value": repr(result),
                       "runtime": runtime, "args": request.argsrepr,
                       "kwargs": request.kwargsrepr}  # fmt: skip
            self.trace_log.info(self.formats[1], context, extra={"data": context})
