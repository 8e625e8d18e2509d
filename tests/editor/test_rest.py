"""The editor's REST api and push stream over plain HTTP, against real api and worker
processes."""

from __future__ import annotations

import json
import threading

import httpx
import pytest

from tests.e2e.deployment import fresh_ids
from tests.editor.conftest import API_KEY
from tests.waiting import wait_until
from tests.workflows import GREETING, REDIS_CHAT, example, with_model_delay

ANSWER = "Based on the tools: Calculator returned 87."
AUTH = {"X-N8N-API-KEY": API_KEY}
WAIT_S = 20.0


class PushListener:
    """Reads one tab's SSE stream in a thread and keeps its events."""

    def __init__(self, base: str, push_ref: str):
        self.events: list[dict] = []
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._client = httpx.Client(timeout=httpx.Timeout(30, read=None))
        request = self._client.build_request(
            "GET", f"{base}/rest/push", params={"pushRef": push_ref, "key": API_KEY}
        )
        self.response = self._client.send(request, stream=True)
        assert self.response.status_code == 200, self.response.read()
        self._lines = self.response.iter_lines()
        assert next(self._lines).startswith("retry:")  # the subscription is confirmed
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for line in self._lines:
                with self._changed:
                    self.lines.append(line)
                    if line.startswith("data: "):
                        self.events.append(json.loads(line[6:]))
                    self._changed.notify_all()
        except httpx.HTTPError:
            pass  # closed by the test

    def wait_for(self, predicate, timeout: float = WAIT_S) -> list[dict]:
        with self._changed:
            if not self._changed.wait_for(lambda: predicate(self.events), timeout):
                raise AssertionError(f"push events never matched; got {self.events}")
            return list(self.events)

    def finished(self, execution_id: str) -> list[dict]:
        def done(events):
            return any(
                e["type"] == "executionFinished" and e["data"]["executionId"] == execution_id
                for e in events
            )

        events = self.wait_for(done)
        return [e for e in events if e["data"]["executionId"] == execution_id]

    def close(self) -> None:
        self.response.close()
        self._client.close()


@pytest.fixture
def client(deployment):
    with httpx.Client(base_url=f"{deployment.base}/rest", headers=AUTH, timeout=30) as c:
        yield c


@pytest.fixture
def listener(deployment):
    opened = []

    def listen(push_ref: str) -> PushListener:
        opened.append(PushListener(deployment.base, push_ref))
        return opened[-1]

    yield listen
    for one in opened:
        one.close()


def stored(client, workflow: dict) -> dict:
    response = client.post("/workflows", json=fresh_ids(workflow))
    assert response.status_code == 201, response.text
    return response.json()


def wait_finished(client, execution_id: str) -> dict:
    def finished() -> dict | None:
        record = client.get(f"/executions/{execution_id}").json()
        return record if record["status"] not in ("new", "running") else None

    return wait_until(finished, WAIT_S, f"execution {execution_id} to finish")


# --- auth -------------------------------------------------------------------------------------
def test_rest_refuses_requests_without_the_key(deployment):
    url = f"{deployment.base}/rest/workflows"
    missing = httpx.get(url)
    assert missing.status_code == 401
    assert "api key is required" in missing.json()["message"]
    assert missing.headers["www-authenticate"].startswith("Bearer")
    assert httpx.get(url, headers={"X-N8N-API-KEY": "wrong"}).status_code == 401
    assert httpx.get(url, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert httpx.get(url, params={"key": API_KEY}).status_code == 401  # query: push only
    assert httpx.post(f"{deployment.base}/rest/executions/x/stop").status_code == 401
    assert httpx.get(url, headers={"Authorization": f"Bearer {API_KEY}"}).status_code == 200
    assert httpx.get(url, headers=AUTH).status_code == 200


def test_without_a_configured_key_rest_is_refused_unless_bound_to_loopback(deployment):
    public = deployment.start_api(MINI_N8N_API_KEY="", HOST="0.0.0.0")
    refused = httpx.get(f"{public}/rest/workflows")
    assert refused.status_code == 403
    assert "MINI_N8N_API_KEY" in refused.json()["message"]
    assert httpx.get(f"{public}/rest/push", params={"pushRef": "a"}).status_code == 403
    assert httpx.get(f"{public}/healthz").status_code == 200
    local = deployment.start_api(MINI_N8N_API_KEY="", HOST="127.0.0.1")
    assert httpx.get(f"{local}/rest/workflows").status_code == 200


def test_push_needs_the_key_and_a_valid_push_ref(deployment):
    url = f"{deployment.base}/rest/push"
    assert httpx.get(url, params={"pushRef": "tab"}).status_code == 401
    assert httpx.get(url, params={"pushRef": "tab", "key": "wrong"}).status_code == 401
    bad = httpx.get(url, params={"pushRef": "a:b", "key": API_KEY})
    assert bad.status_code == 400 and "pushRef" in bad.json()["message"]
    with httpx.stream("GET", url, params={"pushRef": "tab"}, headers=AUTH, timeout=10) as ok:
        assert ok.status_code == 200
        assert ok.headers["content-type"].startswith("text/event-stream")
        assert ok.headers["cache-control"] == "no-cache"
        assert ok.headers["x-accel-buffering"] == "no"
        assert next(ok.iter_lines()) == "retry: 1000"


def test_editor_page_is_served_at_the_root(deployment):
    page = httpx.get(f"{deployment.base}/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert '<script type="module" src="/static/editor/main.js">' in page.text
    script = httpx.get(f"{deployment.base}/static/editor/main.js")
    assert script.status_code == 200
    assert "javascript" in script.headers["content-type"]


# --- workflows --------------------------------------------------------------------------------
def test_workflows_can_be_created_read_updated_and_deleted(client):
    workflow = fresh_ids(example(REDIS_CHAT))
    created = client.post("/workflows", json=workflow)
    assert created.status_code == 201
    assert created.json()["id"] == workflow["id"] and created.json()["active"] is False
    assert client.post("/workflows", json=workflow).status_code == 409
    summaries = client.get("/workflows").json()["data"]
    mine = next(w for w in summaries if w["id"] == workflow["id"])
    assert mine == {"id": workflow["id"], "name": workflow["name"], "active": False, "tags": []}
    assert client.get(f"/workflows/{workflow['id']}").json()["nodes"] == workflow["nodes"]

    renamed = client.put(f"/workflows/{workflow['id']}", json={**workflow, "name": "Renamed"})
    assert renamed.status_code == 200 and renamed.json()["name"] == "Renamed"
    patched = client.patch(f"/workflows/{workflow['id']}", json={"name": "Patched"})
    assert patched.json()["name"] == "Patched" and patched.json()["nodes"] == workflow["nodes"]
    mismatch = client.put(f"/workflows/{workflow['id']}", json={**workflow, "id": "other"})
    assert mismatch.status_code == 400

    assert client.delete(f"/workflows/{workflow['id']}").json() == {
        "id": workflow["id"],
        "deleted": True,
    }
    assert client.get(f"/workflows/{workflow['id']}").status_code == 404
    assert client.delete(f"/workflows/{workflow['id']}").status_code == 404
    without_id = {k: v for k, v in workflow.items() if k != "id"}
    assert client.put("/workflows/nope", json=without_id).status_code == 404


def test_bad_workflows_get_clear_json_errors(client):
    unknown = {"name": "x", "nodes": [{"name": "A", "type": "nope.node", "position": [0, 0]}]}
    response = client.post("/workflows", json=unknown)
    assert response.status_code == 400
    assert response.json() == {"message": 'Node "A": unknown node type "nope.node"', "node": "A"}
    not_json = client.post("/workflows", content=b"{", headers={"Content-Type": "application/json"})
    assert not_json.status_code == 400
    assert not_json.json()["message"] == "The request body is not valid JSON"
    assert client.post("/workflows", json=[1, 2]).status_code == 400


def test_activate_and_deactivate_register_and_drop_the_chat_webhook(deployment, client):
    workflow = stored(client, example(REDIS_CHAT))
    trigger = next(n for n in workflow["nodes"] if n["type"].endswith("chatTrigger"))
    chat_url = f"{deployment.base}/webhook/{trigger['webhookId']}/chat"
    body = {"action": "loadPreviousSession", "sessionId": "nobody"}
    assert httpx.post(chat_url, json=body).status_code == 404
    activated = client.post(f"/workflows/{workflow['id']}/activate")
    assert activated.status_code == 200
    assert activated.json()["active"] is True and activated.json()["warnings"] == []
    assert httpx.post(chat_url, json=body).json() == {"data": []}
    assert client.post(f"/workflows/{workflow['id']}/deactivate").json()["active"] is False
    assert httpx.post(chat_url, json=body).status_code == 404

    no_trigger = {"name": "idle", "nodes": [{"name": "N", "type": "n8n-nodes-base.noOp"}]}
    idle = client.post("/workflows", json=no_trigger).json()
    refused = client.post(f"/workflows/{idle['id']}/activate")
    assert refused.status_code == 409 and "no trigger" in refused.json()["message"]
    assert client.post("/workflows/nope/activate").status_code == 404


# --- manual chat runs and push ----------------------------------------------------------------
def test_manual_chat_run_answers_at_once_and_pushes_its_events(deployment, client, listener):
    workflow = stored(client, with_model_delay(example(REDIS_CHAT), 40))
    push = listener("tab-run")
    body = {"sessionId": "rest-run", "chatInput": "What is 29 * 3?", "pushRef": "tab-run"}
    response = client.post(f"/workflows/{workflow['id']}/chat", json=body)
    assert response.status_code == 200
    execution_id = response.json()["executionId"]
    assert response.json() == {"executionId": execution_id, "sessionId": "rest-run"}
    assert deployment.execution(execution_id)["status"] in ("new", "running")  # not waited for

    events = push.finished(execution_id)
    types = [e["type"] for e in events]
    assert types[0] == "executionStarted" and types[-1] == "executionFinished"
    assert events[-1]["data"] == {"executionId": execution_id, "status": "success", "error": None}
    model_runs = [
        e["data"]
        for e in events
        if e["type"] == "nodeExecuteAfter" and e["data"]["nodeName"] == "Mock Chat Model"
    ]
    assert [(r["runIndex"], r["itemCount"]) for r in model_runs] == [(0, 1), (1, 1)]
    chunks = [e["data"]["chunk"] for e in events if e["type"] == "chatChunk"]
    assert chunks[0]["type"] == "begin" and chunks[-1]["type"] == "end"
    assert "".join(c.get("content", "") for c in chunks if c["type"] == "item") == ANSWER

    record = client.get(f"/executions/{execution_id}").json()
    assert record["status"] == "success" and record["mode"] == "manual"
    assert len(record["runData"]["Mock Chat Model"]) == 2
    calculator = record["runData"]["Calculator"][0]
    assert calculator["inputOverride"]["ai_tool"][0][0]["json"] == {"input": "29 * 3"}
    listed = client.get("/executions", params={"workflowId": workflow["id"]}).json()["data"]
    assert [e["id"] for e in listed] == [execution_id]
    assert "runData" not in listed[0]


def test_manual_chat_run_rejects_bad_input(client):
    workflow = stored(client, example(REDIS_CHAT))
    url = f"/workflows/{workflow['id']}/chat"
    ok = {"sessionId": "s", "chatInput": "hi", "pushRef": "tab"}

    def error(body, path=url):
        response = client.post(path, json=body)
        return response.status_code, response.json()["message"]

    assert error({**ok, "pushRef": None}) == (
        400,
        '"pushRef" must be 1-64 letters, digits, "-" or "_"',
    )
    assert error({**ok, "pushRef": "push:other"})[0] == 400
    assert error({**ok, "chatInput": 42}) == (400, '"chatInput" must be a string')
    assert error({**ok, "sessionId": "a\nb"})[0] == 400
    assert error({**ok, "triggerNode": "AI Agent"})[0] == 400
    assert error(ok, "/workflows/nope/chat")[0] == 404
    greeting = stored(client, example(GREETING))
    assert error(ok, f"/workflows/{greeting['id']}/chat") == (
        400,
        "this workflow has no Chat Trigger to send a message to",
    )
    raw = client.post(url, content=b"chatInput=hi")  # not JSON: REST takes JSON bodies only
    assert raw.status_code == 415
    assert raw.json()["message"] == "The request body must be JSON (Content-Type: application/json)"


# --- executions -------------------------------------------------------------------------------
def test_executions_requests_are_validated(client):
    assert client.get("/executions").status_code == 400
    assert client.get("/executions", params={"workflowId": "w", "limit": "0"}).status_code == 400
    assert client.get("/executions", params={"workflowId": "w", "limit": "x"}).status_code == 400
    assert client.get("/executions", params={"workflowId": "w"}).json() == {"data": []}
    assert client.get("/executions/nope").status_code == 404
    missing = client.post("/executions/nope/stop")
    assert missing.status_code == 404
    assert missing.json() == {"message": "execution nope not found"}


def test_stop_cancels_a_running_execution(client, listener):
    workflow = stored(client, with_model_delay(example(REDIS_CHAT), 300))
    push = listener("tab-stop")
    body = {"sessionId": "rest-stop", "chatInput": "say a long thing please", "pushRef": "tab-stop"}
    execution_id = client.post(f"/workflows/{workflow['id']}/chat", json=body).json()["executionId"]
    push.wait_for(lambda events: any(e["type"] == "chatChunk" for e in events))
    stopped = client.post(f"/executions/{execution_id}/stop")
    assert stopped.status_code == 200
    assert stopped.json()["id"] == execution_id and stopped.json()["status"] == "running"
    finished = push.finished(execution_id)[-1]["data"]
    assert finished["status"] == "canceled"
    assert client.get(f"/executions/{execution_id}").json()["status"] == "canceled"


def test_stop_cancels_a_queued_execution_at_once(client):
    workflow = stored(client, with_model_delay(example(REDIS_CHAT), 300))
    url = f"/workflows/{workflow['id']}/chat"
    body = {"sessionId": "rest-queue", "chatInput": "say a long thing please", "pushRef": "q"}
    first = client.post(url, json=body).json()["executionId"]
    second = client.post(url, json=body).json()["executionId"]  # waits for its turn
    stopped = client.post(f"/executions/{second}/stop").json()
    assert stopped["status"] == "canceled"
    assert stopped["error"] == "The execution was stopped before it started."
    client.post(f"/executions/{first}/stop")
    assert wait_finished(client, first)["status"] == "canceled"


# --- chat sessions ----------------------------------------------------------------------------
def test_chat_sessions_can_be_listed_shown_and_cleared(client):
    workflow = stored(client, example(REDIS_CHAT))
    body = {"sessionId": "rest-memory", "chatInput": "What is 29 * 3?", "pushRef": "m"}
    execution_id = client.post(f"/workflows/{workflow['id']}/chat", json=body).json()["executionId"]
    assert wait_finished(client, execution_id)["status"] == "success"
    assert "rest-memory" in client.get("/sessions").json()["data"]
    assert client.get("/sessions/rest-memory").json() == {
        "id": "rest-memory",
        "messages": [
            {"role": "human", "content": "What is 29 * 3?"},
            {"role": "ai", "content": ANSWER},
        ],
    }
    assert client.delete("/sessions/rest-memory").json() == {"id": "rest-memory", "cleared": True}
    assert client.get("/sessions/rest-memory").status_code == 404
    assert "rest-memory" not in client.get("/sessions").json()["data"]
