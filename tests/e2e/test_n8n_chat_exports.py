"""Chat exports made for n8n run unchanged on a real deployment (gunicorn + gevent api, Celery
worker, Redis) with the results n8n 2.41.1 gave (issue 38).

Each case under tests/n8n_outputs/chat/ is an n8n export (Chat Trigger 1.4, public, answering
"When Last Node Finishes") with n8n's outputs recorded by scripts/record-n8n-outputs. Here the
export is imported as it is through the editor's REST api (`POST /rest/workflows`), activated,
and the case's message is sent to its chat webhook, as n8n's chat widget sends it. Then:

- the answer is what n8n answers in lastNode mode: the JSON of the first item of the last node
  that ran (the last node in n8n's run data);
- each node's items in the execution record (`GET /rest/executions/<id>`) are the ones n8n gave,
  per output, in order: the JSON only, as tests/engine/test_n8n_outputs.py compares them.

The one change made to an export is the HTTP Request case's `http://SERVER`, which becomes the
address of the fixed-answer server (tests/fakes/http_answers.py), as in the other HTTP cases.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.deployment import Deployment, chat_url

CASES = Path(__file__).resolve().parents[1] / "n8n_outputs" / "chat"
PLACEHOLDER = "http://SERVER"
SESSION = "differential"  # the session id the recorder's stand-in trigger hands on


@pytest.fixture(scope="module")
def answers():
    from tests.fakes.http_answers import start_http_answers

    server = start_http_answers("127.0.0.1")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def deployment(redis_url):
    with Deployment.running(
        redis_url, MINI_N8N_KEEPALIVE_SECONDS="1", MINI_N8N_HTTP_ALLOWED_IP_RANGES="127.0.0.1/32"
    ) as deploy:
        yield deploy


def _json_only(outputs: list[list[dict]]) -> list[list[Any]]:
    return [[item.get("json") for item in items or []] for items in outputs]


def _n8n_answer(outputs: dict[str, list[list[dict]]]) -> Any:
    """n8n's lastNode answer: the first item's JSON of the last node that ran, from the first
    of its outputs that holds an item (n8n's extractWebhookLastNodeResponse)."""
    last = list(outputs.values())[-1]
    return next(items[0]["json"] for items in last if items)


def _imported(deployment: Deployment, case: dict, server_url: str) -> dict:
    export = json.loads(json.dumps(case["workflow"]).replace(PLACEHOLDER, server_url))
    stored = httpx.post(f"{deployment.base}/rest/workflows", json=export, timeout=30)
    assert stored.status_code == 201, stored.text
    workflow = stored.json()
    url = f"{deployment.base}/rest/workflows/{workflow['id']}/activate"
    activated = httpx.post(url, timeout=30)
    assert activated.status_code == 200, activated.text
    return workflow


@pytest.mark.parametrize("path", sorted(CASES.glob("*.json")), ids=lambda p: p.stem)
def test_a_chat_export_answers_and_runs_as_on_n8n(path: Path, deployment, answers):
    case = json.loads(path.read_text())
    workflow = _imported(deployment, case, answers.url)
    body = {"action": "sendMessage", "sessionId": SESSION, **case["input"]}
    reply = httpx.post(chat_url(deployment.base, workflow), json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    assert reply.json() == json.loads(
        json.dumps(_n8n_answer(case["outputs"])).replace(PLACEHOLDER, answers.url)
    )

    execution_id = reply.headers["x-execution-id"]
    record = httpx.get(f"{deployment.base}/rest/executions/{execution_id}", timeout=30).json()
    assert record["status"] == "success", record.get("error")
    trigger = next(n["name"] for n in case["workflow"]["nodes"] if n["type"].endswith("Trigger"))
    ran = {
        name: _json_only(runs[0].get("data", {}).get("main", []))
        for name, runs in record["runData"].items()
        if name != trigger
    }
    recorded = json.dumps(case["outputs"]).replace(PLACEHOLDER, answers.url)
    assert ran == {name: _json_only(outputs) for name, outputs in json.loads(recorded).items()}


def test_ten_chat_exports_are_checked_and_were_recorded_on_n8n_2_41_1():
    paths = sorted(CASES.glob("*.json"))
    assert len(paths) >= 10
    for path in paths:
        case = json.loads(path.read_text())
        assert case["n8n"] == "2.41.1", path
        assert case["outputs"], f"{path}: run scripts/record-n8n-outputs 'chat/*'"
        trigger = case["workflow"]["nodes"][0]
        assert trigger["type"] == "@n8n/n8n-nodes-langchain.chatTrigger", path
        assert trigger["typeVersion"] == 1.4, path
        assert trigger["parameters"]["options"]["responseMode"] == "lastNode", path
