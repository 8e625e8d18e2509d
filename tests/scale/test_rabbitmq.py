"""RabbitMQ as the Celery broker: a real node of our own, Redis for state, memory and the relay.

The same guarantees as on a Redis broker: the 437 answer streams, memory follows a conversation
across workers, a worker killed mid-stream ends the stream with an error line within the lease
bound, and no broker data lands in Redis."""

from __future__ import annotations

import pytest

from tests.e2e.client import stream_chat
from tests.e2e.deployment import Deployment, chat_url, fresh_ids, kill_worker_mid_stream
from tests.scale.servers import RabbitMQNode, rabbitmq
from tests.workflows import REDIS_CHAT, SIMPLE_CHAT, example, with_model_delay

LEASE_SECONDS = 2
KEEPALIVE_SECONDS = 1
ANSWER_437 = "Based on the tools: Calculator returned 437."


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    with rabbitmq(tmp_path_factory.mktemp("rabbitmq")) as started:
        yield started


@pytest.fixture(scope="module")
def on_rabbitmq(redis_url, node):
    """Two workers on their own queues of the RabbitMQ broker, each fed by its own api."""
    with Deployment.routed_pair(
        redis_url,
        CELERY_BROKER_URL=node.url,
        MINI_N8N_LEASE_SECONDS=str(LEASE_SECONDS),
        MINI_N8N_KEEPALIVE_SECONDS=str(KEEPALIVE_SECONDS),
    ) as deploy:
        yield deploy


def test_the_437_answer_streams_token_by_token_over_rabbitmq(on_rabbitmq):
    workflow = on_rabbitmq.activate(fresh_ids(with_model_delay(example(REDIS_CHAT), 60)))
    reply = stream_chat(chat_url(on_rabbitmq.api_a, workflow), "What is 19 * 23?", "rmq-437")
    assert reply.status == 200
    assert reply.types()[0] == "begin" and reply.types()[-1] == "end"
    assert reply.text() == ANSWER_437
    items = [t for c, t in zip(reply.chunks, reply.arrivals, strict=True) if c["type"] == "item"]
    assert len(items) == 7 and items[-1] - items[0] > 0.25  # 7 tokens, 60 ms apart: not batched
    record = on_rabbitmq.execution(reply.headers["x-execution-id"])
    assert record["status"] == "success"
    assert record["worker"]["pid"] == on_rabbitmq.worker_a.pid


def test_every_connection_to_the_broker_asks_for_no_heartbeats(on_rabbitmq, node):
    """With AMQP heartbeats on, Celery's loop for gevent workers drained its event connection
    for up to 0.1 s after each read: every message waited about that long between its create
    and its claim (worker/celery_app.py; the wait itself is measured by
    `python bench/celery_hop.py 200 amqp://…`). So the workers and apis negotiate none, as the
    node itself reports, after they have served a chat."""
    workflow = on_rabbitmq.activate(fresh_ids(example(SIMPLE_CHAT)))
    reply = stream_chat(chat_url(on_rabbitmq.api_a, workflow), "What is 6 * 7?", "rmq-beat")
    assert reply.status == 200 and reply.types()[-1] == "end"
    timeouts = node.heartbeat_timeouts()
    assert timeouts and set(timeouts) == {0}, timeouts


def test_redis_memory_follows_the_conversation_across_workers_over_rabbitmq(on_rabbitmq):
    deploy = on_rabbitmq
    workflow = deploy.activate(fresh_ids(example(REDIS_CHAT)))
    replies, pids = deploy.converse(workflow, "rmq-ada")
    assert pids == [deploy.worker_a.pid, deploy.worker_b.pid, deploy.worker_a.pid]
    assert [r.text() for r in replies] == [
        "Based on the tools: Calculator returned 42.",
        "Nice to meet you, Ada!",
        "Your name is Ada.",
    ]
    assert [m["type"] for m in deploy.chat_list("rmq-ada")] == ["ai", "human"] * 3


def test_a_worker_killed_mid_stream_ends_the_stream_with_an_error_line(on_rabbitmq):
    deploy = on_rabbitmq
    workflow = deploy.activate(fresh_ids(with_model_delay(example(REDIS_CHAT), 300)))
    kill_worker_mid_stream(deploy, workflow, "rmq-kill")


def test_no_broker_data_lands_in_redis(on_rabbitmq):
    """The queues, unacked messages and kombu bindings are all in RabbitMQ: Redis holds only
    our own keys (records, workflows, memory) after the conversations above."""
    workflow = on_rabbitmq.activate(fresh_ids(example(REDIS_CHAT)))
    reply = stream_chat(chat_url(on_rabbitmq.api_b, workflow), "What is 2 * 3?", "rmq-keys")
    assert reply.text() == "Based on the tools: Calculator returned 6."
    prefix = on_rabbitmq.keys.prefix  # also in this deployment's queue names
    keys = list(on_rabbitmq.redis.scan_iter(count=1000))
    # A Redis broker would have left the queue lists and kombu's bindings for the queues named
    # with this deployment's prefix (other deployments of the test session may use Redis).
    broker_keys = [k for k in keys if prefix in k and not k.startswith(prefix)]
    broker_keys += [k for k in keys if k.startswith(prefix) and k.endswith(("qa", "qb", "qv"))]
    assert broker_keys == []
    assert any(k.startswith(prefix) for k in keys)  # ours are there


def test_a_broker_killed_and_started_again_serves_the_next_message(redis_url, tmp_path):
    """AMQP heartbeats are off (worker/celery_app.py): a broker that dies is noticed by its
    connections ending. Killed (SIGKILL) and started again on the same port, the next message
    is answered by the same api and worker, which connect again on their own."""
    node = RabbitMQNode(tmp_path / "rabbitmq").start()
    try:
        with Deployment.running(redis_url, CELERY_BROKER_URL=node.url) as deploy:
            workflow = deploy.activate(fresh_ids(example(SIMPLE_CHAT)))
            url = chat_url(deploy.base, workflow)
            first = stream_chat(url, "What is 6 * 7?", "rmq-restart-1")
            assert first.text() == "Based on the tools: Calculator returned 42."
            node.kill()
            node.start()
            reply = stream_chat(url, "What is 6 * 7?", "rmq-restart-2")
            assert reply.status == 200
            assert reply.text() == "Based on the tools: Calculator returned 42."
            record = deploy.execution(reply.headers["x-execution-id"])
            assert record["status"] == "success"
            assert record["worker"]["pid"] == deploy.worker.pid
    finally:
        node.stop()
