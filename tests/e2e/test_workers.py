"""Several workers: memory across workers, a worker killed mid-stream, one session's order."""

from __future__ import annotations

import json
import threading

import pytest

from tests.e2e.client import stream_chat
from tests.e2e.deployment import Deployment, chat_url, fresh_ids, kill_worker_mid_stream
from tests.workflows import REDIS_CHAT, SIMPLE_CHAT, example, with_model_delay

LEASE_SECONDS = 2
KEEPALIVE_SECONDS = 1


@pytest.fixture(scope="module")
def two_workers(redis_url):
    with Deployment.routed_pair(
        redis_url,
        MINI_N8N_LEASE_SECONDS=str(LEASE_SECONDS),
        MINI_N8N_KEEPALIVE_SECONDS=str(KEEPALIVE_SECONDS),
    ) as deploy:
        yield deploy


def test_redis_memory_remembers_across_workers(two_workers):
    workflow = two_workers.activate(fresh_ids(example(REDIS_CHAT)))
    replies, pids = two_workers.converse(workflow, "ada-redis")
    assert pids == [two_workers.worker_a.pid, two_workers.worker_b.pid, two_workers.worker_a.pid]
    assert replies[0].text() == "Based on the tools: Calculator returned 42."
    assert replies[1].text() == "Nice to meet you, Ada!"
    assert replies[2].text() == "Your name is Ada."


def test_simple_memory_forgets_across_workers(two_workers):
    workflow = two_workers.activate(fresh_ids(example(SIMPLE_CHAT)))
    replies, pids = two_workers.converse(workflow, "ada-simple")
    assert pids == [two_workers.worker_a.pid, two_workers.worker_b.pid, two_workers.worker_a.pid]
    # Worker A never saw "my name is Ada": it went to worker B's process memory.
    assert replies[2].text() == "I don't know your name yet."


def test_a_killed_worker_ends_the_stream_with_an_error_line(two_workers):
    workflow = two_workers.activate(fresh_ids(with_model_delay(example(REDIS_CHAT), 300)))
    kill_worker_mid_stream(two_workers, workflow, "killed")


def test_one_sessions_messages_run_in_arrival_order(two_workers):
    """Messages overlap (each is sent while the previous one still runs, alternating between
    the two apis and so the two workers), but each is sent only once the previous one has been
    accepted, so their arrival order is known."""
    deploy = two_workers
    workflow = deploy.activate(fresh_ids(with_model_delay(example(REDIS_CHAT), 50)))
    session = "ordered"
    count = 6
    replies: list = [None] * count
    threads = []
    for i in range(count):
        accepted = threading.Event()  # the response started: the api has queued the message
        base = deploy.api_a if i % 2 == 0 else deploy.api_b

        def send(i=i, base=base, accepted=accepted):
            replies[i] = stream_chat(
                chat_url(base, workflow), f"message {i}", session, on_chunk=lambda _: accepted.set()
            )
            accepted.set()

        threads.append(threading.Thread(target=send))
        threads[-1].start()
        assert accepted.wait(30)
    for thread in threads:
        thread.join(60)
    records = [deploy.execution(r.headers["x-execution-id"]) for r in replies]
    assert all(r["status"] == "success" for r in records)
    # One at a time, in arrival order: each starts after the previous one stopped.
    for before, after in zip(records, records[1:], strict=False):
        assert after["startedAt"] >= before["stoppedAt"]
    # They really overlapped on the client side: each was sent before the previous answered.
    assert any(r.sent_at < prev.ended_at for prev, r in zip(replies, replies[1:], strict=False))
    # Memory holds every turn, whole and in arrival order.
    stored = [json.loads(x) for x in deploy.redis.lrange(deploy.keys.chat(session), 0, -1)][::-1]
    assert [m["type"] for m in stored] == ["human", "ai"] * count
    assert [m["data"]["content"] for m in stored if m["type"] == "human"] == [
        f"message {i}" for i in range(count)
    ]
