"""What one worker process holds for all the executions it runs: the Redis client, the outbox,
the services lent to the engine, and three parts built on them: the runner of one execution
(worker/execution_run.py), the leases of the running ones (worker/leases.py) and their stop
switches (worker/stops.py). A Celery task hands its payload to `WorkerRuntime.run`; in regular
mode the api process holds one too (api/launcher.py)."""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
from collections.abc import Callable
from typing import Any
from wsgiref.simple_server import WSGIServer

import redis

from core.execution_record import ExecutionRecord
from core.executions import ExecutionStore
from core.keys import Keys
from core.leases import LeaseStore
from core.presence import Owner, Presence
from core.pruning import Pruner
from core.redis_clients import connect
from core.redis_credentials import RedisConnections
from core.redis_errors import error_text
from core.settings import Settings
from core.task import TaskPayload
from core.waiting import WaitingStore
from core.workflow_snapshots import WorkflowSnapshots
from engine.services import Services
from memory.window import InProcessMemory
from models.clients import ModelClients
from models.http_requests import HttpRequests
from runtime.cpu_clock import task_clock
from runtime.patching import unpatched_poll
from runtime.spawn import spawn
from runtime.timers import pause
from sandbox.pool import ProcessPool
from worker import warmup
from worker.execution_run import ExecutionRunner
from worker.leases import Heartbeat, Leases
from worker.metrics import WorkerMetrics
from worker.publisher import Outbox
from worker.stops import Stops
from worker.sub_executions import SubExecutions

log = logging.getLogger("mini_n8n.worker")

# HTTP client loggers that print full request URLs (httpx/httpx2, the openai SDK's transport, at
# INFO; openai at DEBUG): a model's base URL may hold user:password@ or a key in its query, so
# they speak only of real trouble.
QUIET_LOGGERS = ("httpx", "httpx2", "httpcore", "openai")
REDIS_POOL_SIZE = 64


class WorkerRuntime:
    def __init__(
        self,
        settings: Settings,
        client: redis.Redis | None = None,
        outbox=None,
        send_task: Callable[[TaskPayload], None] | None = None,
    ):
        self.settings = settings
        self.keys = Keys.from_settings(settings)
        self.client = client or _client(settings)
        self.store = ExecutionStore.from_settings(self.client, self.keys, settings)
        # Whose heartbeat connection this worker's leases name (core/presence.py).
        self.owner = Owner()
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self.lease_store = LeaseStore(self.client, self.keys, settings.lease_seconds, self.owner)
        self.presence = Presence(self.client, self.keys, settings.lease_seconds)
        self.outbox = outbox or Outbox(self.client)
        self.metrics = WorkerMetrics()
        # Model streams read in greenlets a stop can interrupt; idle connections looked at with
        # the C library's poll, which never takes a turn of gevent's loop.
        self.models = ModelClients(spawn=spawn, poll=unpatched_poll())
        self._lend(settings, send_task)
        for name in QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)
        self.stops = Stops(settings.redis_url, self.keys.stop_channel())
        self.send_task = send_task
        self.waits = WaitingStore(self.store)
        self.leases = Leases(
            settings,
            self.store,
            self.lease_store,
            self.stops,
            self.outbox,
            expire_wait=self._wait_expired,
            presence=self.presence,
        )
        self.heartbeat = Heartbeat(self.stops, self._heartbeat_leases, self.worker_id)
        self.pruner = Pruner.from_settings(self.store, settings).watch()  # the watch's rounds
        self.runner = ExecutionRunner(
            settings,
            self.store,
            self.lease_store,
            self.outbox,
            self.services,
            self.stops,
            metrics=self.metrics,
            send_task=send_task,
        )
        self._metrics_server: WSGIServer | None = None

    def _lend(self, settings: Settings, send_task) -> None:
        """What executions are lent (Services): the clients, the Code nodes' pool, sub-workflows."""
        # Code nodes' JavaScript, in processes of its own; their answers read in greenlets.
        self.code = ProcessPool(
            settings.code_timeout_seconds, settings.code_memory_mb, settings.code_processes,
            spawn=spawn,
        )  # fmt: skip
        self.services = _services(self.client, self.keys, settings, self.models)
        self.services.code_runner = self.code
        self.services.on_model_call = self.metrics.model_call
        snapshots = WorkflowSnapshots(self.client, self.keys, settings.executions_ttl)
        self.sub_executions = SubExecutions(self.store, snapshots, send_task)
        self.services.workflows = self.sub_executions.find
        self.services.start_workflow = self.sub_executions.start

    def run(self, payload: dict[str, Any]) -> str:
        # Started lazily too: in regular mode nothing calls start_background.
        self.start_background()
        return self.runner.run(payload)

    def warm(self) -> None:
        """Warm start: what the first execution would otherwise load, build or
        connect, done before the worker takes a task (worker/warmup.py)."""
        warmup.warm(self.store, self.services, self.models, self.runner.workflows)

    def start_background(self) -> None:
        """Renew leases, reap lost executions and hear stop requests, from now on."""
        self.heartbeat.start()
        self.leases.start()
        self.stops.start()

    def _wait_expired(self, record: ExecutionRecord) -> None:
        """A Chat node's wait ran out: the execution goes on without a reply, on whichever
        worker takes its task (n8n resumes it so too)."""
        saved = self.waits.resume_state(record.id)
        if saved is None or self.send_task is None:
            self.waits.expire(record)
            return
        queued = self.store.resume_expired(record)
        if queued is None:
            return  # a reply (or a stop) came first
        try:
            self.send_task(TaskPayload.resuming(queued, saved, None))
        except Exception as err:
            log.exception("execution %s: its expired wait could not go on", record.id)
            self.store.fail_start(queued, f"could not resume: {error_text(err)}")

    def _heartbeat_leases(self) -> tuple[LeaseStore, Presence]:
        """The heartbeat's own LeaseStore and Presence, built on its own thread: its own
        connection, never one of the greenlets' pool (worker/leases.py)."""
        client = connect(
            self.settings.redis_url,
            self.settings.redis_cluster,
            decode_responses=True,
            socket_timeout=self.settings.redis_timeout_seconds,
            client_name="mini-n8n-heartbeat",
        )
        leases = LeaseStore(client, self.keys, self.settings.lease_seconds, self.owner)
        return leases, Presence(client, self.keys, self.settings.lease_seconds)

    def serve_metrics(self) -> None:
        """Serve this worker's /metrics on MINI_N8N_WORKER_METRICS_PORT, if set (the Celery
        worker, once ready; never the api's runtime in regular mode, whose processes would
        contend for the one port)."""
        port = self.settings.worker_metrics_port
        if port and self._metrics_server is None:
            try:
                self._metrics_server = self.metrics.serve(port, self.settings.worker_metrics_host)
            except OSError as err:  # taken by another worker: executions matter more than metrics
                log.error("metrics not served on port %d: %s", port, err)

    def stop_all_after(self, grace_seconds: float) -> None:
        self.leases.stop_all_after(grace_seconds)

    def close(self) -> None:
        """Stop the background threads (leases, stop listener) once no execution runs."""
        self.heartbeat.close()
        self.leases.close()
        with contextlib.suppress(redis.RedisError):
            self.presence.withdraw(self.worker_id)
        self.stops.close()
        self.code.close()
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
            self._metrics_server.server_close()


def _services(
    client: redis.Redis, keys: Keys, settings: Settings, models: ModelClients
) -> Services:
    services = Services(
        redis=client,
        credentials=_credentials(),
        keys=keys,
        simple_memory=InProcessMemory(),
        queue_mode=True,
        chat_models=models,
        # Requests sent by greenlets a stop interrupts, on the models' TLS context.
        http=HttpRequests.from_settings(settings, spawn, models.tls_context),
        cpu_seconds=settings.execution_cpu_seconds,
        cpu_clock=task_clock(),  # per greenlet: the others' work is not this execution's
        pause=pause,
        webhook_url=settings.public_webhook_url,
    )
    # The Redis memory's `redis` credential (n8n exports always name one): its own server
    # if configured, else this deployment's Redis.
    services.redis_for_credential = RedisConnections(services.credentials, client)
    return services


def _client(settings: Settings) -> redis.Redis:
    # Executions take a connection only for a command or two at a time; when all are busy,
    # a greenlet waits for one instead of failing, and the worker's connection count is capped.
    return connect(
        settings.redis_url,
        settings.redis_cluster,
        blocking_pool=REDIS_POOL_SIZE,  # per node in a cluster
        timeout=30,
        # Rides out a Redis pause or failover: a command waits rather than fails (core/retry.py
        # covers what takes longer).
        socket_timeout=settings.redis_timeout_seconds,
        decode_responses=True,
        health_check_interval=30,
        client_name="mini-n8n-worker",
    )


def _credentials():
    try:
        from core.credentials import CredentialStore

        return CredentialStore.from_env()
    except Exception as err:  # a broken credentials file must not stop chats that need none
        log.error("credentials not loaded: %s", err)
        return None
