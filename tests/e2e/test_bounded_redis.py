"""Redis holds a bounded history, and says so when it is full: a chat whose successful runs are
not saved keeps its memory and only a short-lived record; a Redis at its `maxmemory`
(noeviction, as compose sets it) gets every door answered 503 with the reason and Retry-After
(a chat socket: an error frame), while the chats already running finish.
A deployment on a valkey of this module's own, whose maxmemory the tests set."""

from __future__ import annotations

import contextlib
import json
import threading

import httpx
import pytest

from core.retention import REDIS_FULL, UNSAVED_GRACE_SECONDS
from tests.chat.conversation import (
    FIRST,
    ask_name_workflow,
    error_message,
    next_frame,
    open_chat,
    start,
)
from tests.chat.conversation import reply as send_reply
from tests.e2e.client import stream_chat
from tests.e2e.deployment import chat_url, fresh_ids, on_its_own_redis
from tests.waiting import wait_until
from tests.workflows import REDIS_CHAT, SIMPLE_CHAT, example, with_model_delay

API_KEY = "bounded-redis-key"


@pytest.fixture(scope="module")
def deploy():
    with on_its_own_redis(MINI_N8N_API_KEY=API_KEY, MINI_N8N_KEEPALIVE_SECONDS="1") as deployment:
        yield deployment


@contextlib.contextmanager
def full(deploy):
    """Redis at its maxmemory, with noeviction: every write that needs memory is refused."""
    used = deploy.redis.info("memory")["used_memory"]
    deploy.redis.config_set("maxmemory-policy", "noeviction")
    deploy.redis.config_set("maxmemory", used // 2)
    try:
        yield
    finally:
        deploy.redis.config_set("maxmemory", 0)


def rest(deploy, method: str, path: str, **kwargs) -> httpx.Response:
    headers = {"X-N8N-API-KEY": API_KEY}
    return httpx.request(method, deploy.base + path, headers=headers, timeout=30, **kwargs)


def assert_redis_full(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert response.json() == {"message": REDIS_FULL}
    assert int(response.headers["retry-after"]) > 0


def test_a_chat_that_does_not_save_successes_keeps_memory_and_a_short_lived_record(deploy):
    workflow = fresh_ids(example(REDIS_CHAT))
    workflow["settings"] = {"saveDataSuccessExecution": "none"}
    deploy.activate(workflow)
    reply = stream_chat(chat_url(deploy.base, workflow), "my name is Ada", "unsaved")
    assert reply.text() == "Nice to meet you, Ada!"
    execution_id = reply.headers["x-execution-id"]
    key = deploy.keys.execution(execution_id)
    # Retired just after its end went out (the stream may end first).
    wait_until(lambda: 0 < deploy.redis.ttl(key) <= UNSAVED_GRACE_SECONDS, 10, "the short TTL")
    record = deploy.execution(execution_id)
    assert record["status"] == "success"
    assert list(record["runData"]) == [record["lastNodeExecuted"]]  # what its readers use
    listed = rest(deploy, "GET", f"/rest/executions?workflowId={workflow['id']}").json()
    assert execution_id not in json.dumps(listed)
    assert [m["type"] for m in deploy.chat_list("unsaved")] == ["ai", "human"]
    again = stream_chat(chat_url(deploy.base, workflow), "What is my name?", "unsaved")
    assert again.text() == "Your name is Ada."


def test_when_redis_is_full_webhooks_chats_and_rest_writes_get_503_with_the_reason(deploy):
    workflow = deploy.activate(fresh_ids(example(REDIS_CHAT)))
    with full(deploy):
        chat = {"action": "sendMessage", "sessionId": "full", "chatInput": "hi"}
        assert_redis_full(httpx.post(chat_url(deploy.base, workflow), json=chat, timeout=30))
        assert_redis_full(rest(deploy, "POST", f"/rest/workflows/{workflow['id']}/deactivate"))
        log = "".join(deploy.apis[0][0].lines)
        assert "Traceback" not in log
    reply = stream_chat(chat_url(deploy.base, workflow), "What is 6 * 7?", "full")
    assert reply.text() == "Based on the tools: Calculator returned 42."  # served again


def test_when_redis_is_full_a_chat_sockets_reply_gets_the_reason_and_the_wait_goes_on(deploy):
    workflow = deploy.activate(ask_name_workflow())
    execution_id = start(deploy.base, workflow, "full-socket")
    delivered = deploy.keys.execution_delivered(execution_id)
    with open_chat(deploy.base, "full-socket", execution_id) as ws:
        assert next_frame(ws) == FIRST
        wait_until(lambda: deploy.redis.get(delivered) == "1", 10, "the delivery noted")
        with full(deploy):
            send_reply(ws, "full-socket", "Ada")
            assert error_message(next_frame(ws)) == REDIS_FULL
        send_reply(ws, "full-socket", "Ada")
        assert next_frame(ws) == "Nice to meet you, Ada!"


def streamed_while_full(deploy, workflow: dict, session: str):
    """A chat whose model streams slowly; Redis fills up once the first item arrived."""
    first_item = threading.Event()
    result = {}

    def chat():
        result["reply"] = stream_chat(
            chat_url(deploy.base, workflow),
            "my name is Grace",
            session,
            timeout=60,
            on_chunk=lambda c: c["type"] == "item" and first_item.set(),
        )

    thread = threading.Thread(target=chat)
    thread.start()
    assert first_item.wait(30)
    with full(deploy):
        thread.join(60)
    return result["reply"]


def test_a_chat_running_when_redis_fills_up_finishes_and_its_end_is_written(deploy):
    """A full Redis stops new work at the door, not the work in flight: the claim, the leases'
    renewals, the wait and the end run even past maxmemory (core/redis_clients.py IN_FLIGHT)."""
    workflow = deploy.activate(fresh_ids(with_model_delay(example(SIMPLE_CHAT), 300)))
    reply = streamed_while_full(deploy, workflow, "full-end")
    assert reply.text() == "Nice to meet you, Grace!"
    assert reply.types()[-1] == "end"
    assert deploy.execution(reply.headers["x-execution-id"])["status"] == "success"


def test_a_redis_memory_turn_is_written_with_the_end_though_redis_filled_up(deploy):
    workflow = deploy.activate(fresh_ids(with_model_delay(example(REDIS_CHAT), 300)))
    reply = streamed_while_full(deploy, workflow, "full-memory")
    assert reply.types()[-1] == "end"
    assert deploy.execution(reply.headers["x-execution-id"])["status"] == "success"
    turn = deploy.chat_list("full-memory")
    assert [m["type"] for m in turn] == ["ai", "human"]
    assert turn[0]["data"]["content"] == reply.text()
