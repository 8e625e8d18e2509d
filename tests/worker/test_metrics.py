"""A worker's metrics on one execution, run by the real ExecutionRunner against a real Redis:
its outcome, how long it waited and ran, and the chat-model calls its Agent made."""

from __future__ import annotations

import httpx
import pytest

from core.executions import ExecutionStore
from core.leases import LeaseStore
from core.settings import Settings
from engine.errors import NodeExecutionError
from engine.executor import run_workflow
from engine.nodes.lm_chat_mock import MockChatModel
from engine.services import Services
from memory.window import InProcessMemory
from mini_n8n.redis_server import free_port
from tests.worker.test_execution_run import RecordingOutbox, id_of, launch
from worker.execution_run import ExecutionRunner
from worker.metrics import WorkerMetrics
from worker.runtime import WorkerRuntime
from worker.stops import Stops

MODEL = "Mock Chat Model"


class CountingOutbox(RecordingOutbox):
    """Also counts the streamed item chunks: the tokens the model produced."""

    def __init__(self) -> None:
        super().__init__()
        self.items = 0

    def chunk(self, channel, chunk) -> None:
        self.items += chunk["type"] == "item"


@pytest.fixture
def metrics():
    return WorkerMetrics()


class Engine:
    """The real engine, noting the running-executions gauge as each run starts."""

    def __init__(self, metrics: WorkerMetrics) -> None:
        self.metrics = metrics
        self.running_seen: list[float | None] = []

    def __call__(self, *args, **kwargs):
        self.running_seen.append(value(self.metrics, "mini_n8n_running_executions"))
        return run_workflow(*args, **kwargs)


@pytest.fixture
def engine(metrics):
    return Engine(metrics)


@pytest.fixture
def runner(redis_url, redis_client, keys, metrics, engine):
    settings = Settings(redis_url=redis_url)
    services = Services(
        redis=redis_client,
        keys=keys,
        simple_memory=InProcessMemory(),
        on_model_call=metrics.model_call,
    )
    stops = Stops(settings.redis_url, keys.stop_channel())
    store = ExecutionStore(redis_client, keys)
    leases = LeaseStore(redis_client, keys, settings.lease_seconds)
    yield ExecutionRunner(
        settings, store, leases, CountingOutbox(), services, stops, engine=engine, metrics=metrics
    )
    stops.close()


def value(metrics: WorkerMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_a_successful_execution_counts_its_outcome_waits_model_calls_and_tokens(
    runner, metrics, engine
):
    payload = launch(runner.store, "What is 19 * 23?")
    assert runner.run(payload) == "success"
    record = runner.store.get(id_of(payload))
    model_calls = len(record.run_data[MODEL])
    assert model_calls == 2  # the tool call, then the answer
    assert engine.running_seen == [1.0]  # running while the engine ran, and only then
    assert value(metrics, "mini_n8n_running_executions") == 0
    assert value(metrics, "mini_n8n_executions_total", status="success") == 1
    assert value(metrics, "mini_n8n_executions_total", status="error") == 0
    assert value(metrics, "mini_n8n_execution_duration_seconds_count") == 1
    assert value(metrics, "mini_n8n_queue_wait_seconds_count") == 1
    assert value(metrics, "mini_n8n_model_requests_total", status="success") == model_calls
    assert value(metrics, "mini_n8n_model_requests_total", status="error") == 0
    assert runner.outbox.items == 7  # "Based on the tools: Calculator returned 437."
    assert value(metrics, "mini_n8n_model_tokens_total") == runner.outbox.items


def test_a_failing_model_call_counts_as_a_model_error_and_an_errored_execution(
    runner, metrics, monkeypatch
):
    def fail(self, messages, tools, on_token=None, cancel=None):
        raise NodeExecutionError("the model is down")

    monkeypatch.setattr(MockChatModel, "invoke", fail)
    assert runner.run(launch(runner.store, "hello")) == "error"
    assert value(metrics, "mini_n8n_model_requests_total", status="error") == 1
    assert value(metrics, "mini_n8n_model_requests_total", status="success") == 0
    assert value(metrics, "mini_n8n_executions_total", status="error") == 1
    assert value(metrics, "mini_n8n_running_executions") == 0


def test_a_dropped_duplicate_counts_no_execution(runner, metrics):
    payload = launch(runner.store, "hello")
    assert runner.run(payload) == "success"
    assert runner.run(payload) == "dropped"
    assert value(metrics, "mini_n8n_executions_total", status="success") == 1
    assert value(metrics, "mini_n8n_queue_wait_seconds_count") == 1


def test_the_worker_serves_its_metrics_on_its_port_only_when_given_one(redis_url):
    off = WorkerRuntime(Settings(redis_url=redis_url))
    off.serve_metrics()
    assert off._metrics_server is None
    off.close()
    port = free_port()
    on = WorkerRuntime(Settings(redis_url=redis_url, worker_metrics_port=port))
    on.serve_metrics()
    try:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
        assert 'mini_n8n_executions_total{status="success"} 0.0' in text
        assert "mini_n8n_running_executions 0.0" in text
        assert on.services.on_model_call == on.metrics.model_call
    finally:
        on.close()
