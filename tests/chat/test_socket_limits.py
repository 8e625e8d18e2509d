"""The chat WebSocket's own limits and failures on a real api, read with a real WebSocket client:
past MINI_N8N_CHAT_SOCKET_MAX a socket is closed at once with 1013 and a reason; an idle one with
1001; a failure inside the api is a 1011 close frame with a reason, whether it happens while the
socket opens or later in its own loop; the waits go on meanwhile."""

from __future__ import annotations

import time
import uuid

import pytest
from websockets.exceptions import ConnectionClosed

from core import events
from tests.chat.conversation import FIRST, ask_name_workflow, next_frame, open_chat, reply, start
from tests.waiting import wait_until

FULL = "This server holds as many chats as it may; try again shortly."
IDLE = "Closed after a long time without a message; reconnect to go on."
INTERNAL = "Internal server error"


def _session() -> str:
    return f"l-{uuid.uuid4().hex[:12]}"


def _waiting(deploy, base: str, workflow: dict) -> tuple[str, str]:
    session = _session()
    execution_id = start(base, workflow, session)
    wait_until(lambda: deploy.execution(execution_id)["status"] == "waiting", 20, "waiting")
    return session, execution_id


def _closed_with(ws) -> tuple[int | None, str | None]:
    with pytest.raises(ConnectionClosed):
        while True:
            ws.recv(timeout=20)
    return ws.close_code, ws.close_reason


def test_past_the_socket_cap_a_socket_is_closed_with_1013_and_one_closing_makes_room(
    chat_deployment,
):
    deploy = chat_deployment
    base = deploy.start_api(MINI_N8N_CHAT_SOCKET_MAX="2")
    workflow = deploy.activate(ask_name_workflow())
    chats = [_waiting(deploy, base, workflow) for _ in range(3)]
    with open_chat(base, *chats[0]) as first, open_chat(base, *chats[1]) as second:
        assert next_frame(first) == FIRST and next_frame(second) == FIRST
        with open_chat(base, *chats[2]) as third:
            assert _closed_with(third) == (1013, FULL)
        assert deploy.execution(chats[2][1])["status"] == "waiting"
        first.close()
        wait_until(lambda: _opens(base, chats[2]), 20, "a place once a socket closed")
    assert deploy.execution(chats[0][1])["status"] == "waiting"


def _opens(base: str, chat: tuple[str, str]) -> bool:
    with open_chat(base, *chat) as ws:
        try:
            return next_frame(ws) == FIRST
        except ConnectionClosed:
            return False  # 1013: the closed socket's place is not free yet


def test_a_socket_without_a_message_for_the_idle_time_is_closed_with_1001_and_the_wait_goes_on(
    chat_deployment,
):
    deploy = chat_deployment
    base = deploy.start_api(MINI_N8N_CHAT_SOCKET_IDLE_SECONDS="2")  # heartbeats every second
    workflow = deploy.activate(ask_name_workflow())
    session, execution_id = _waiting(deploy, base, workflow)
    with open_chat(base, session, execution_id) as ws:
        assert next_frame(ws) == FIRST
        opened = time.monotonic()
        assert _closed_with(ws) == (1001, IDLE)  # heartbeats were acknowledged all along
        assert time.monotonic() - opened >= 2  # not before the idle time
    assert deploy.execution(execution_id)["status"] == "waiting"
    with open_chat(base, session, execution_id) as ws:
        reply(ws, session, "Ada")
        assert next_frame(ws) == "Nice to meet you, Ada!"


def test_a_failure_while_the_socket_opens_is_a_1011_close_frame_and_is_logged(chat_deployment):
    deploy = chat_deployment
    workflow = deploy.activate(ask_name_workflow())
    session, execution_id = _waiting(deploy, deploy.base, workflow)
    messages = deploy.keys.execution_messages(execution_id)
    deploy.redis.lset(messages, 0, "{not json")  # what no bug of ours writes: reading it fails
    with open_chat(deploy.base, session, execution_id) as ws:
        assert _closed_with(ws) == (1011, INTERNAL)
    logged = f"chat socket of execution {execution_id} failed"
    wait_until(lambda: logged in deploy.apis[0][0].output(), 10, "the failure logged")
    assert deploy.execution(execution_id)["status"] == "waiting"


def test_a_failure_in_an_open_sockets_loop_is_a_1011_close_frame_and_is_logged(chat_deployment):
    deploy = chat_deployment
    workflow = deploy.activate(ask_name_workflow())
    session, execution_id = _waiting(deploy, deploy.base, workflow)
    with open_chat(deploy.base, session, execution_id) as ws:
        assert next_frame(ws) == FIRST
        # A message the socket has not seen (n=2) makes it read the list from n=1 on, where an
        # entry no bug of ours writes waits for it.
        deploy.redis.rpush(deploy.keys.execution_messages(execution_id), "{not json")
        channel = deploy.keys.execution_events(execution_id)
        deploy.redis.publish(channel, events.encode(events.message({"n": 2, "text": "x"})))
        assert _closed_with(ws) == (1011, INTERNAL)
    logged = f"chat socket of execution {execution_id} failed"
    wait_until(lambda: logged in deploy.apis[0][0].output(), 10, "the failure logged")
    assert deploy.execution(execution_id)["status"] == "waiting"
