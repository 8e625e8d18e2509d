"""A Code node through a real api and worker: one chat whose Code node loops for ever ends with
the time limit's error, while a second chat on the same worker, with a Code node of its own, is
answered meanwhile (the JavaScript runs in processes of its own: sandbox/pool.py)."""

from __future__ import annotations

import threading
import uuid

import httpx
import pytest

from tests.e2e.deployment import Deployment, chat_url, fresh_ids

# Long enough that the second chat is answered well inside it; the assertion is on the order
# of events, never on a duration.
CODE_TIMEOUT = 20
LOOP_OR_ECHO = """
if ($json.chatInput === 'loop') {
  console.log('looping');
  while (true) {}
}
return [{json: {output: `echo: ${$json.chatInput} (${$input.all().length} item)`}}];
"""


def code_chat() -> dict:
    return fresh_ids(
        {
            "name": "Code chat",
            "nodes": [
                {
                    "id": "t",
                    "name": "When chat message received",
                    "type": "@n8n/n8n-nodes-langchain.chatTrigger",
                    "typeVersion": 1.3,
                    "position": [0, 0],
                    "webhookId": str(uuid.uuid4()),
                    "parameters": {"public": True, "options": {"responseMode": "lastNode"}},
                },
                {
                    "id": "c",
                    "name": "Code",
                    "type": "n8n-nodes-base.code",
                    "typeVersion": 2,
                    "position": [200, 0],
                    "parameters": {"jsCode": LOOP_OR_ECHO},
                },
            ],
            "connections": {
                "When chat message received": {
                    "main": [[{"node": "Code", "type": "main", "index": 0}]]
                }
            },
        }
    )


@pytest.fixture(scope="module")
def deployment(redis_url):
    with Deployment.running(
        redis_url, MINI_N8N_CODE_TIMEOUT=str(CODE_TIMEOUT), MINI_N8N_CODE_PROCESSES="2"
    ) as deploy:
        yield deploy


def _post(url: str, message: str, session: str) -> httpx.Response:
    body = {"action": "sendMessage", "sessionId": session, "chatInput": message}
    return httpx.post(url, json=body, timeout=CODE_TIMEOUT + 60)


def _running_execution(deploy: Deployment, workflow_id: str) -> str:
    """The workflow's execution once a worker runs it (waiting for that event, polling Redis)."""
    while True:
        for execution_id in deploy.redis.zrange(
            deploy.keys.workflow_executions(workflow_id), 0, -1
        ):
            record = deploy.execution(execution_id)
            if record and record["status"] == "running":
                return execution_id


def test_a_code_node_that_loops_for_ever_fails_while_another_chat_on_the_worker_is_answered(
    deployment,
):
    workflow = deployment.activate(code_chat())
    url = chat_url(deployment.base, workflow)
    looping: dict[str, httpx.Response] = {}
    thread = threading.Thread(target=lambda: looping.update(r=_post(url, "loop", "s-loop")))
    thread.start()
    spinning_id = _running_execution(deployment, workflow["id"])

    answered = _post(url, "hello", "s-other")
    # Answered while the other execution's JavaScript still spins on the same worker.
    assert deployment.execution(spinning_id)["status"] == "running"
    assert (answered.status_code, answered.json()) == (200, {"output": "echo: hello (1 item)"})

    thread.join()
    response = looping["r"]
    assert response.status_code == 500
    record = deployment.execution(spinning_id)
    assert (record["status"], record["errorNode"]) == ("error", "Code")
    assert record["error"] == (
        f"Task execution timed out after {CODE_TIMEOUT} seconds (MINI_N8N_CODE_TIMEOUT)"
    )
