"""A waiting conversation survives the processes around it: the worker that ran its first part
stopped, or the api holding its socket restarted, while it waited. Its own deployment (an api
and two workers), since these tests stop processes."""

from __future__ import annotations

import contextlib
import uuid

import pytest

from tests.chat.conversation import FIRST, ask_name_workflow, next_frame, open_chat, reply, start
from tests.e2e.deployment import Deployment
from tests.waiting import wait_until


@pytest.fixture(scope="module")
def deploy(redis_url):
    with Deployment.running(redis_url, MINI_N8N_KEEPALIVE_SECONDS="1") as deployment:
        yield deployment


def _ended(deploy, execution_id: str) -> dict:
    return wait_until(
        lambda: (r := deploy.execution(execution_id)) and r["status"] == "success" and r,
        15,
        "the execution to succeed",
    )


def test_the_reply_resumes_on_another_worker_when_the_first_one_stopped_while_waiting(deploy):
    workers = [deploy.worker, deploy.start_worker()]
    workflow = deploy.activate(ask_name_workflow())
    session = f"s-{uuid.uuid4().hex[:12]}"
    execution_id = start(deploy.base, workflow, session)
    with open_chat(deploy.base, session, execution_id) as ws:
        assert next_frame(ws) == FIRST
        first_pid = deploy.execution(execution_id)["worker"]["pid"]
        (first,) = [w for w in workers if w.pid == first_pid]
        (other,) = [w for w in workers if w.pid != first_pid]
        first.stop()
        assert first.proc.returncode is not None
        reply(ws, session, "Ada")
        assert next_frame(ws) == "Nice to meet you, Ada!"
    record = _ended(deploy, execution_id)
    assert record["worker"]["pid"] == other.pid


def test_the_client_reconnects_to_a_restarted_api_and_the_conversation_goes_on(deploy):
    workflow = deploy.activate(ask_name_workflow())
    session = f"s-{uuid.uuid4().hex[:12]}"
    execution_id = start(deploy.base, workflow, session)
    api, _ = deploy.apis[-1]
    with open_chat(deploy.base, session, execution_id) as ws:
        assert next_frame(ws) == FIRST
        api.stop()  # graceful: open chat sockets are closed for the client to reconnect
        assert api.proc.returncode == 0
    deploy.base = deploy.start_api()
    with open_chat(deploy.base, session, execution_id) as ws:
        reply(ws, session, "Ada")
        # The question was delivered before the restart: not written again.
        assert next_frame(ws) == "Nice to meet you, Ada!"
    assert _ended(deploy, execution_id)["runData"]["Greet"][0]["executionStatus"] == "success"


def test_conversations_that_wait_hold_no_worker_slot(redis_url):
    """Two conversations wait at once on a worker that runs one execution at a time."""
    small = Deployment(redis_url, MINI_N8N_KEEPALIVE_SECONDS="1")
    try:
        small.base = small.start_api()
        small.start_worker(concurrency=1)
        workflow = small.activate(ask_name_workflow())
        sessions = [f"s-{uuid.uuid4().hex[:12]}" for _ in range(2)]
        ids = [start(small.base, workflow, s) for s in sessions]
        with contextlib.ExitStack() as stack:
            sockets = [
                stack.enter_context(open_chat(small.base, s, i))
                for s, i in zip(sessions, ids, strict=True)
            ]
            for ws in sockets:
                assert next_frame(ws) == FIRST
            assert [small.execution(i)["status"] for i in ids] == ["waiting"] * 2
            for ws, session, name in zip(sockets, sessions, ["Ada", "Grace"], strict=True):
                reply(ws, session, name)
            for ws, name in zip(sockets, ["Ada", "Grace"], strict=True):
                assert next_frame(ws) == f"Nice to meet you, {name}!"
    finally:
        small.stop()
