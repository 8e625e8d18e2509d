"""Traceable logs (DESIGN.md section 4, Ops): one access line per api request, the execution id
on every api and worker line about an execution, JSON lines on request, and never a secret."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.e2e.client import stream_chat
from tests.e2e.deployment import Deployment, Process, chat_url, fresh_ids
from tests.waiting import wait_until
from tests.workflows import REDIS_CHAT, example

API_KEY = "sekrit-api-key-4242"
LINE_TIMEOUT = 10.0


@pytest.fixture(scope="module")
def text_deployment(redis_url):
    with Deployment.running(redis_url, MINI_N8N_API_KEY=API_KEY) as deploy:
        yield deploy


@pytest.fixture(scope="module")
def json_deployment(redis_url):
    with Deployment.running(redis_url, MINI_N8N_LOG_FORMAT="json") as deploy:
        yield deploy


def lines_with(proc: Process, *parts: str) -> list[str]:
    return [line for line in list(proc.lines) if all(part in line for part in parts)]


def chat(deploy: Deployment, session: str) -> tuple[str, str]:
    """(execution id, webhook path) of one streamed chat turn."""
    workflow = deploy.activate(fresh_ids(example(REDIS_CHAT)))
    url = chat_url(deploy.base, workflow)
    reply = stream_chat(url, "What is 19 * 23?", session)
    assert reply.status == 200
    return reply.headers["x-execution-id"], httpx.URL(url).path


def test_one_execution_id_is_on_the_api_access_line_and_the_worker_lines(text_deployment):
    deploy = text_deployment
    execution_id, path = chat(deploy, "s-trace")
    api = deploy.apis[0][0]
    tag = f"[execution {execution_id}]"

    access = wait_until(
        lambda: lines_with(api, tag, "mini_n8n.access", f"POST {path} 200 "),
        LINE_TIMEOUT,
        f"the api's access line for {execution_id}",
    )
    assert len(access) == 1
    assert access[0].rstrip().endswith(" ms")
    received = wait_until(
        lambda: lines_with(deploy.worker, tag, f"[{execution_id}] received"),
        LINE_TIMEOUT,
        f"the worker's line that it received {execution_id}",
    )
    succeeded = wait_until(
        lambda: lines_with(deploy.worker, tag, f"[{execution_id}] succeeded"),
        LINE_TIMEOUT,
        f"the worker's line that {execution_id} succeeded",
    )
    assert len(received) == 1 and len(succeeded) == 1
    # Lines of other requests carry no execution id.
    assert lines_with(api, "GET /healthz") == []  # probes are DEBUG
    assert all("[execution" not in line for line in lines_with(api, "Booting worker"))


def test_json_lines_parse_and_carry_the_execution_id(json_deployment):
    deploy = json_deployment
    execution_id, path = chat(deploy, "s-json")
    api = deploy.apis[0][0]

    def access_line() -> dict | None:
        records = [json.loads(line) for line in lines_with(api, '"mini_n8n.access"')]
        return next((r for r in records if r.get("execution_id") == execution_id), None)

    access = wait_until(access_line, LINE_TIMEOUT, f"the api's JSON access line for {execution_id}")
    assert access["method"] == "POST" and access["path"] == path and access["status"] == 200
    assert isinstance(access["duration_ms"], float) and access["duration_ms"] > 0
    assert access["level"] == "INFO" and access["time"].endswith("Z")
    wait_until(
        lambda: lines_with(deploy.worker, f"[{execution_id}] succeeded"),
        LINE_TIMEOUT,
        f"the worker's line that {execution_id} succeeded",
    )
    for proc in (api, deploy.worker):
        records = [json.loads(line) for line in list(proc.lines) if line.strip()]
        assert records, proc.name
        assert all({"time", "level", "logger", "message"} <= r.keys() for r in records)
    worker_records = [json.loads(line) for line in list(deploy.worker.lines)]
    about = [r for r in worker_records if execution_id in r["message"]]
    assert len(about) >= 2  # received, succeeded
    assert all(r["execution_id"] == execution_id for r in about)


def test_no_api_key_or_query_string_appears_in_any_log_line(text_deployment):
    deploy = text_deployment
    base = deploy.base
    answers = [
        httpx.get(f"{base}/rest/push?pushRef=bad%20ref&key={API_KEY}", timeout=10),
        httpx.get(f"{base}/rest/push?pushRef=tab&key=wrong-{API_KEY}", timeout=10),
        httpx.get(f"{base}/rest/workflows?key={API_KEY}", timeout=10),
    ]
    assert [r.status_code for r in answers] == [400, 401, 401]
    execution_id, _ = chat(deploy, "s-secret")
    api = deploy.apis[0][0]
    wait_until(
        lambda: (
            len(lines_with(api, "GET /rest/push ")) == 2
            and lines_with(api, "GET /rest/workflows 401 ")
            and lines_with(api, f"[execution {execution_id}]")
        ),
        LINE_TIMEOUT,
        "the access lines of the requests with ?key=",
    )
    for proc in deploy.processes:
        for line in list(proc.lines):
            assert API_KEY not in line, line
            assert "?key=" not in line and "pushRef=" not in line, line
    assert all("?" not in line for line in lines_with(api, "mini_n8n.access"))
