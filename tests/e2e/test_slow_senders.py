"""Slow senders against a real gunicorn+gevent api: a body, a request head or a chat socket frame
that trickles or stops holds its connection and the bytes it sent, never a turn another request
needs; one that stalls or trickles past the stated deadlines is cut off (408, a close frame)
and gives back what it held. Counted, never timed: the deadlines are set small here."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest
from websockets.exceptions import ConnectionClosed

from tests.chat.conversation import FIRST, ask_name_workflow, next_frame, open_chat, reply, start
from tests.e2e.client import stream_chat
from tests.e2e.deployment import Deployment, chat_url, fresh_ids
from tests.e2e.slow_clients import (
    chat_body,
    closed_by_peer,
    connect,
    masked_frame,
    read_answer,
    readable,
    start_slow_post,
)
from tests.e2e.test_hostile_input import _double_workflow, _hook_url
from tests.workflows import REDIS_CHAT, example

MAX_STARTING = 2
SLOW_SENDERS = 5  # more than MAX_STARTING
BUFFER = 200_000  # the strict api's budget of bytes in flight
# Deadlines no machine misses while a test waits on something else: slow senders are held.
PATIENT = {
    "MINI_N8N_MAX_STARTING": str(MAX_STARTING),
    "MINI_N8N_BODY_MIN_RATE": "0",
    "MINI_N8N_BODY_IDLE_SECONDS": "300",
}
# Deadlines small enough to be passed at once: slow senders are cut off.
STRICT = {
    "MINI_N8N_MAX_STARTING": "1",
    "MINI_N8N_BODY_IDLE_SECONDS": "0.5",
    "MINI_N8N_BODY_MIN_RATE": "1000",
    "MINI_N8N_BODY_GRACE_SECONDS": "0.5",
    "MINI_N8N_BODY_BUFFER_BYTES": str(BUFFER),
    "MINI_N8N_START_WAIT": "2",
    "MINI_N8N_KEEP_ALIVE": "1",
}


@pytest.fixture(scope="module")
def apis(redis_url):
    """One worker, and two api processes on its queue: `.patient` and `.strict`."""
    deploy = Deployment(redis_url, MINI_N8N_KEEPALIVE_SECONDS="1")
    try:
        deploy.worker = deploy.start_worker()
        deploy.patient = deploy.start_api(**PATIENT)
        deploy.strict = deploy.start_api(**STRICT)
        yield deploy
    finally:
        deploy.stop()


def _session() -> str:
    return f"slow-{uuid.uuid4().hex[:10]}"


def _message(body: bytes) -> str:
    return json.loads(body)["message"]


def test_more_slow_bodies_than_start_turns_leave_another_chat_answered(apis):
    workflow = apis.activate(fresh_ids(example(REDIS_CHAT)))
    url = chat_url(apis.patient, workflow)
    bodies = [chat_body(_session(), 1000) for _ in range(SLOW_SENDERS)]
    slow = [start_slow_post(url, body, 10) for body in bodies]  # each taken by the api
    try:
        answered = stream_chat(url, "my name is Ada", _session())
        assert answered.text() == "Nice to meet you, Ada!"
        # They were held all along, not cut off: their bodies go on and are answered.
        for sock, body in zip(slow, bodies, strict=True):
            sock.sendall(body[10:])
        assert [read_answer(sock)[0] for sock in slow] == [200] * SLOW_SENDERS
    finally:
        for sock in slow:
            sock.close()


def test_a_body_that_stalls_gets_408_and_its_bytes_go_back_to_the_budget(apis):
    received = _double_workflow()
    received["nodes"][0]["parameters"]["responseMode"] = "onReceived"
    url = _hook_url(apis.strict, apis.activate(received))
    body = b'{"q":"' + b"7" * 150_000 + b'"}'
    with start_slow_post(url, body, 120_000) as stalled:  # more than SMALL: from the budget
        status, answer = read_answer(stalled)
        assert status == 408
        assert _message(answer).startswith("The request body stalled: nothing arrived for 0.5 s")
        assert closed_by_peer(stalled)
    # 120,000 bytes still held would leave no room for 150,000 (MINI_N8N_START_WAIT: 503).
    following = httpx.post(url, content=body, headers={"content-type": "application/json"})
    assert following.status_code == 200


def test_a_body_that_trickles_below_the_minimum_rate_gets_408_and_the_next_chat_is_answered(apis):
    workflow = apis.activate(fresh_ids(example(REDIS_CHAT)))
    url = chat_url(apis.strict, workflow)
    body = chat_body(_session(), 1000)
    with start_slow_post(url, body, 10) as trickling:
        sent = 10
        while sent < len(body) and not readable(trickling, 0.05):  # 20 bytes/s, never idle
            trickling.sendall(body[sent : sent + 1])
            sent += 1
        status, answer = read_answer(trickling)
    assert sent < len(body)
    assert status == 408
    assert _message(answer).startswith("The request body arrived too slowly: less than 1000")
    answered = stream_chat(url, "my name is Ada", _session())
    assert answered.text() == "Nice to meet you, Ada!"


def test_a_request_head_that_trickles_is_closed_without_an_answer_and_the_next_chat_is_answered(
    apis,
):
    workflow = apis.activate(fresh_ids(example(REDIS_CHAT)))
    url = chat_url(apis.strict, workflow)
    head = b"POST /webhook/x HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 4000
    with connect(url) as trickling:
        sent = 0
        while sent < len(head) and not readable(trickling, 0.05):
            trickling.sendall(head[sent : sent + 2])
            sent += 2
        assert sent < len(head)  # cut off long before its head was in (MINI_N8N_KEEP_ALIVE)
        assert closed_by_peer(trickling)
    answered = stream_chat(url, "my name is Ada", _session())
    assert answered.text() == "Nice to meet you, Ada!"


@pytest.mark.parametrize(
    ("pace", "reason"),
    [("stalls", "The message stalled: nothing arrived for 0.5 s"),
     ("trickles", "The message arrived too slowly: less than 1000 bytes/s")],
)  # fmt: skip
def test_a_chat_socket_frame_that_stalls_or_trickles_is_closed_and_the_wait_goes_on(
    apis, pace, reason
):
    workflow = apis.activate(ask_name_workflow())
    session = _session()
    execution_id = start(apis.strict, workflow, session)
    frame = masked_frame(json.dumps({"action": "sendMessage", "chatInput": "x" * 110_000}).encode())
    with open_chat(apis.strict, session, execution_id, ping_interval=None) as ws:
        assert next_frame(ws) == FIRST
        sent = 100_000 if pace == "stalls" else 20
        ws.socket.sendall(frame[:sent])
        with pytest.raises(ConnectionClosed):
            while True:
                try:
                    ws.recv(timeout=0.05 if pace == "trickles" else 30)
                except TimeoutError:
                    ws.socket.sendall(frame[sent : sent + 1])  # about 20 bytes a second
                    sent += 1
        assert sent < len(frame)
        assert ws.close_code == 1008
        assert ws.close_reason.startswith(reason)
    # The conversation waits on; a frame as large goes through: the bytes held were given back.
    with open_chat(apis.strict, session, execution_id) as ws:
        reply(ws, session, "y" * 110_000)
        assert next_frame(ws) == f"Nice to meet you, {'y' * 110_000}!"
