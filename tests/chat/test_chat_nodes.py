"""Conversations inside one execution over n8n's chat WebSocket, on a real deployment (gunicorn +
gevent api, Celery worker, Redis): Chat Trigger (responseNodes) -> Chat "Hi! What is your name?"
(waits) -> Chat "Nice to meet you, <reply>!" (does not wait)."""

from __future__ import annotations

import time
import uuid

import pytest
from websockets.exceptions import ConnectionClosed

from core.executions import ExecutionStore
from core.stops import request_stop
from tests.chat.conversation import (
    CONTINUE,
    FIRST,
    HEARTBEAT,
    ask_name_workflow,
    error_message,
    next_frame,
    open_chat,
    reply,
    start,
)
from tests.waiting import wait_until
from tests.workflows import node


def _session() -> str:
    return f"s-{uuid.uuid4().hex[:12]}"


def test_the_client_gets_the_question_replies_and_gets_the_answer_then_the_socket_closes(
    chat_deployment,
):
    deploy = chat_deployment
    workflow = deploy.activate(ask_name_workflow())
    session = _session()
    execution_id = start(deploy.base, workflow, session)
    with open_chat(deploy.base, session, execution_id) as ws:
        assert next_frame(ws) == FIRST
        waiting = deploy.execution(execution_id)
        assert waiting["status"] == "waiting"
        assert waiting["waitingNode"] == "Ask name"
        reply(ws, session, "Ada")
        assert next_frame(ws) == "Nice to meet you, Ada!"
        assert next_frame(ws) == CONTINUE
        with pytest.raises(ConnectionClosed):
            next_frame(ws)
    record = deploy.execution(execution_id)
    assert record["status"] == "success"
    # n8n's chat service: {sessionId, action, chatInput}, no `files` beside them.
    assert record["runData"]["Ask name"][0]["data"]["main"][0][0] == {
        "json": {"sessionId": session, "action": "sendMessage", "chatInput": "Ada"}
    }


def test_a_reply_s_files_reach_the_chat_node_as_binary_data(chat_deployment):
    deploy = chat_deployment
    workflow = deploy.activate(ask_name_workflow())
    session = _session()
    execution_id = start(deploy.base, workflow, session)
    note = {"name": "note.txt", "type": "text/plain", "data": "data:text/plain;base64,aGk="}
    with open_chat(deploy.base, session, execution_id) as ws:
        assert next_frame(ws) == FIRST
        reply(ws, session, "Ada", [note])
        assert next_frame(ws) == "Nice to meet you, Ada!"
    wait_until(lambda: deploy.execution(execution_id)["status"] == "success", 20, "the end")
    item = deploy.execution(execution_id)["runData"]["Ask name"][0]["data"]["main"][0][0]
    assert "files" not in item["json"]
    assert item["binary"] == {
        "data_0": {
            "data": "aGk=",
            "mimeType": "text/plain",
            "fileName": "note.txt",
            "fileExtension": "txt",
            "fileSize": "2 B",
            "fileType": "text",
        }
    }


def test_a_waiting_execution_holds_no_worker_and_keeps_its_session_turn(chat_deployment):
    deploy = chat_deployment
    workflow = deploy.activate(ask_name_workflow())
    session = _session()
    execution_id = start(deploy.base, workflow, session)
    with open_chat(deploy.base, session, execution_id) as ws:
        assert next_frame(ws) == FIRST
        assert deploy.redis.zscore(deploy.keys.running(), execution_id) is None  # no lease
        line = deploy.keys.session_queue(workflow["id"], session)
        assert deploy.redis.lrange(line, 0, -1) == [execution_id]
        # A message POSTed to the session meanwhile is the reply, not a second execution.
        assert start(deploy.base, workflow, session, "Grace") == execution_id
        assert next_frame(ws) == CONTINUE  # the wait ended without a reply on this socket
        assert next_frame(ws) == "Nice to meet you, Grace!"
    wait_until(
        lambda: deploy.execution(execution_id)["status"] == "success", 10, "the execution to end"
    )
    assert deploy.redis.zcard(deploy.keys.workflow_executions(workflow["id"])) == 1


def test_heartbeats_come_when_quiet_and_their_acks_are_taken(chat_deployment):
    deploy = chat_deployment
    workflow = deploy.activate(ask_name_workflow())
    session = _session()
    execution_id = start(deploy.base, workflow, session)
    with open_chat(deploy.base, session, execution_id) as ws:
        assert next_frame(ws) == FIRST
        assert ws.recv(timeout=10) == HEARTBEAT  # the deployment's keepalive is 1 s
        ws.send("n8n|heartbeat-ack")
        reply(ws, session, "Ada")
        assert next_frame(ws) == "Nice to meet you, Ada!"


def test_a_socket_whose_client_leaves_heartbeats_unanswered_is_closed(chat_deployment):
    deploy = chat_deployment
    workflow = deploy.activate(ask_name_workflow())
    session = _session()
    execution_id = start(deploy.base, workflow, session)
    with open_chat(deploy.base, session, execution_id) as ws:
        assert next_frame(ws) == FIRST
        opened = time.monotonic()
        frames = []
        with pytest.raises(ConnectionClosed) as closed:
            while True:  # never acknowledged
                frames.append(ws.recv(timeout=20))
        silent_for = time.monotonic() - opened
    assert set(frames) == {HEARTBEAT}
    assert closed.value.rcvd.code == 1001
    assert closed.value.rcvd.reason == "no heartbeat acknowledgement for 5 s"
    assert silent_for >= 5  # MINI_N8N_CHAT_HEARTBEAT_TIMEOUT of the chat deployment
    assert deploy.execution(execution_id)["status"] == "waiting"  # the conversation waits on


def test_a_frame_that_is_not_a_reply_gets_an_error_frame_and_the_wait_goes_on(chat_deployment):
    deploy = chat_deployment
    workflow = deploy.activate(ask_name_workflow())
    session = _session()
    execution_id = start(deploy.base, workflow, session)
    with open_chat(deploy.base, session, execution_id) as ws:
        assert next_frame(ws) == FIRST
        ws.send("hello?")
        assert error_message(next_frame(ws)) == "The request body is not valid JSON"
        ws.send('{"action": "sendMessage", "chatInput": 42}')
        assert error_message(next_frame(ws)) == (
            'A reply needs "action": "sendMessage" and a "chatInput".'
        )
        assert deploy.execution(execution_id)["status"] == "waiting"
        reply(ws, session, "Ada")
        assert next_frame(ws) == "Nice to meet you, Ada!"


def test_a_socket_opened_late_still_gets_every_message_once(chat_deployment):
    deploy = chat_deployment
    workflow = deploy.activate(ask_name_workflow(waitUserReply=False))
    session = _session()
    execution_id = start(deploy.base, workflow, session)
    wait_until(
        lambda: deploy.execution(execution_id)["status"] == "success", 10, "the execution to end"
    )
    with open_chat(deploy.base, session, execution_id) as ws:
        assert next_frame(ws) == FIRST
        assert next_frame(ws) == CONTINUE
        assert next_frame(ws) == "Nice to meet you, hello!"  # no reply: its own input passed on
        assert next_frame(ws) == CONTINUE
        with pytest.raises(ConnectionClosed):
            next_frame(ws)


def test_a_socket_for_an_unknown_execution_gets_a_clear_error_frame(chat_deployment):
    with open_chat(chat_deployment.base, _session(), "0123456789abcdef") as ws:
        assert error_message(next_frame(ws)) == "There is no such execution in this chat session."
        with pytest.raises(ConnectionClosed):
            next_frame(ws)


def test_a_socket_of_another_session_reads_as_unknown(chat_deployment):
    deploy = chat_deployment
    workflow = deploy.activate(ask_name_workflow())
    execution_id = start(deploy.base, workflow, _session())
    with open_chat(deploy.base, _session(), execution_id) as ws:
        assert error_message(next_frame(ws)) == "There is no such execution in this chat session."


def test_a_reply_to_a_finished_execution_gets_a_clear_error_frame(chat_deployment):
    deploy = chat_deployment
    workflow = deploy.activate(ask_name_workflow())
    session = _session()
    execution_id = start(deploy.base, workflow, session)
    with open_chat(deploy.base, session, execution_id) as ws:
        assert next_frame(ws) == FIRST
        reply(ws, session, "Ada")
        assert next_frame(ws) == "Nice to meet you, Ada!"
    wait_until(
        lambda: deploy.execution(execution_id)["status"] == "success", 10, "the execution to end"
    )
    with open_chat(deploy.base, session, execution_id) as ws:
        assert error_message(next_frame(ws)) == (
            "This execution has already finished (success); it takes no more replies."
        )


def test_a_wait_past_limit_wait_time_goes_on_without_a_reply_as_in_n8n(chat_deployment):
    """n8n resumes an expired wait with no reply: the Chat node passes its input on."""
    deploy = chat_deployment
    limit = {
        "values": {"limitType": "afterTimeInterval", "resumeAmount": 0.02, "resumeUnit": "minutes"}
    }
    workflow = deploy.activate(ask_name_workflow(limitWaitTime=limit))  # 1.2 s
    session = _session()
    execution_id = start(deploy.base, workflow, session)
    with open_chat(deploy.base, session, execution_id) as ws:
        assert next_frame(ws) == FIRST
        assert next_frame(ws) == CONTINUE  # the wait ended without a reply
        assert next_frame(ws) == "Nice to meet you, hello!"  # Greet got Ask name's input
        assert next_frame(ws) == CONTINUE
        with pytest.raises(ConnectionClosed):
            next_frame(ws)
    record = deploy.execution(execution_id)
    assert record["status"] == "success"
    line = deploy.keys.session_queue(workflow["id"], session)
    assert deploy.redis.lrange(line, 0, -1) == []  # the session's turn passed on


def test_chat_nodes_with_a_memory_connection_leave_the_conversation_in_redis_memory_in_order(
    chat_deployment,
):
    deploy = chat_deployment
    workflow = ask_name_workflow(memoryConnection=True)
    node(workflow, "Greet")["parameters"]["options"]["memoryConnection"] = True
    workflow["nodes"].append(
        {
            "parameters": {"sessionTTL": 600},
            "id": "redis-memory",
            "name": "Redis Chat Memory",
            "type": "@n8n/n8n-nodes-langchain.memoryRedisChat",
            "typeVersion": 1.5,
            "position": [300, 200],
        }
    )
    targets = [{"node": n, "type": "ai_memory", "index": 0} for n in ("Ask name", "Greet")]
    workflow["connections"]["Redis Chat Memory"] = {"ai_memory": [targets]}
    deploy.activate(workflow)
    session = _session()
    execution_id = start(deploy.base, workflow, session)
    with open_chat(deploy.base, session, execution_id) as ws:
        assert next_frame(ws) == FIRST
        reply(ws, session, "Ada")
        assert next_frame(ws) == "Nice to meet you, Ada!"
    wait_until(
        lambda: deploy.execution(execution_id)["status"] == "success", 10, "the execution to end"
    )
    stored = [(m["type"], m["data"]["content"]) for m in reversed(deploy.chat_list(session))]
    assert stored == [("ai", FIRST), ("human", "Ada"), ("ai", "Nice to meet you, Ada!")]


def test_stopping_a_waiting_execution_ends_its_socket_with_a_message(chat_deployment):
    deploy = chat_deployment
    workflow = deploy.activate(ask_name_workflow())
    session = _session()
    execution_id = start(deploy.base, workflow, session)
    with open_chat(deploy.base, session, execution_id) as ws:
        assert next_frame(ws) == FIRST
        request_stop(ExecutionStore(deploy.redis, deploy.keys), execution_id)  # what REST does
        assert error_message(next_frame(ws)) == (
            "The execution was stopped while it waited for a reply."
        )
        with pytest.raises(ConnectionClosed):
            next_frame(ws)
    assert deploy.execution(execution_id)["status"] == "canceled"


def test_a_socket_from_an_origin_the_chat_does_not_allow_is_refused(chat_deployment):
    deploy = chat_deployment
    workflow = ask_name_workflow()
    trigger = node(workflow, "When chat message received")
    trigger["parameters"]["options"]["allowedOrigins"] = "https://shop.example"
    deploy.activate(workflow)
    session = _session()
    execution_id = start(deploy.base, workflow, session)
    with open_chat(deploy.base, session, execution_id, origin="https://evil.example") as ws:
        assert error_message(next_frame(ws)) == "Origin https://evil.example is not allowed"
    with open_chat(deploy.base, session, execution_id, origin="https://shop.example") as ws:
        assert next_frame(ws) == FIRST


def test_after_its_socket_closed_the_next_post_is_the_reply_and_a_new_socket_gets_the_rest(
    chat_deployment,
):
    """What n8n's widget does when its socket is gone (it does not reconnect by itself)."""
    deploy = chat_deployment
    workflow = deploy.activate(ask_name_workflow())
    session = _session()
    execution_id = start(deploy.base, workflow, session)
    with open_chat(deploy.base, session, execution_id) as ws:
        assert next_frame(ws) == FIRST
    assert start(deploy.base, workflow, session, "Ada") == execution_id
    with open_chat(deploy.base, session, execution_id) as ws:
        assert next_frame(ws) == "Nice to meet you, Ada!"  # the question is not written twice
        assert next_frame(ws) == CONTINUE
