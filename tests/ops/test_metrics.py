"""Metrics from every process, scraped by a real Prometheus: a gunicorn api with two worker
processes (multiprocess mode, summed in one /metrics) and a Celery worker on its metrics port.
Ten chats and one bad request later, each side's own /metrics and Prometheus's HTTP API give the
same, exact numbers."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from urllib.parse import urlsplit

import httpx
from prometheus_client.parser import text_string_to_metric_families

from mini_n8n.redis_server import free_port
from tests.e2e.client import stream_chat
from tests.e2e.deployment import Deployment, chat_url, fresh_ids
from tests.ops import prometheus
from tests.waiting import wait_until
from tests.workflows import REDIS_CHAT, example, with_response_mode

CHATS = 10
SCRAPED_WITHIN = 30.0  # seconds; scrapes are every second

API_EXPECTED = {
    'mini_n8n_webhook_requests_total{status="200"}': CHATS,
    'mini_n8n_webhook_requests_total{status="400"}': 1,
    "mini_n8n_time_to_first_chunk_seconds_count": CHATS,
    "mini_n8n_open_streams": 0,
}
WORKER_EXPECTED = {
    'mini_n8n_executions_total{status="success"}': CHATS,
    'mini_n8n_executions_total{status="error"}': 0,
    "mini_n8n_execution_duration_seconds_count": CHATS,
    "mini_n8n_queue_wait_seconds_count": CHATS,
    "mini_n8n_running_executions": 0,
}


def scrape(url: str) -> dict[str, float]:
    """A /metrics page as `name{label="value"}` -> value (the PromQL selector of each series)."""
    text = httpx.get(url, timeout=5.0).text
    return {
        _selector(sample.name, sample.labels): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _selector(name: str, labels: dict[str, str]) -> str:
    inside = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inside}}}" if inside else name


def scraped(wait_for: dict[str, float], url: str, what: str) -> dict[str, float]:
    """The first scrape of `url` that shows `wait_for` (bounded: the last lines are published a
    moment after a stream ends)."""

    def probe() -> dict[str, float] | None:
        found = scrape(url)
        return found if matches(found, wait_for) else None

    return wait_until(probe, SCRAPED_WITHIN, f"{what} to show {wait_for}")


def matches(actual: Mapping[str, float | None], expected: dict[str, float]) -> bool:
    return all(actual.get(name) == value for name, value in expected.items())


def test_prometheus_scrapes_exact_webhook_and_execution_counts_from_api_and_worker(
    redis_url, tmp_path
):
    prometheus.binary()  # fails at once, naming scripts/ensure-prometheus, when missing
    worker_port = free_port()
    env = {
        "WEB_CONCURRENCY": "2",  # two api processes: their metrics are summed
        "MINI_N8N_WORKER_METRICS_PORT": str(worker_port),
        "TMPDIR": str(tmp_path),  # where the api makes its multiprocess metrics directory
    }
    with Deployment.running(redis_url, **env) as deploy:
        metrics_dirs = list(tmp_path.glob("mini-n8n-metrics-*"))
        assert len(metrics_dirs) == 1
        workflow = deploy.activate(fresh_ids(with_response_mode(example(REDIS_CHAT), "streaming")))
        url = chat_url(deploy.base, workflow)
        replies = [
            stream_chat(url, f"What is {n} * 3?", session=uuid.uuid4().hex) for n in range(CHATS)
        ]
        assert [r.text() for r in replies] == [
            f"Based on the tools: Calculator returned {n * 3}." for n in range(CHATS)
        ]
        bad = httpx.post(url, json={"sessionId": "s", "chatInput": 5}, timeout=10.0)
        assert bad.status_code == 400
        assert list(metrics_dirs[0].glob("*.db"))  # the api processes' values, in files

        api_url, worker_url = f"{deploy.base}/metrics", f"http://127.0.0.1:{worker_port}/metrics"
        api = scraped(wait_for=API_EXPECTED, url=api_url, what="the api's /metrics")
        assert api.get('mini_n8n_webhook_requests_total{status="404"}') is None
        assert api["mini_n8n_stream_bytes_total"] > 0
        worker = scraped(wait_for=WORKER_EXPECTED, url=worker_url, what="the worker's /metrics")
        assert worker['mini_n8n_model_requests_total{status="success"}'] == 2 * CHATS
        assert worker["mini_n8n_model_tokens_total"] > 0

        targets = {"api": urlsplit(deploy.base).netloc, "worker": f"127.0.0.1:{worker_port}"}
        with prometheus.running(tmp_path / "prometheus", targets) as prom:

            def queried() -> dict[str, float | None]:
                return {name: prom.value(name) for name in [*API_EXPECTED, *WORKER_EXPECTED]}

            wait_until(
                lambda: matches(queried(), {**API_EXPECTED, **WORKER_EXPECTED}),
                SCRAPED_WITHIN,
                "Prometheus to have scraped the same numbers",
            )
            assert prom.value("sum(up)") == 2  # both targets, each up
            assert prom.query("mini_n8n_webhook_requests_total") == {
                (("__name__", "mini_n8n_webhook_requests_total"), ("status", "200")): CHATS,
                (("__name__", "mini_n8n_webhook_requests_total"), ("status", "400")): 1,
            }
    assert not list(tmp_path.glob("mini-n8n-metrics-*"))  # removed when the api stopped
