"""The api's Prometheus metrics (DESIGN section 4, Ops), for all its gunicorn workers together.

gunicorn runs several worker processes; prometheus-client's multiprocess mode keeps each
process's values in files under PROMETHEUS_MULTIPROC_DIR, and `/metrics` adds them up. The
directory is made fresh at each api start and removed at its end (api/gunicorn_conf.py), and it
must be in the environment before prometheus-client is imported: the value class is chosen then.
Without it (one process: tests, `mini-n8n up`) the same metrics live in the default registry.

The metrics are module-level on purpose, the one exception to "nothing built at import time":
in multiprocess mode two objects for one metric in one process would overwrite each other's
values in the shared file, so each process must hold exactly one.
"""

from __future__ import annotations

import os
import time

from flask import Response, has_request_context, request
from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

MULTIPROC_DIR = "PROMETHEUS_MULTIPROC_DIR"
ARRIVED = "mini_n8n.arrived"  # the WSGI environ key holding the request's arrival time

WEBHOOK_REQUESTS = Counter(
    "mini_n8n_webhook_requests", "Requests under /webhook/, by the HTTP status answered", ["status"]
)
OPEN_STREAMS = Gauge(
    "mini_n8n_open_streams",
    "Streaming (NDJSON) answers this api relays now",
    multiprocess_mode="livesum",
)
TIME_TO_FIRST_CHUNK = Histogram(
    "mini_n8n_time_to_first_chunk_seconds",
    "From a streaming request's arrival to its first NDJSON line that is not a keepalive",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0),
)
STREAM_BYTES = Counter("mini_n8n_stream_bytes", "Bytes of NDJSON written to streaming clients")


def note_arrival() -> None:
    """Before each request: when it arrived, for the time to its first chunk."""
    request.environ[ARRIVED] = time.monotonic()


def count_webhook(response: Response) -> Response:
    """After each request: a webhook's status (a stream's is the 200 sent before its body)."""
    if request.path.startswith("/webhook/"):
        WEBHOOK_REQUESTS.labels(str(response.status_code)).inc()
    return response


def arrival() -> float:
    """The current request's arrival time (monotonic seconds); now outside a request."""
    if has_request_context():
        return request.environ.get(ARRIVED, time.monotonic())
    return time.monotonic()


class StreamMeter:
    """A streaming body's metrics: open while it is being sent, the time to its first line that
    is not a keepalive, and the bytes each line took once the server came back for the next.
    Called by the body's own generator (api/responses.py): a generator wrapped around it was
    one more stack frame that every open stream keeps."""

    __slots__ = ("_arrived", "_first")

    def __init__(self, arrived: float):
        self._arrived = arrived
        self._first = True
        OPEN_STREAMS.inc()

    def sent(self, text: str, keepalive: bool = False) -> None:
        if self._first and not keepalive:
            self._first = False
            TIME_TO_FIRST_CHUNK.observe(time.monotonic() - self._arrived)
        # Per line of a stream: skip the second UTF-8 encoding where characters are bytes.
        STREAM_BYTES.inc(len(text) if text.isascii() else len(text.encode()))

    def close(self) -> None:
        OPEN_STREAMS.dec()


def exposition() -> bytes:
    """The text format of every api metric: summed over the gunicorn workers in multiprocess
    mode, else this process's own (with the default process and GC metrics)."""
    if os.environ.get(MULTIPROC_DIR):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry)
    return generate_latest(REGISTRY)
