"""What one worker process holds for all the executions it runs: the Redis client, the outbox,
the leases of its running executions and their stop switches. A Celery task hands its payload to
`WorkerRuntime.run`, which waits for the session's turn, claims the execution, runs the engine
with hooks that publish to the execution's channel, and records the outcome."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import sys
import threading
import time
from typing import Any

import redis

from core.executions import ExecutionStore, Status, now_ms
from core.keys import Keys
from core.redis_credentials import RedisConnections
from core.settings import Settings
from engine.executor import run_workflow
from engine.hooks import Hooks
from engine.run_data import Run
from engine.services import Services
from engine.workflow import load_workflow
from memory.window import InProcessMemory
from worker import greenlets
from worker.publisher import Outbox
from worker.push import PushHooks

log = logging.getLogger("mini_n8n.worker")

MAX_RUN_DATA_BYTES = 512 * 1024  # run data beyond this keeps node metadata only
# HTTP client loggers that print full request URLs (httpx/httpx2, the openai SDK's transport, at
# INFO; openai at DEBUG): a model's base URL may hold user:password@ or a key in its query, so
# they speak only of real trouble.
QUIET_LOGGERS = ("httpx", "httpx2", "httpcore", "openai")
REAP_EVERY_SECONDS = 5.0
# How long a finished execution keeps trying to record its outcome while Redis is unreachable.
RECORD_RETRY_SECONDS = 60.0
REDIS_POOL_SIZE = 64


class WorkerRuntime:
    def __init__(self, settings: Settings, client: redis.Redis | None = None, outbox=None):
        self.settings = settings
        self.keys = Keys.from_settings(settings)
        self.client = client or redis.Redis(connection_pool=_pool(settings))
        self.store = ExecutionStore(self.client, self.keys, settings.executions_ttl)
        self.outbox = outbox or Outbox(self.client)
        self.services = Services(
            redis=self.client,
            credentials=_credentials(),
            keys=self.keys,
            simple_memory=InProcessMemory(),
            queue_mode=True,
            spawn=greenlets.spawn,
        )
        # The Redis memory's `redis` credential (n8n exports always name one): its own server
        # if configured, else this deployment's Redis.
        self.services.redis_for_credential = RedisConnections(
            self.services.credentials, self.client
        )
        for name in QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)
        self.identity = {"host": socket.gethostname(), "pid": os.getpid()}
        self._running: dict[str, threading.Event] = {}
        self._closing = threading.Event()
        self._stop_listener = None
        self._stop_all_at: float | None = None
        self._exit_when_idle_after: float | None = None
        self._lock = threading.Lock()
        self._lease_thread: threading.Thread | None = None
        self._workflows: dict[str, tuple[str, Any]] = {}

    # --- one execution --------------------------------------------------------------------
    def run(self, payload: dict[str, Any]) -> str:
        record = payload["record"]
        execution_id = record["id"]
        if not self._wait_for_turn(record):
            return "dropped"
        started = {
            **record,
            "status": Status.RUNNING,
            "startedAt": now_ms(),
            "worker": self.identity,
        }
        lease_ms = int(self.settings.lease_seconds * 1000)
        cancel = threading.Event()
        with self._lock:
            self._running[execution_id] = cancel
        self._ensure_lease_thread()
        try:
            if not self.store.transition(started, {Status.NEW}, lease_ms=lease_ms):
                return "dropped"  # stopped, or lost and marked crashed, before it could start
            if self.store.stop_requested(execution_id):
                cancel.set()
            run = self._execute(payload, started, cancel)
            self._finish(payload, started, run)
            return run.status
        finally:
            with self._lock:
                self._running.pop(execution_id, None)

    def _wait_for_turn(self, record: dict[str, Any]) -> bool:
        queue = self.store.session_queue(record)
        if not queue:
            return True
        while not self.store.my_turn(record["id"], queue):
            current = self.store.get(record["id"])
            if current is None or current["status"] != Status.NEW:
                return False
            self.store.wait_turn(record["id"], timeout=1.0)
        return True

    def _execute(self, payload: dict[str, Any], record: dict[str, Any], cancel) -> Run:
        channel = self.keys.execution_events(record["id"])
        hooks = Hooks()
        if payload.get("streaming") and payload.get("responseMode") != "onReceived":
            hooks.add_handler("sendChunk", lambda chunk: self.outbox.chunk(channel, chunk))
        hooks.add_handler("sendResponse", lambda resp: self.outbox.response(channel, resp))
        if payload.get("pushRef"):
            PushHooks(self.outbox, self.keys.push(payload["pushRef"]), record).attach(hooks)
        limit = self.settings.execution_timeout_seconds
        timed_out = threading.Event()

        def time_out() -> None:
            timed_out.set()
            cancel.set()

        timer = threading.Timer(limit, time_out)
        timer.daemon = True
        timer.start()
        try:
            run = run_workflow(
                self._workflow(payload["workflow"]),
                payload["items"],
                start_node=payload.get("startNode"),
                hooks=hooks,
                services=self.services,
                execution_id=record["id"],
                mode=record.get("mode", "webhook"),
                streaming=bool(payload.get("streaming")),
                cancel=cancel,
            )
        finally:
            timer.cancel()
        if run.status == "canceled" and timed_out.is_set():
            run.status = "error"
            run.error = f"The execution timed out after {limit:g} s (MINI_N8N_EXECUTION_TIMEOUT)."
        return run

    def _finish(self, payload: dict[str, Any], record: dict[str, Any], run: Run) -> None:
        final = {
            **record,
            "status": run.status,
            "stoppedAt": now_ms(),
            "error": run.error,
            "errorNode": run.error_node,
            "lastNodeExecuted": run.last_node,
            **_bounded_run_data(run.run_data),
        }
        self._record_outcome(final)
        result = {
            "status": run.status,
            "error": run.error,
            "errorNode": run.error_node,
            "output": run.first_json(),
            "streamed": run.streamed,
        }
        self.outbox.done(self.keys.execution_events(record["id"]), result)
        if payload.get("pushRef"):
            finished = {"executionId": record["id"], "status": run.status, "error": run.error}
            self.outbox.event(self.keys.push(payload["pushRef"]), "executionFinished", finished)

    def _record_outcome(self, final: dict[str, Any]) -> None:
        """Write the finished record. While Redis is unreachable, keep trying for a while: a
        reaper that saw the lease run out meanwhile has marked the execution crashed ("worker
        lost"), and this worker, which did not get lost, then replaces that with what happened."""
        allowed = {Status.RUNNING}
        delay, deadline = 0.25, time.monotonic() + RECORD_RETRY_SECONDS
        while True:
            try:
                if not self.store.transition(final, allowed):
                    log.warning("execution %s was marked lost before it finished", final["id"])
                return
            except redis.RedisError as err:
                if time.monotonic() + delay > deadline:
                    log.error("execution %s: outcome not recorded, Redis: %s", final["id"], err)
                    return
                log.warning("execution %s: Redis unreachable, retrying: %s", final["id"], err)
                allowed = {Status.RUNNING, Status.CRASHED}
                time.sleep(delay)
                delay = min(delay * 2, 5.0)

    def _workflow(self, data: dict[str, Any]):
        # Parsing and validating is cheap but not free; the same snapshot comes back often.
        raw = json.dumps(data, sort_keys=True)
        cached = self._workflows.get(data.get("id", ""))
        if cached and cached[0] == raw:
            return cached[1]
        workflow = load_workflow(data)
        self._workflows[data.get("id", "")] = (raw, workflow)
        return workflow

    # --- stop -----------------------------------------------------------------------------
    def stop(self, execution_id: str) -> bool:
        with self._lock:
            cancel = self._running.get(execution_id)
        if cancel:
            cancel.set()
        return cancel is not None

    # --- shutdown -------------------------------------------------------------------------
    def stop_all_after(self, grace_seconds: float) -> None:
        """Warm shutdown: running executions may finish within the grace period; then the lease
        thread stops them, so their streams end with an error line instead of waiting on a dead
        worker. (Called from a signal handler: it only sets a deadline.)"""
        self._stop_all_at = time.monotonic() + grace_seconds
        # Celery's own warm shutdown of a gevent worker can take seconds after the last task
        # (and occasionally far longer); once nothing runs and everything is published, there
        # is nothing left to protect: the lease thread then ends the process.
        self._exit_when_idle_after = time.monotonic() + 1.0

    def _exit_if_done(self, running: list[str]) -> None:
        exit_after = self._exit_when_idle_after
        if exit_after is None or running or time.monotonic() < exit_after:
            return
        if not self.outbox.idle():
            return
        log.warning("shutting down: no execution left, exiting")
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(0)

    def close(self) -> None:
        """Stop the background threads (leases, stop listener) once no execution runs."""
        self._closing.set()
        listener = self._stop_listener
        if listener is not None:
            with contextlib.suppress(Exception):
                listener.connection.disconnect()

    # --- leases ---------------------------------------------------------------------------
    def start_background(self) -> None:
        self._ensure_lease_thread()

    def _ensure_lease_thread(self) -> None:
        with self._lock:
            if self._lease_thread is None:
                self._lease_thread = threading.Thread(target=self._renew_leases, daemon=True)
                self._lease_thread.start()
                threading.Thread(target=self._listen_for_stops, daemon=True).start()

    def _listen_for_stops(self) -> None:
        """Stop requests are broadcast; the worker running the execution acts on it."""
        while not self._closing.is_set():
            # Its own connection without a read timeout: it waits for stops indefinitely.
            listener = redis.Redis.from_url(
                self.settings.redis_url,
                decode_responses=True,
                socket_timeout=None,
                socket_keepalive=True,
            )
            pubsub = self._stop_listener = listener.pubsub(ignore_subscribe_messages=True)
            try:
                pubsub.subscribe(self.keys.stop_channel())
                for message in pubsub.listen():
                    if message.get("type") == "message":
                        self.stop(message["data"])
            except (redis.RedisError, OSError, AttributeError, ValueError) as err:
                if self._closing.is_set():
                    return
                log.warning("stop listener lost Redis, reconnecting: %s", err)
                self._closing.wait(1.0)
            except Exception:  # listen again rather than stop hearing stops
                log.exception("stop listener failed, restarting")
                self._closing.wait(1.0)
            finally:
                pubsub.close()
                listener.close()

    def _renew_leases(self) -> None:
        lease_ms = int(self.settings.lease_seconds * 1000)
        last_reap = 0.0
        while not self._closing.wait(1.0):
            with self._lock:
                ids = list(self._running)
                if self._stop_all_at is not None and time.monotonic() >= self._stop_all_at:
                    for cancel in self._running.values():
                        cancel.set()
            self._exit_if_done(ids)
            try:
                self.store.renew_leases(ids, lease_ms)
                if time.monotonic() - last_reap > REAP_EVERY_SECONDS:
                    last_reap = time.monotonic()
                    self.store.reap_lost(self.settings.queue_timeout_seconds)
            except redis.RedisError as err:
                log.warning("could not renew execution leases: %s", err)
            except Exception:  # leases keep every running execution alive: never stop renewing
                log.exception("renewing leases failed")


def _pool(settings: Settings) -> redis.BlockingConnectionPool:
    # Executions take a connection only for a command or two at a time; when all are busy,
    # a greenlet waits for one instead of failing, and the worker's connection count is capped.
    return redis.BlockingConnectionPool.from_url(
        settings.redis_url,
        max_connections=REDIS_POOL_SIZE,
        timeout=30,
        decode_responses=True,
        health_check_interval=30,
        client_name="mini-n8n-worker",
    )


def _bounded_run_data(run_data: dict[str, Any]) -> dict[str, Any]:
    text = json.dumps(run_data, default=str)
    if len(text) <= MAX_RUN_DATA_BYTES:
        return {"runData": run_data}
    slim = {
        name: [
            {k: v for k, v in task.items() if k not in ("data", "inputOverride")} for task in tasks
        ]
        for name, tasks in run_data.items()
    }
    return {"runData": slim, "runDataTruncated": True}


def _credentials():
    try:
        from core.credentials import CredentialStore

        return CredentialStore.from_env()
    except Exception as err:  # a broken credentials file must not stop chats that need none
        log.error("credentials not loaded: %s", err)
        return None
