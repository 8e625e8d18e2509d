"""SIGTERM: the api ends editor push streams instead of waiting out its graceful timeout; a
worker lets running executions finish within its grace period, then stops them."""

from __future__ import annotations

import signal
import threading

import httpx
import pytest

from tests.e2e.client import stream_chat
from tests.e2e.deployment import Deployment, chat_url, fresh_ids
from tests.workflows import REDIS_CHAT, example, with_model_delay

KEY = "shutdown-test-key"


@pytest.fixture
def deploy(redis_url):
    deploy = Deployment(
        redis_url,
        MINI_N8N_API_KEY=KEY,
        MINI_N8N_GRACEFUL_TIMEOUT="20",
        MINI_N8N_SHUTDOWN_GRACE="1",
        MINI_N8N_KEEPALIVE_SECONDS="1",
    )
    yield deploy
    deploy.stop()


def test_an_open_editor_push_stream_does_not_hold_the_api_at_sigterm(deploy):
    base = deploy.start_api()
    api = deploy.apis[0][0]
    opened = threading.Event()
    ended = []

    def listen():
        url = f"{base}/rest/push?pushRef=tab1&key={KEY}"
        with httpx.stream("GET", url, timeout=60) as response:
            for line in response.iter_lines():
                opened.set()
                if "pushError" in line:
                    ended.append(line)

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    assert opened.wait(10)
    api.proc.send_signal(signal.SIGTERM)
    # Told at once, not cut off when the graceful timeout (20 s) is over; the join's own
    # timeout only keeps a failure from hanging.
    thread.join(30)
    assert ended and "shutting down" in ended[0]
    api.proc.wait(30)


def test_a_push_reconnect_during_the_shutdown_is_refused_and_the_api_exits_by_itself(deploy):
    """The browser reconnects a second after its stream ended, on the same keep-alive
    connection: served, that stream held the api for the whole graceful timeout."""
    base = deploy.start_api()
    api = deploy.apis[0][0]
    url = f"{base}/rest/push?pushRef=tab2&key={KEY}"
    with httpx.Client(timeout=60) as client:
        with client.stream("GET", url) as response:
            lines = response.iter_lines()
            assert next(lines).startswith("retry:")
            api.proc.send_signal(signal.SIGTERM)
            ended = [line for line in lines if "pushError" in line]
        assert ended and "shutting down" in ended[0]
        again = client.get(url)  # the keep-alive connection the stream came on
        assert again.status_code == 503
        assert again.json() == {
            "message": "the api is shutting down; the editor reconnects by itself"
        }
    # The join's own timeout only keeps a failure from hanging the test.
    assert api.proc.wait(30) == 0
    output = "".join(api.lines)
    assert "stopping: ended 1 editor push stream and 0 chat sockets" in output
    assert "graceful timeout" not in output  # gunicorn's "Worker graceful timeout (pid:…)"


def test_a_stopping_worker_stops_what_outlives_its_grace_period(deploy):
    base = deploy.start_api()
    worker = deploy.start_worker()
    workflow = deploy.activate(fresh_ids(with_model_delay(example(REDIS_CHAT), 1000)))
    signalled = []

    def on_chunk(chunk):
        if chunk["type"] == "item" and not signalled:
            worker.proc.send_signal(signal.SIGTERM)
            signalled.append(True)

    reply = stream_chat(chat_url(base, workflow), "What is 19 * 23?", "term", on_chunk=on_chunk)
    assert reply.chunks[-1]["type"] == "error"
    assert "stopped" in reply.chunks[-1]["content"]
    # 1 s of grace: the stream ended with the execution stopped, before its 7 tokens came.
    assert len(reply.items()) < 7
    assert deploy.execution(reply.headers["x-execution-id"])["status"] == "canceled"
    worker.proc.wait(15)


def test_an_execution_over_its_time_limit_fails_with_a_readable_error(redis_url):
    deploy = Deployment(redis_url, MINI_N8N_EXECUTION_TIMEOUT="1")
    try:
        base = deploy.start_api()
        deploy.start_worker()
        workflow = deploy.activate(fresh_ids(with_model_delay(example(REDIS_CHAT), 500)))
        reply = stream_chat(chat_url(base, workflow), "What is 19 * 23?", "slow", timeout=30)
        assert reply.chunks[-1]["type"] == "error"
        assert "timed out after 1 s" in reply.chunks[-1]["content"]
        record = deploy.execution(reply.headers["x-execution-id"])
        assert record["status"] == "error" and "timed out" in record["error"]
        assert deploy.chat_list("slow") == []  # no half turn in memory
    finally:
        deploy.stop()
