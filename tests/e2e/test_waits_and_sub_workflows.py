"""The Wait node, sub-workflows and the Call n8n Workflow Tool on a real api and a worker with one
slot: a waiting execution holds no worker (the one slot answers another chat meanwhile), and
resumes on whichever worker takes it; a sub-workflow runs inside its caller's execution."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from engine.nodes.lm_chat_mock import tokenize
from tests.e2e.client import stream_chat
from tests.e2e.deployment import Deployment, chat_url
from tests.sub_workflows import (
    CHAT,
    MOCK,
    agent,
    agent_with_workflow_tool,
    answer_wait_answer,
    calculator_child,
    chat_trigger,
    execute_workflow,
    greeter,
    mock_model,
    set_node,
    wait_for_call,
    workflow,
)
from tests.waiting import wait_until

USER, PASSWORD = "waiter", "s3cret-resume"


@pytest.fixture(scope="module")
def deploy(redis_url, tmp_path_factory):
    credentials = tmp_path_factory.mktemp("credentials") / "credentials.json"
    login = {"id": "resume-login", "name": "Resume login", "type": "httpBasicAuth",
             "data": {"user": USER, "password": PASSWORD}}  # fmt: skip
    credentials.write_text(json.dumps([login]))
    deployment = Deployment(redis_url, MINI_N8N_KEEPALIVE_SECONDS="1",
                            MINI_N8N_CREDENTIALS_FILE=str(credentials))  # fmt: skip
    try:
        deployment.base = deployment.start_api()
        # One slot: while an execution waits, the worker answers others only if it holds none.
        deployment.worker = deployment.start_worker(concurrency=1, WEBHOOK_URL=deployment.base)
        yield deployment
    finally:
        deployment.stop()


def _session() -> str:
    return f"s-{uuid.uuid4().hex[:12]}"


def _ask(deploy, flow: dict, message: str, session: str | None = None) -> httpx.Response:
    body = {"action": "sendMessage", "sessionId": session or _session(), "chatInput": message}
    return httpx.post(chat_url(deploy.base, flow), json=body, timeout=30)


def _finished(deploy, execution_id: str) -> dict:
    def done():
        record = deploy.execution(execution_id)
        return record if record and record["status"] not in ("new", "running", "waiting") else None

    return wait_until(done, 30, f"execution {execution_id} to finish")


def _echo_chat(deploy) -> dict:
    flow = workflow("Echo", [chat_trigger("lastNode"), agent(), mock_model()], [CHAT, "AI Agent"],
                    [(MOCK, "ai_languageModel", "AI Agent")])  # fmt: skip
    return deploy.activate(flow)


def test_a_chat_that_waits_a_moment_streams_its_answers_before_and_after_on_one_stream(deploy):
    flow = answer_wait_answer("Wait a moment", 0.01)
    deploy.activate(flow)
    reply = stream_chat(chat_url(deploy.base, flow), "hello", _session())
    assert reply.status == 200
    before, after = tokenize("You said: hello"), tokenize("You said: hello again")
    answers = ["begin", *["item"] * len(before), "end", "begin", *["item"] * len(after), "end"]
    assert reply.types() == answers  # each Agent's, in order, none repeated or lost
    assert reply.text() == "".join(before + after)
    record = deploy.execution(reply.headers["x-execution-id"])
    assert record["status"] == "success"
    assert record["waitingSince"] is not None  # it waited in Redis, not on the worker
    assert [t["executionStatus"] for t in record["runData"]["Wait"]] == ["success"]


def test_a_wait_for_a_call_holds_no_worker_and_goes_on_with_the_call_of_its_resume_url(deploy):
    flow = deploy.activate(workflow(
        "Wait for a call",
        [chat_trigger("lastNode"), set_node("Link", resumeUrl="={{ $execution.resumeUrl }}"),
         wait_for_call("Wait"), set_node("Answer", answer="={{ $json.body.answer }}")],
        [CHAT, "Link", "Wait", "Answer"],
    ))  # fmt: skip
    session = _session()
    first = _ask(deploy, flow, "start", session)
    execution_id = first.headers["x-execution-id"]
    # As in n8n, the request is answered when the wait begins, with the Wait node's items.
    resume_url = first.json()["resumeUrl"]
    assert resume_url.startswith(f"{deploy.base}/webhook-waiting/{execution_id}?signature=")
    record = deploy.execution(execution_id)
    assert (record["status"], record["waitFor"]) == ("waiting", "webhook")
    assert not deploy.redis.exists(deploy.keys.execution_lease(execution_id))
    other = _ask(deploy, _echo_chat(deploy), "meanwhile")  # the one slot is free
    assert other.json() == {"output": "You said: meanwhile"}
    # The session's next message runs too (as in n8n): the wait left the session's line.
    again_in_session = _ask(deploy, flow, "again", session)
    assert again_in_session.json()["resumeUrl"] != resume_url
    unsigned = httpx.post(resume_url.split("?")[0], json={"answer": "no"}, timeout=10)
    assert (unsigned.status_code, unsigned.json()) == (401, {"error": "Invalid token"})
    assert httpx.get(resume_url, timeout=10).status_code == 404  # the node's method is POST
    called = httpx.post(resume_url, json={"answer": "forty-two"}, timeout=10)
    assert (called.status_code, called.json()) == (200, {"message": "Workflow was started"})
    record = _finished(deploy, execution_id)
    assert record["status"] == "success"
    assert record["runData"]["Answer"][0]["data"]["main"][0][0]["json"] == {"answer": "forty-two"}
    waited = record["runData"]["Wait"][0]["data"]["main"][0][0]["json"]
    assert waited["body"] == {"answer": "forty-two"}
    assert waited["query"]["signature"] == resume_url.split("signature=")[1]
    again = httpx.post(resume_url, json={"answer": "again"}, timeout=10)
    assert again.status_code == 409


def test_a_chat_calls_a_sub_workflow_and_answers_with_its_last_nodes_items(deploy):
    child = greeter()
    deploy.workflows.save(child)  # a sub-workflow needs no activation
    flow = deploy.activate(workflow(
        "Call the greeter",
        [chat_trigger("lastNode"),
         execute_workflow("Execute Workflow", child["id"],
                          {"name": "={{ $json.chatInput }}", "age": "={{ 36 }}"},
                          {"age": "number"})],
        [CHAT, "Execute Workflow"],
    ))  # fmt: skip
    answer = _ask(deploy, flow, "Ada")
    assert answer.json() == {"greeting": "Hello Ada, next year you are 37", "name": "Ada"}
    record = deploy.execution(answer.headers["x-execution-id"])
    assert record["status"] == "success"
    assert "Greet" not in record["runData"]  # the child's nodes ran inside, not as this run's


def test_an_agent_calls_a_sub_workflow_as_its_tool_with_the_arguments_from_the_model(deploy):
    child = calculator_child()
    deploy.workflows.save(child)
    flow = deploy.activate(agent_with_workflow_tool(child["id"]))
    reply = stream_chat(chat_url(deploy.base, flow), "What is 19 * 23?", _session())
    told = '[\n  {\n    "result": "computed 19 * 23"\n  }\n]'
    assert reply.text() == f"Based on the tools: Calculator returned {told}."
    record = deploy.execution(reply.headers["x-execution-id"])
    call = record["runData"]["Calculator workflow"][0]
    assert call["inputOverride"]["ai_tool"][0][0]["json"] == {"input": "19 * 23"}
    assert call["data"]["ai_tool"][0][0]["json"] == {"response": told}


def test_a_streaming_chat_ends_its_stream_when_a_long_wait_begins_and_the_call_gets_the_end(deploy):
    """As n8n: a wait for a call (or of 65 s or more) ends the request that started it; the
    call, with the node's basic auth, gets the execution's last node's item (lastNode)."""
    wait = wait_for_call("Wait", incomingAuthentication="basicAuth", responseMode="lastNode",
                         credentials={"httpBasicAuth": {"id": "resume-login", "name": "Resume login"}})  # fmt: skip
    flow = deploy.activate(workflow(
        "Stream, then wait for a call",
        [chat_trigger("streaming"), agent("Before"), mock_model(),
         set_node("Link", resumeUrl="={{ $execution.resumeUrl }}"), wait,
         set_node("Answer", answer="={{ $json.body.answer }}")],
        [CHAT, "Before", "Link", "Wait", "Answer"],
        [(MOCK, "ai_languageModel", "Before")],
    ))  # fmt: skip
    reply = stream_chat(chat_url(deploy.base, flow), "hello", _session())
    assert reply.types() == ["begin", *["item"] * len(tokenize("You said: hello")), "end"]
    execution_id = reply.headers["x-execution-id"]
    record = deploy.execution(execution_id)
    assert record["status"] == "waiting"
    resume_url = record["runData"]["Link"][0]["data"]["main"][0][0]["json"]["resumeUrl"]
    body = {"answer": "forty-two"}
    assert httpx.post(resume_url, json=body, timeout=10).status_code == 401
    wrong = httpx.post(resume_url, json=body, auth=(USER, "nope"), timeout=10)
    assert wrong.status_code == 403
    called = httpx.post(resume_url, json=body, auth=(USER, PASSWORD), timeout=30)
    assert (called.status_code, called.json()) == (200, {"answer": "forty-two"})
    assert _finished(deploy, execution_id)["status"] == "success"


def test_a_sub_workflow_not_waited_for_runs_as_an_execution_of_its_own(deploy):
    child = greeter()
    deploy.workflows.save(child)
    flow = deploy.activate(workflow(
        "Start the greeter",
        [chat_trigger("lastNode"),
         execute_workflow("Execute Workflow", child["id"],
                          {"name": "={{ $json.chatInput }}", "age": "={{ 1 }}"}, {"age": "number"},
                          waitForSubWorkflow=False)],
        [CHAT, "Execute Workflow"],
    ))  # fmt: skip
    answer = _ask(deploy, flow, "Bo")
    assert answer.json()["chatInput"] == "Bo"  # its items go on at once

    def started():
        return deploy.redis.zrange(deploy.keys.workflow_executions(child["id"]), 0, -1)

    (other_id,) = wait_until(started, 30, "the sub-workflow's execution to be recorded")
    other = _finished(deploy, other_id)
    assert (other["status"], other["mode"]) == ("success", "integrated")
    greeted = other["runData"]["Greet"][0]["data"]["main"][0][0]["json"]
    assert greeted == {"greeting": "Hello Bo, next year you are 2", "name": "Bo"}
