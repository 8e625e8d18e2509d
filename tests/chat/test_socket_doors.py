"""The chat WebSocket under hostile input, on a real deployment: every
frame goes through the body rules of every door, a bad one gets an error frame and the wait goes
on with nothing stored; the socket needs the POST's resumeToken and the chat's login; a refusal
is a close frame with a reason."""

from __future__ import annotations

import base64
import json
import uuid

import httpx
import pytest
from websockets.exceptions import ConnectionClosed

from tests.chat.conversation import (
    CONTINUE,
    FIRST,
    ask_name_workflow,
    error_message,
    next_frame,
    open_chat,
    reply,
    start,
)
from tests.chat.support import BASIC_CREDENTIAL, BASIC_PASSWORD, BASIC_USER
from tests.e2e.deployment import chat_url
from tests.waiting import wait_until
from tests.workflows import node

TRIGGER = "When chat message received"


def _session() -> str:
    return f"d-{uuid.uuid4().hex[:12]}"


def _status_becomes(deploy, execution_id: str, status: str) -> None:
    wait_until(
        lambda: deploy.execution(execution_id)["status"] == status, 20, f"execution {status}"
    )


def _data_url(size: int, mime: str = "text/plain") -> str:
    return f"data:{mime};base64," + base64.b64encode(b"x" * size).decode()


def _frame(**fields) -> str:
    return json.dumps({"action": "sendMessage", "chatInput": "Bob", "files": [], **fields})


BAD_FRAMES = [
    ('{"action":"sendMessage","chatInput":NaN}', "The request body is not valid JSON"),
    ('{"action":"sendMessage","chatInput":"x","metadata":Infinity}', "not valid JSON"),
    (b'{"action":"sendMessage","chatInput":"\xff\xfe"}', "not valid UTF-8 text"),
    ("[1, 2]", "The request body must be a JSON object"),
    ('{"action":"sendMessage","chatInput":"x","m":' + "[" * 900 + "]" * 900 + "}", "nested too"),
    ('{"action":"sendMessage","chatInput":"x","m":' + "[" * 5000 + "]" * 5000 + "}", "nested too"),
    ('{"action":"sendMessage","chatInput":"Bob \\ud800"}', "lone surrogate"),
    (_frame(files=[{"name": "a.txt", "type": "text/plain", "data": _data_url(70_000)}]),
     "A file may be at most 65536 bytes"),
    (_frame(files=[{"name": "a.exe", "type": "application/x-msdownload", "data": _data_url(10)}]),
     "Files of type application/x-msdownload are not allowed"),
    ('{"action":"sendMessage","chatInput":"' + "1," * 120_000 + '"}', "too many values"),
]  # fmt: skip


@pytest.mark.parametrize(("frame", "message"), BAD_FRAMES)
def test_a_frame_breaking_a_body_rule_gets_an_error_frame_stores_nothing_and_the_wait_goes_on(
    chat_deployment, frame, message
):
    deploy = chat_deployment
    workflow = ask_name_workflow()
    options = node(workflow, TRIGGER)["parameters"]["options"]
    options["allowFileUploads"], options["allowedFilesMimeTypes"] = True, "text/*"
    deploy.activate(workflow)
    session = _session()
    execution_id = start(deploy.base, workflow, session)
    with open_chat(deploy.base, session, execution_id) as ws:
        assert next_frame(ws) == FIRST
        ws.send(frame)
        assert message in error_message(next_frame(ws))
        record = deploy.execution(execution_id)
        assert record["status"] == "waiting"
        assert deploy.redis.llen(deploy.keys.execution_messages(execution_id)) == 1
        reply(ws, session, "Bob")  # the same socket goes on
        assert next_frame(ws) == "Nice to meet you, Bob!"
        assert next_frame(ws) == CONTINUE
    _status_becomes(deploy, execution_id, "success")


# (bytes, sent as a text or a binary frame): a text frame carries UTF-8 only.
FRAMES_AND_BODIES = [
    (b'{"action":"sendMessage","chatInput":NaN}', "text"),
    (b'{"action":"sendMessage","chatInput":NaN}', "binary"),
    (b'{"action":"sendMessage","chatInput":"caf\xe9"}', "binary"),  # Latin-1, not UTF-8
    (b"hello?", "text"),
    (b'"a string"', "binary"),
]


def _post_raw(deploy, workflow: dict, raw: bytes) -> httpx.Response:
    """These bytes as a JSON body on the chat's URL."""
    return httpx.post(
        chat_url(deploy.base, workflow),
        content=raw,
        headers={"content-type": "application/json"},
        timeout=10,
    )


@pytest.mark.parametrize(("raw", "kind"), FRAMES_AND_BODIES)
def test_a_bad_frame_is_answered_in_the_words_http_answers_the_same_bytes_with(
    chat_deployment, raw, kind
):
    deploy = chat_deployment
    workflow = deploy.activate(ask_name_workflow())
    session = _session()
    posted = _post_raw(deploy, workflow, raw)
    assert posted.status_code == 400
    execution_id = start(deploy.base, workflow, session)
    with open_chat(deploy.base, session, execution_id) as ws:
        assert next_frame(ws) == FIRST
        ws.send(raw if kind == "binary" else raw.decode())
        assert error_message(next_frame(ws)) == posted.json()["message"]
        reply(ws, session, "Bob")  # the same socket goes on
        assert next_frame(ws) == "Nice to meet you, Bob!"
    _status_becomes(deploy, execution_id, "success")


def test_a_lone_surrogate_posted_as_the_reply_gets_400_and_the_conversation_goes_on(
    chat_deployment,
):
    deploy = chat_deployment
    workflow = deploy.activate(ask_name_workflow())
    session = _session()
    execution_id = start(deploy.base, workflow, session)
    raw = (
        b'{"action":"sendMessage","sessionId":"'
        + session.encode()
        + b'","chatInput":"Bob \\ud800"}'
    )
    response = _post_raw(deploy, workflow, raw)
    assert response.status_code == 400
    assert "lone surrogate" in response.json()["message"]
    assert deploy.execution(execution_id)["status"] == "waiting"
    assert start(deploy.base, workflow, session, "Bob \U0001f600") == execution_id
    with open_chat(deploy.base, session, execution_id) as ws:
        assert next_frame(ws) == FIRST
        assert next_frame(ws) == CONTINUE  # the reply came by POST, not over this socket
        assert next_frame(ws) == "Nice to meet you, Bob \U0001f600!"
    _status_becomes(deploy, execution_id, "success")


def test_a_chat_node_message_with_a_lone_surrogate_an_expression_built_arrives_well_formed(
    chat_deployment,
):
    deploy = chat_deployment
    workflow = ask_name_workflow()
    node(workflow, "Ask name")["parameters"]["message"] = "={{ 'Hi \\ud800, your name?' }}"
    deploy.activate(workflow)
    session = _session()
    execution_id = start(deploy.base, workflow, session)
    with open_chat(deploy.base, session, execution_id) as ws:
        assert next_frame(ws) == "Hi \ufffd, your name?"
        reply(ws, session, "Bob")
        assert next_frame(ws) == "Nice to meet you, Bob!"
    _status_becomes(deploy, execution_id, "success")


@pytest.mark.parametrize("token", ["", "not-the-token"])
def test_a_socket_without_the_posts_resume_token_is_closed_with_a_reason(chat_deployment, token):
    deploy = chat_deployment
    workflow = deploy.activate(ask_name_workflow())
    session = _session()
    execution_id = start(deploy.base, workflow, session)
    _status_becomes(deploy, execution_id, "waiting")
    with open_chat(deploy.base, session, execution_id, token=token) as ws:
        assert "resumeToken" in error_message(next_frame(ws))
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=10)
        assert ws.close_code == 1008
        assert "resumeToken" in ws.close_reason
    assert deploy.execution(execution_id)["status"] == "waiting"
    assert deploy.redis.llen(deploy.keys.execution_messages(execution_id)) == 1


def test_a_protected_chats_socket_needs_its_login_as_the_post_does(chat_deployment):
    deploy = chat_deployment
    workflow = ask_name_workflow()
    trigger = node(workflow, TRIGGER)
    trigger["parameters"]["authentication"] = "basicAuth"
    trigger["credentials"] = {"httpBasicAuth": BASIC_CREDENTIAL}
    deploy.activate(workflow)
    session = _session()
    login = (BASIC_USER, BASIC_PASSWORD)
    answer = httpx.post(
        chat_url(deploy.base, workflow),
        json={"action": "sendMessage", "sessionId": session, "chatInput": "hello"},
        auth=login,
        timeout=10,
    )
    assert answer.status_code == 200
    execution_id, token = answer.json()["executionId"], answer.json()["resumeToken"]
    with open_chat(deploy.base, session, execution_id, token=token) as ws:
        assert error_message(next_frame(ws)) == "Authorization is required!"
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=10)
        assert ws.close_code == 1008
    header = "Basic " + base64.b64encode(f"{BASIC_USER}:{BASIC_PASSWORD}".encode()).decode()
    with open_chat(
        deploy.base,
        session,
        execution_id,
        token=token,
        additional_headers={"Authorization": header},
    ) as ws:
        assert next_frame(ws) == FIRST
        reply(ws, session, "Ada")
        assert next_frame(ws) == "Nice to meet you, Ada!"
    _status_becomes(deploy, execution_id, "success")
