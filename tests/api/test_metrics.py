"""The api's /metrics through the Flask test client against a real valkey (executions run in
the api process): webhook requests by status, open streams, time to first chunk, bytes sent.
One process, no PROMETHEUS_MULTIPROC_DIR: the counters are the process's own and shared with
other test modules, so each test compares before and after. Several gunicorn processes summed
up, scraped by a real Prometheus, are in tests/ops."""

from __future__ import annotations

import uuid

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from api.app import create_app
from core.keys import Keys
from core.settings import Settings
from core.workflow_store import WorkflowStore
from engine.workflow import load_workflow
from tests.workflows import REDIS_CHAT, example, node, with_response_mode

CHAT = "/webhook/metrics-chat"


@pytest.fixture(scope="module")
def client(redis_url):
    keys = Keys(prefix=f"mx{uuid.uuid4().hex[:8]}:")
    settings = Settings(redis_url=redis_url, key_prefix=keys.prefix, executions_mode="regular")
    app = create_app(settings=settings)
    workflow = with_response_mode(example(REDIS_CHAT), "streaming")
    workflow["id"] = "metrics-chat"
    node(workflow, "When chat message received")["parameters"]["path"] = "metrics-chat"
    conn = redis.Redis.from_url(redis_url, decode_responses=True)
    store = WorkflowStore(conn, keys, load_workflow)
    store.save(workflow)
    store.activate(workflow["id"])
    yield app.test_client()
    app.extensions["mini_n8n"].close()
    conn.close()


def scrape(client) -> dict[tuple[str, tuple], float]:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.content_type.startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.get_data(as_text=True))
        for sample in family.samples
    }


def get(samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def chat(message: str) -> dict:
    return {"action": "sendMessage", "sessionId": uuid.uuid4().hex, "chatInput": message}


def test_metrics_count_webhook_requests_by_status_with_first_chunk_times_and_bytes(client):
    before = scrape(client)
    streamed = client.post(CHAT, json=chat("What is 19 * 23?"))
    bad = client.post(CHAT, json={**chat("hi"), "chatInput": 5})
    missing = client.post("/webhook/no-such-hook", json=chat("hi"))
    client.get("/healthz")  # not a webhook: not counted
    sent = len(streamed.data)  # read to its end (the test client streams it lazily)
    after = scrape(client)
    assert (streamed.status_code, bad.status_code, missing.status_code) == (200, 400, 404)

    def grew(name: str, **labels: str) -> float:
        return get(after, name, **labels) - get(before, name, **labels)

    requests = "mini_n8n_webhook_requests_total"
    assert grew(requests, status="200") == 1
    assert grew(requests, status="400") == 1
    assert grew(requests, status="404") == 1
    assert grew("mini_n8n_time_to_first_chunk_seconds_count") == 1
    assert grew("mini_n8n_stream_bytes_total") == sent
    assert get(after, "mini_n8n_open_streams") == 0


def test_a_stream_is_open_while_it_is_being_sent_and_closed_after(client):
    response = client.post(CHAT, json=chat("my name is Ada"), buffered=False)
    body = iter(response.response)
    first = next(body)
    assert b'"type":"begin"' in (first if isinstance(first, bytes) else first.encode())
    assert get(scrape(client), "mini_n8n_open_streams") == 1
    response.close()  # the client goes away mid-stream
    assert get(scrape(client), "mini_n8n_open_streams") == 0
