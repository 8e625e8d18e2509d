"""A worker's /readyz (worker/metrics.py Readiness): ready while its consumer is connected and its
lease heartbeat beats; what it says when either stops."""

from __future__ import annotations

import httpx

from mini_n8n.redis_server import free_port
from worker.metrics import Readiness, WorkerMetrics


class Worker:
    """What Readiness reads of a worker, changed by the test; and the clock it reads."""

    def __init__(self) -> None:
        self.connected = True
        self.beats = 0
        self.now = 100.0

    def readiness(self) -> Readiness:
        return Readiness(lambda: self.connected, lambda: self.beats, 5.0, lambda: self.now)


def test_a_worker_whose_heartbeat_beats_is_ready():
    worker = Worker()
    ready = worker.readiness()
    for _ in range(10):
        worker.now += 1.0
        worker.beats += 1
        assert ready() is None


def test_a_heartbeat_that_stopped_for_a_lease_is_not_ready_until_it_beats_again():
    worker = Worker()
    ready = worker.readiness()
    worker.now += 5.0
    assert ready() is None  # not yet a whole lease
    worker.now += 0.5
    assert ready() == "its lease heartbeat has stopped"
    worker.beats += 1
    assert ready() is None


def test_a_consumer_not_connected_to_the_broker_is_not_ready():
    worker = Worker()
    ready = worker.readiness()
    worker.connected = False
    assert ready() == "not connected to the broker"


def test_the_metrics_port_serves_healthz_readyz_and_metrics():
    metrics, worker = WorkerMetrics(), Worker()
    metrics.readiness = worker.readiness()
    port = free_port()
    server = metrics.serve(port)
    try:
        base = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{base}/healthz").json() == {"status": "ok"}
        assert httpx.get(f"{base}/readyz").json() == {"status": "ok"}
        worker.connected = False
        answer = httpx.get(f"{base}/readyz")
        assert answer.status_code == 503
        assert answer.json() == {"status": "unavailable", "error": "not connected to the broker"}
        assert "mini_n8n_running_executions 0.0" in httpx.get(f"{base}/metrics").text
    finally:
        server.shutdown()
        server.server_close()
