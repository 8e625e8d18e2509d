"""Bounded work against real processes: an editor's expression preview that would build a
huge text is refused at once while the api keeps answering; an execution that would build one,
or that computes past its CPU time or its wall-clock timeout, fails with an error naming the
bound while another user's stream on the same worker arrives whole; a workflow of 3,000 nodes
is refused at import and at activation."""

from __future__ import annotations

import json
import subprocess
import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest

from tests.e2e.client import ChatReply, stream_chat
from tests.e2e.deployment import Deployment, chat_url, fresh_ids
from tests.e2e.sockets import process_tree
from tests.workflows import REDIS_CHAT, example, webhook_to_sets, with_model_delay

KEY = "bounded-work-key"
# Builds a 300,000-item array and joins it: much work per evaluation from a small request, so
# the api does no work of its own for the body.
HEAVY = "={{ 'ab'.repeat(150000).split('').join('-').length }}"


@pytest.fixture(scope="module")
def deployment(redis_url):
    """One api and one worker whose executions may use 1 s of CPU each."""
    with Deployment.running(
        redis_url, MINI_N8N_KEEPALIVE_SECONDS="1", MINI_N8N_EXECUTION_CPU_SECONDS="1"
    ) as deploy:
        yield deploy


def _rss_mib(pid: int) -> float:
    total = 0
    for child in process_tree(pid):
        try:
            status = Path(f"/proc/{child}/status").read_text()
        except OSError:
            continue
        total += next(int(line.split()[1]) for line in status.splitlines() if "VmRSS" in line)
    return total / 1024


def _hook(deployment: Deployment, values: list[str], count: int = 1) -> str:
    workflow = deployment.activate(fresh_ids(webhook_to_sets(values, count)))
    return f"{deployment.base}/webhook/{workflow['nodes'][0]['parameters']['path']}"


def _chat_while(deployment: Deployment, base: str, action) -> tuple[ChatReply, object]:
    """Another user's chat ("my name is Ada", a token every 50 ms) streaming from `base` while
    `action()` runs, started once the chat's first token arrived: (the reply, what it gave)."""
    workflow = deployment.activate(fresh_ids(with_model_delay(example(REDIS_CHAT), 50)))
    first_token = threading.Event()
    replies: list[ChatReply] = []

    def chat() -> None:
        replies.append(
            stream_chat(
                chat_url(base, workflow),
                "my name is Ada",
                f"ada-{uuid.uuid4().hex[:6]}",
                on_chunk=lambda c: c["type"] == "item" and first_token.set(),
            )
        )

    thread = threading.Thread(target=chat)
    thread.start()
    assert first_token.wait(30)
    result = action()
    thread.join(60)
    return replies[0], result


def _assert_whole(reply: ChatReply) -> None:
    assert reply.status == 200
    assert reply.types() == ["begin", "item", "item", "item", "item", "item", "end"]
    assert reply.text() == "Nice to meet you, Ada!"


# -- the editor's preview -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        (
            "={{ JSON.stringify('x'.repeat(400000).split(''), null, 10) }}",
            "JSON.stringify: string too long (6,000,002 > 1,000,000 characters)",
        ),
        (
            "={{ JSON.stringify(Object.entries('y'.repeat(300000))) }}",
            "expression is too expensive to evaluate (step limit reached)",  # 300,000 arrays
        ),
    ],
)
def test_a_keyed_preview_of_a_huge_stringify_is_refused_at_once_and_healthz_keeps_answering(
    deployment, expression, message
):
    base = deployment.start_api(MINI_N8N_API_KEY=KEY)
    api_pid = next(proc.pid for proc, url in deployment.apis if url == base)
    workflow = deployment.activate(fresh_ids(webhook_to_sets(["={{ 1 }}"])))
    body = {"workflowId": workflow["id"], "node": "Set 0", "expression": expression}
    argv = [
        "curl", "-s", "-H", f"Authorization: Bearer {KEY}",
        "-H", "Content-Type: application/json", "--data-binary", json.dumps(body),
        f"{base}/rest/expressions/preview",
    ]  # fmt: skip
    before = _rss_mib(api_pid)
    peak = before
    with httpx.Client(base_url=base) as client:
        client.get("/healthz")
        curl = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        while curl.poll() is None:
            assert client.get("/healthz").status_code == 200
            peak = max(peak, _rss_mib(api_pid))
    # Refused before the text is built: the steps it is charged are counted in
    # tests/engine/test_bounded_work.py, the bytes here.
    assert json.loads(curl.stdout.read()) == {
        "error": f"Expression error: {message} (expression: {expression})"
    }
    assert peak - before < 30  # MiB; was 399 -> 1,318


# -- executions -----------------------------------------------------------------------------------


def test_stringify_of_a_4_mb_body_fails_its_execution_while_another_users_stream_arrives_whole(
    deployment,
):
    hook = _hook(deployment, ["={{ JSON.stringify($json.body, null, 2) }}"])
    body = {"rows": ["y" * 44 for _ in range(90_000)]}  # 4.2 MB of JSON, 90,000 values

    def post() -> httpx.Response:
        return httpx.post(hook, json=body, timeout=60)

    reply, response = _chat_while(deployment, deployment.base, post)
    _assert_whole(reply)
    assert response.status_code == 500
    execution_id = response.headers["x-execution-id"]
    assert response.json() == {  # the webhook's caller is told which execution failed...
        "message": "Error in workflow",
        "error": f"The workflow could not answer (execution {execution_id}).",
    }
    record = deployment.execution(execution_id)  # ...and the editor why
    assert record["status"] == "error" and record["errorNode"] == "Set 0"
    assert record["error"].endswith(
        "JSON.stringify: string too long (4,680,018 > 1,000,000 characters)"
    )


def test_an_execution_past_its_cpu_seconds_fails_naming_it_while_another_stream_arrives_whole(
    deployment,
):
    hook = _hook(deployment, [HEAVY] * 5, count=50)  # far past its CPU bound

    def post() -> tuple[httpx.Response, float]:
        response = httpx.post(hook, json={}, timeout=60)
        return response, time.monotonic()

    reply, (response, answered_at) = _chat_while(deployment, deployment.base, post)
    _assert_whole(reply)
    # The chat's tokens kept coming while the other run computed: its stream, started with
    # it, ended before that run had used its second of CPU and been failed.
    assert reply.ended_at < answered_at
    assert response.status_code == 500
    error = response.json()["error"]
    assert error == "The execution used more than 1 s of CPU time (MINI_N8N_EXECUTION_CPU_SECONDS)."
    record = deployment.execution(response.headers["x-execution-id"])
    assert record["status"] == "error" and record["errorNode"].startswith("Set ")


def test_the_wall_clock_timeout_fires_while_an_execution_computes(deployment):
    queue = f"{deployment.keys.prefix}timeout"
    deployment.start_worker(
        queue=queue, MINI_N8N_EXECUTION_TIMEOUT="1", MINI_N8N_EXECUTION_CPU_SECONDS="60"
    )
    base = deployment.start_api(MINI_N8N_TASK_QUEUE=queue)
    workflow = deployment.activate(fresh_ids(webhook_to_sets([HEAVY] * 5, count=50)))
    hook = f"{base}/webhook/{workflow['nodes'][0]['parameters']['path']}"

    def post() -> httpx.Response:
        return httpx.post(hook, json={}, timeout=60)

    reply, response = _chat_while(deployment, base, post)
    _assert_whole(reply)
    assert response.status_code == 500
    assert response.json()["error"] == (
        "The execution timed out after 1 s (MINI_N8N_EXECUTION_TIMEOUT)."
    )


# -- node count -----------------------------------------------------------------------------------


def test_a_workflow_of_3000_chained_nodes_is_refused_at_import_and_at_activation(deployment):
    chained = fresh_ids(webhook_to_sets(["={{ $json.v0 }}"], count=2_999))
    expected = "the workflow has 3,000 nodes; at most 500 are allowed (MINI_N8N_MAX_NODES)"
    response = httpx.post(f"{deployment.base}/rest/workflows", json=chained, timeout=30)
    assert response.status_code == 400  # before a node is read: tests/engine/test_bounded_work.py
    assert response.json()["message"] == expected
    assert deployment.redis.get(deployment.keys.workflow(chained["id"])) is None

    deployment.workflows.save(chained)  # stored before the limit (this store has none)
    url = f"{deployment.base}/rest/workflows/{chained['id']}/activate"
    activated = httpx.post(url, timeout=30)
    assert activated.status_code == 400
    assert activated.json()["message"] == expected
    path = chained["nodes"][0]["parameters"]["path"]
    assert deployment.redis.hget(deployment.keys.webhooks(), f"POST {path}") is None
    assert not json.loads(deployment.redis.get(deployment.keys.workflow(chained["id"])))["active"]
