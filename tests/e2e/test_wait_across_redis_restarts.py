"""A Wait node's execution across a Redis restart, with real processes (a gunicorn+gevent api and a
Celery worker) on a Redis of the test's own that keeps an append-only file: restarted with it,
a wait for its time goes on at its time and its stream, open across the wait and the restart,
gets the rest of the answer; a wait for a call goes on when its resume URL is called. Restarted
empty, the waiting stream ends with a clear error line, the resume URL answers that the
execution does not exist, and the session's next message is told the webhook is gone until the
workflow is imported again (docs/architecture.md, "What each fault does")."""

from __future__ import annotations

import threading
import uuid

import httpx
import pytest

from engine.nodes.lm_chat_mock import tokenize
from mini_n8n.redis_server import EmbeddedRedis
from tests.e2e.client import ChatReply, stream_chat
from tests.e2e.deployment import Deployment, chat_url, restart_redis
from tests.sub_workflows import (
    CHAT,
    answer_wait_answer,
    chat_trigger,
    set_node,
    wait_for_call,
    workflow,
)
from tests.waiting import wait_until

WAIT_SECONDS = 4  # long enough to restart Redis inside it, short enough to keep the stream open
RECORD_GONE = "The execution record is gone."
BOUND = 60  # seconds any step here may take on a busy machine: a hang fails, never a slow step


@pytest.fixture
def deploy(tmp_path):
    server = EmbeddedRedis(data_dir=str(tmp_path / "redis")).start()
    deployment = Deployment(server.url, MINI_N8N_KEEPALIVE_SECONDS="1")
    deployment.server = server
    try:
        deployment.base = deployment.start_api()
        deployment.worker = deployment.start_worker(WEBHOOK_URL=deployment.base)
        yield deployment
    finally:
        deployment.stop()
        deployment.server.stop()  # the one running now: the test started another


def _session() -> str:
    return f"s-{uuid.uuid4().hex[:12]}"


def _waiting_chat(deploy: Deployment) -> dict:
    """Streaming: an Agent answers, the Wait node waits WAIT_SECONDS, another Agent answers."""
    return deploy.activate(answer_wait_answer("Wait across a restart", WAIT_SECONDS))


def _call_chat(deploy: Deployment) -> dict:
    """lastNode: answered with the resume URL when the wait for a call begins (as n8n)."""
    return deploy.activate(workflow(
        "Wait for a call across a restart",
        [chat_trigger("lastNode"), set_node("Link", resumeUrl="={{ $execution.resumeUrl }}"),
         wait_for_call("Wait"), set_node("Answer", answer="={{ $json.body.answer }}")],
        [CHAT, "Link", "Wait", "Answer"],
    ))  # fmt: skip


def _stream_until_waiting(deploy: Deployment, flow: dict, session: str):
    """The chat streamed in a thread; returns once its execution waits (the first answer
    streamed): the thread, where its reply lands, and the execution's id."""
    replies: dict[str, ChatReply] = {}
    first_end = threading.Event()

    def on_chunk(chunk: dict) -> None:
        if chunk["type"] == "end":
            first_end.set()

    url = chat_url(deploy.base, flow)
    thread = threading.Thread(
        target=lambda: replies.update(r=stream_chat(url, "hello", session, BOUND * 2, on_chunk))
    )
    thread.start()
    assert first_end.wait(BOUND), "the first answer never streamed"
    (execution_id,) = deploy.redis.zrange(deploy.keys.workflow_executions(flow["id"]), 0, -1)
    record = wait_until(
        lambda: (r := deploy.execution(execution_id)) and r["status"] == "waiting" and r,
        BOUND,
        "the execution to wait",
    )
    return thread, replies, record


def _finished(deploy: Deployment, execution_id: str) -> dict:
    def done():
        record = deploy.execution(execution_id)
        return record if record and record["status"] not in ("new", "running", "waiting") else None

    return wait_until(done, BOUND, f"execution {execution_id} to finish")


def _ask(deploy: Deployment, flow: dict, message: str, session: str) -> httpx.Response:
    body = {"action": "sendMessage", "sessionId": session, "chatInput": message}
    return httpx.post(chat_url(deploy.base, flow), json=body, timeout=BOUND)


def test_a_wait_for_its_time_survives_a_redis_restart_with_its_aof_and_streams_the_rest(deploy):
    flow = _waiting_chat(deploy)
    thread, replies, waiting = _stream_until_waiting(deploy, flow, _session())

    deploy.server = restart_redis(deploy.server)
    # Its record came back from the append-only file (by now it may have gone on already).
    assert deploy.execution(waiting["id"])["waitingSince"] == waiting["waitingSince"]

    thread.join(BOUND * 2)
    reply = replies["r"]
    before, after = tokenize("You said: hello"), tokenize("You said: hello again")
    answers = ["begin", *["item"] * len(before), "end", "begin", *["item"] * len(after), "end"]
    assert reply.types() == answers  # one stream, across the wait and the restart
    assert reply.text() == "".join(before + after)
    record = _finished(deploy, waiting["id"])
    assert record["status"] == "success"
    assert [t["executionStatus"] for t in record["runData"]["Wait"]] == ["success"]
    # It went on at its time, not before: the After agent started once the wait was over.
    assert record["runData"]["After"][0]["startTime"] >= waiting["waitTill"]


def test_a_wait_for_a_call_survives_a_redis_restart_with_its_aof_and_goes_on_when_called(deploy):
    flow = _call_chat(deploy)
    first = _ask(deploy, flow, "start", _session())
    execution_id = first.headers["x-execution-id"]
    resume_url = first.json()["resumeUrl"]
    assert deploy.execution(execution_id)["status"] == "waiting"

    deploy.server = restart_redis(deploy.server)
    assert deploy.execution(execution_id)["status"] == "waiting"  # back from the append-only file

    called = httpx.post(resume_url, json={"answer": "forty-two"}, timeout=BOUND)
    assert (called.status_code, called.json()) == (200, {"message": "Workflow was started"})
    record = _finished(deploy, execution_id)
    assert record["status"] == "success"
    assert record["runData"]["Answer"][0]["data"]["main"][0][0]["json"] == {"answer": "forty-two"}


def test_an_empty_redis_restart_ends_the_waiting_stream_with_an_error_and_the_next_message_is_told(
    deploy,
):
    flow = _waiting_chat(deploy)
    session = _session()
    thread, replies, waiting = _stream_until_waiting(deploy, flow, session)

    deploy.server = restart_redis(deploy.server, empty=True)

    thread.join(BOUND * 2)
    assert not thread.is_alive(), "the waiting stream never ended"
    reply = replies["r"]
    before = tokenize("You said: hello")
    assert reply.types() == ["begin", *["item"] * len(before), "end", "error"]
    assert reply.chunks[-1]["content"] == RECORD_GONE
    assert deploy.execution(waiting["id"]) is None  # nothing of it came back to life
    refused = _ask(deploy, flow, "are you there?", session)
    assert refused.status_code == 404
    assert "is not registered" in refused.json()["message"]

    deploy.activate(flow)  # the workflows imported again
    again = stream_chat(chat_url(deploy.base, flow), "hello", session, BOUND)
    assert again.types()[:1] == ["begin"] and again.types()[-1] == "end"
    assert again.text() == "".join(before + tokenize("You said: hello again"))


def test_an_empty_redis_restart_makes_a_waiting_resume_url_answer_that_its_execution_is_gone(
    deploy,
):
    flow = _call_chat(deploy)
    first = _ask(deploy, flow, "start", _session())
    execution_id = first.headers["x-execution-id"]
    resume_url = first.json()["resumeUrl"]

    deploy.server = restart_redis(deploy.server, empty=True)

    called = httpx.post(resume_url, json={"answer": "forty-two"}, timeout=BOUND)
    assert called.status_code == 404
    assert called.json()["message"] == f'The execution "{execution_id}" does not exist.'
