"""A worker's Prometheus metrics (DESIGN section 4, Ops) and its health, served on its own port.

A worker is one process (a gevent pool), so its metrics need no multiprocess mode: they live in
a registry of their own, one per WorkerRuntime, served on MINI_N8N_WORKER_METRICS_PORT once the
worker is ready, beside `/healthz` (the process answers) and `/readyz` (it can do its job: see
Readiness). The engine knows nothing of them: it reports each model call through
`Services.on_model_call`, which the runtime points at `model_call`.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Callable
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    make_wsgi_app,
)

from core.clock import now_ms
from core.execution_record import FINISHED, ExecutionRecord

log = logging.getLogger("mini_n8n.worker")

# Seconds: chats take from a fraction of a second to minutes (the default timeout is 10).
DURATION_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
# Seconds: a free worker claims within milliseconds; a busy one makes executions wait.
QUEUE_WAIT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class WorkerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        registry = self.registry
        self.executions = Counter(
            "mini_n8n_executions",
            "Executions this worker recorded an outcome for, by status",
            ["status"],
            registry=registry,
        )
        self.duration = Histogram(
            "mini_n8n_execution_duration_seconds",
            "From an execution's claim to its recorded outcome",
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.queue_wait = Histogram(
            "mini_n8n_queue_wait_seconds",
            "From an execution's creation (the api's createdAt) to its claim by this worker",
            buckets=QUEUE_WAIT_BUCKETS,
            registry=registry,
        )
        self.running = Gauge(
            "mini_n8n_running_executions", "Executions running on this worker", registry=registry
        )
        self.model_requests = Counter(
            "mini_n8n_model_requests",
            "Chat-model calls the Agent made, by status (success or error)",
            ["status"],
            registry=registry,
        )
        self.model_tokens = Counter(
            "mini_n8n_model_tokens",
            "Tokens (streamed pieces) the chat models produced",
            registry=registry,
        )
        for outcome in FINISHED:
            self.executions.labels(outcome)  # every outcome shows, at 0 until it happens
        for status in ("success", "error"):
            self.model_requests.labels(status)
        # Why this worker cannot do its job (None: it can); set once the worker knows how to tell.
        self.readiness: Callable[[], str | None] = lambda: None

    def claimed(self, record: ExecutionRecord) -> Claim:
        """An execution was claimed (`new -> running`): it runs until its Claim is closed."""
        # A resumed execution (a Chat node's reply) was queued again at `queuedAt`.
        queued_ms = record.queued_at or record.created_at
        if queued_ms:
            self.queue_wait.observe(max(now_ms() - queued_ms, 0) / 1000)
        self.running.inc()
        return Claim(self)

    def model_call(self, status: str, tokens: int) -> None:
        self.model_requests.labels(status).inc()
        if tokens:
            self.model_tokens.inc(tokens)

    def serve(self, port: int, host: str = "127.0.0.1") -> WSGIServer:
        """Serve these metrics (and the process's own), /healthz and /readyz on `host:port`:
        loopback unless told otherwise (compose names every interface, inside its own network);
        the server, to shut down."""
        ProcessCollector(registry=self.registry)
        server = make_server(host, port, self._app(), _server_class(host), _QuietHandler)
        threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
        log.info("metrics on %s port %d (/metrics, /healthz, /readyz)", host, port)
        return server

    def _app(self):
        metrics = make_wsgi_app(self.registry)

        def app(environ, start_response):
            path = environ.get("PATH_INFO", "")
            if path == "/healthz":
                return _json(start_response, "200 OK", {"status": "ok"})
            if path == "/readyz":
                reason = self.readiness()
                if reason is not None:
                    body = {"status": "unavailable", "error": reason}
                    return _json(start_response, "503 Service Unavailable", body)
                return _json(start_response, "200 OK", {"status": "ok"})
            return metrics(environ, start_response)

        return app


class Readiness:
    """Whether a worker can do its job: its Celery consumer is connected to the broker (it takes
    tasks) and its lease heartbeat beats (its executions are not declared lost). The heartbeat
    counts its rounds; one that has not moved for `stale_after` seconds has stopped."""

    def __init__(
        self,
        connected: Callable[[], bool],
        beats: Callable[[], int],
        stale_after: float,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._connected = connected
        self._beats = beats
        self._stale_after = stale_after
        self._clock = clock
        self._seen = beats()
        self._moved_at = clock()

    def __call__(self) -> str | None:
        if not self._connected():
            return "not connected to the broker"
        beats, now = self._beats(), self._clock()
        if beats != self._seen:
            self._seen, self._moved_at = beats, now
        if now - self._moved_at > self._stale_after:
            return "its lease heartbeat has stopped"
        return None


def _json(start_response, status: str, body: dict) -> list[bytes]:
    data = json.dumps(body).encode()
    start_response(
        status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
    )
    return [data]


def _server_class(host: str) -> type[WSGIServer]:
    class Server(ThreadingMixIn, WSGIServer):
        daemon_threads = True  # a scrape never holds the process up
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    return Server


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args) -> None:  # scrapes and probes: no line each
        pass


class Claim:
    """One claimed execution, running until closed; `ended` counts the outcome it recorded."""

    def __init__(self, metrics: WorkerMetrics) -> None:
        self.metrics = metrics
        self.started = time.monotonic()

    def ended(self, status: str) -> None:
        self.metrics.executions.labels(status).inc()
        self.metrics.duration.observe(time.monotonic() - self.started)

    def close(self) -> None:
        self.metrics.running.dec()
