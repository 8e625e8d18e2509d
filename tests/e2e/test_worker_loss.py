"""A worker that died is told apart from one that is only silent, with real processes: with a
lease far longer than the test, a SIGKILLed worker's streams still end (it is its closed
connection that tells), while a worker stopped by the OS for longer than a heartbeat keeps its
executions and finishes them, and what each client was told is what the record and memory say."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from tests.e2e.client import stream_chat
from tests.e2e.deployment import Deployment, chat_url, fresh_ids
from tests.workflows import REDIS_CHAT, example, with_model_delay

# Far beyond what any stream here waits: an execution ended while its lease still held was
# ended on the evidence of its worker's closed connection.
LEASE_SECONDS = 600
STOPPED_SECONDS = 4  # several heartbeats and reaper rounds: the fault's length, not a wait


@pytest.fixture
def deployment(redis_url):
    with Deployment.running(
        redis_url, MINI_N8N_LEASE_SECONDS=str(LEASE_SECONDS), MINI_N8N_KEEPALIVE_SECONDS="1"
    ) as deploy:
        yield deploy


def _chats(deploy: Deployment, count: int, fault) -> tuple[str, dict]:
    """`count` slow chats; once every one streams, `fault`. The chat's URL and the replies."""
    workflow = deploy.activate(fresh_ids(with_model_delay(example(REDIS_CHAT), 100)))
    url, replies, started = chat_url(deploy.base, workflow), {}, threading.Barrier(count + 1)

    def chat(i: int) -> None:
        def on_chunk(chunk):
            if chunk["type"] == "item" and i not in seen:
                seen.add(i)
                started.wait()

        replies[i] = stream_chat(url, "tell me about cats and dogs " * 4, f"s{i}", 120, on_chunk)

    seen: set[int] = set()
    threads = [threading.Thread(target=chat, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    started.wait()  # every chat is streaming
    fault()
    for thread in threads:
        thread.join()
    return url, replies


def test_a_killed_workers_streams_end_on_its_closed_connection_long_before_its_lease(deployment):
    url, replies = _chats(deployment, 5, lambda: deployment.worker.stop(signal.SIGKILL))
    for i, reply in replies.items():
        assert reply.types()[-1] == "error"
        assert reply.chunks[-1]["content"] == (
            "The worker running this execution died (its process is gone)."
        )
        record = deployment.execution(reply.headers["x-execution-id"])
        assert record["status"] == "crashed"
        assert deployment.chat_list(f"s{i}") == []  # memory as the client was told
    deployment.worker = deployment.start_worker()
    assert stream_chat(url, "hello", "s0").text() == "You said: hello"


def test_a_worker_stopped_by_the_os_keeps_its_executions_and_finishes_them(deployment):
    def pause() -> None:
        os.kill(deployment.worker.pid, signal.SIGSTOP)
        time.sleep(STOPPED_SECONDS)
        os.kill(deployment.worker.pid, signal.SIGCONT)

    _, replies = _chats(deployment, 5, pause)
    for i, reply in replies.items():
        assert reply.types()[-1] == "end"
        record = deployment.execution(reply.headers["x-execution-id"])
        assert record["status"] == "success"
        ai = [m for m in deployment.chat_list(f"s{i}") if m["type"] == "ai"]
        assert [m["data"]["content"] for m in ai] == [reply.text()]
