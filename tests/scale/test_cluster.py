"""A Redis Cluster for state, memory and the relay (MINI_N8N_REDIS_CLUSTER=true): three valkey
primaries of our own, a plain Redis (the session's) as the Celery broker.

The same guarantees as on one Redis: the 437 answer streams, memory follows a conversation
across workers, concurrent sessions and 200 zero-delay streams complete exactly over sharded
pub/sub, a Chat node's conversation and a stop work; keys spread over the nodes, and no command
ever spans slots: every node's CROSSSLOT count is checked after each test."""

from __future__ import annotations

import concurrent.futures
import json
import subprocess
import sys
import threading
import uuid

import httpx
import pytest
import redis
from redis.cluster import RedisCluster

from api.relay import Relay
from core import events
from core.clock import now_ms
from core.execution_record import ExecutionRecord, Status
from core.executions import ExecutionStore
from core.keys import Keys
from core.pruning import Pruner, Rules
from core.retention import Retention
from core.settings import Settings
from mini_n8n.redis_server import valkey_server_path
from tests.chat.conversation import CONTINUE, FIRST, ask_name_workflow, next_frame, open_chat, start
from tests.chat.conversation import reply as send_reply
from tests.core.store_probes import RedisProbe
from tests.core.test_lifecycle_machine import run_machine
from tests.e2e.client import stream_chat
from tests.e2e.deployment import ROOT, Deployment, chat_url, fresh_ids, kill_worker_mid_stream
from tests.scale.servers import two_hundred_exact_streams, valkey_cluster
from tests.waiting import wait_until
from tests.workflows import REDIS_CHAT, example, with_model_delay

ANSWER_437 = "Based on the tools: Calculator returned 437."
API_KEY = "cluster-test-key"
LEASE_SECONDS = 2
KEEPALIVE_SECONDS = 1


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with valkey_cluster(tmp_path_factory.mktemp("cluster")) as started:
        yield started


@pytest.fixture(scope="module")
def on_cluster(cluster, redis_url):
    """Two workers on queues of their own, each fed by its own api, state on the cluster."""
    with Deployment.routed_pair(
        cluster.url,
        cluster=True,
        CELERY_BROKER_URL=redis_url,
        MINI_N8N_API_KEY=API_KEY,
        MINI_N8N_LEASE_SECONDS=str(LEASE_SECONDS),
        MINI_N8N_KEEPALIVE_SECONDS=str(KEEPALIVE_SECONDS),
    ) as deploy:
        yield deploy


@pytest.fixture(autouse=True)
def no_crossslot(cluster):
    """Whatever a test does, no node ever answers CROSSSLOT. (redis-py refuses a cross-slot
    command or script before sending it: that fails the request, and so the test, too.)"""
    yield
    assert cluster.errors().get("CROSSSLOT", 0) == 0


def test_the_437_answer_streams_token_by_token_on_the_cluster(on_cluster):
    workflow = on_cluster.activate(fresh_ids(with_model_delay(example(REDIS_CHAT), 60)))
    reply = stream_chat(chat_url(on_cluster.api_a, workflow), "What is 19 * 23?", "cl-437")
    assert reply.status == 200
    assert reply.types() == ["begin", *["item"] * 7, "end"]
    assert reply.text() == ANSWER_437
    items = [t for c, t in zip(reply.chunks, reply.arrivals, strict=True) if c["type"] == "item"]
    assert items[-1] - items[0] > 0.25  # 7 tokens, 60 ms apart: not batched
    assert on_cluster.execution(reply.headers["x-execution-id"])["status"] == "success"


def test_redis_memory_follows_the_conversation_across_workers_on_the_cluster(on_cluster, cluster):
    deploy = on_cluster
    workflow = deploy.activate(fresh_ids(example(REDIS_CHAT)))
    replies, pids = deploy.converse(workflow, "cl-ada")
    assert pids == [deploy.worker_a.pid, deploy.worker_b.pid, deploy.worker_a.pid]
    assert [r.text() for r in replies] == [
        "Based on the tools: Calculator returned 42.",
        "Nice to meet you, Ada!",
        "Your name is Ada.",
    ]
    assert [m["type"] for m in deploy.chat_list("cl-ada")] == ["ai", "human"] * 3
    # Inspection as the README has it: redis-cli -c follows the slot to its node.
    cli = valkey_server_path().replace("valkey-server", "valkey-cli")
    listed = subprocess.run(
        [cli, "-c", "-u", cluster.url, "LRANGE", deploy.keys.chat("cl-ada"), "0", "0"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "Your name is Ada." in listed
    # And the CLI lists and shows sessions from every node.
    assert "cl-ada" in mini_n8n(deploy.env, "sessions").splitlines()
    assert "ai: Your name is Ada." in mini_n8n(deploy.env, "sessions", "show", "cl-ada")


def test_twenty_concurrent_sessions_complete_exactly_and_in_order(on_cluster):
    workflow = on_cluster.activate(fresh_ids(example(REDIS_CHAT)))

    def session(s: int) -> list[str]:
        base = (on_cluster.api_a, on_cluster.api_b)[s % 2]
        return [
            stream_chat(chat_url(base, workflow), f"What is {s} * {turn}?", f"cl-s{s}").text()
            for turn in (2, 3, 4)
        ]

    with concurrent.futures.ThreadPoolExecutor(max_workers=20) as pool:
        answers = list(pool.map(session, range(20)))
    for s, texts in enumerate(answers):
        assert texts == [f"Based on the tools: Calculator returned {s * t}." for t in (2, 3, 4)]
        assert len(on_cluster.chat_list(f"cl-s{s}")) == 6


def test_two_hundred_zero_delay_streams_lose_nothing_over_sharded_pubsub(on_cluster, cluster):
    workflow = on_cluster.activate(fresh_ids(example(REDIS_CHAT)))
    apis = (on_cluster.api_a, on_cluster.api_b)
    two_hundred_exact_streams(lambda i: chat_url(apis[i % 2], workflow), "cl-many-")
    # The events went over sharded pub/sub: every node carried some.
    shards = [_sharded_publishes(url) for url in cluster.node_urls()]
    assert all(count > 0 for count in shards), shards
    # Each api process listens with one connection per primary, however many streams it holds.
    relays = [_clients_named(url, "mini-n8n-relay") for url in cluster.node_urls()]
    assert relays == [2, 2, 2]


def test_keys_spread_over_every_node(on_cluster, cluster):
    workflow = on_cluster.activate(fresh_ids(example(REDIS_CHAT)))
    for i in range(12):
        assert (
            stream_chat(chat_url(on_cluster.api_a, workflow), "hi", f"cl-spread-{i}").status == 200
        )
    counts = []
    for url in cluster.node_urls():
        node = redis.Redis.from_url(url, decode_responses=True)
        counts.append(sum(1 for _ in node.scan_iter(match=f"{on_cluster.keys.prefix}*")))
    assert all(count > 0 for count in counts), counts


def test_a_chat_node_conversation_on_the_cluster(on_cluster):
    workflow = on_cluster.activate(ask_name_workflow())
    execution_id = start(on_cluster.api_a, workflow, "cl-ask")
    with open_chat(on_cluster.api_b, "cl-ask", execution_id) as ws:
        assert next_frame(ws) == FIRST
        send_reply(ws, "cl-ask", "Ada")
        assert next_frame(ws) == "Nice to meet you, Ada!"
        assert next_frame(ws) == CONTINUE
    wait_until(
        lambda: on_cluster.execution(execution_id)["status"] == "success",
        10,
        "the conversation's execution to finish",
    )


def test_a_stop_reaches_the_worker_running_the_execution(on_cluster):
    workflow = on_cluster.activate(fresh_ids(with_model_delay(example(REDIS_CHAT), 300)))
    stopped = threading.Event()

    def stop_once(chunk):
        if chunk["type"] == "item" and not stopped.is_set():
            stopped.set()
            store = ExecutionStore(on_cluster.redis, on_cluster.keys)
            execution_id = store.list(workflow["id"])[0].id
            answer = httpx.post(  # another api process than the stream's
                f"{on_cluster.api_b}/rest/executions/{execution_id}/stop",
                headers={"Authorization": f"Bearer {API_KEY}"},
                timeout=10,
            )
            assert answer.status_code == 200, answer.text

    reply = stream_chat(
        chat_url(on_cluster.api_a, workflow), "What is 19 * 23?", "cl-stop", on_chunk=stop_once
    )
    assert reply.chunks[-1]["type"] == "error"
    assert reply.chunks[-1]["content"] == "The execution was stopped"
    assert reply.text() != ANSWER_437  # cut short
    record = on_cluster.execution(reply.headers["x-execution-id"])
    assert record["status"] == "canceled"


def test_a_worker_killed_mid_stream_ends_the_stream_and_its_session_goes_on(on_cluster):
    """The lease is taken and dropped in steps of its own in a cluster: a lost worker's stream
    still ends with an error line within the bound, and the session's next message, whose turn
    the lost one held, is answered."""
    deploy = on_cluster
    workflow = deploy.activate(fresh_ids(with_model_delay(example(REDIS_CHAT), 300)))
    kill_worker_mid_stream(deploy, workflow, "cl-kill")
    after = stream_chat(chat_url(deploy.api_a, workflow), "What is 2 * 3?", "cl-kill")
    assert after.text() == "Based on the tools: Calculator returned 6."


def test_mini_n8n_import_writes_workflows_to_the_cluster(cluster, redis_url, tmp_path):
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(fresh_ids(example(REDIS_CHAT))))
    deploy = Deployment(cluster.url, cluster=True, CELERY_BROKER_URL=redis_url)
    try:
        assert "imported" in mini_n8n(deploy.env, "import", str(path))
        assert len(deploy.workflows.list()) == 1
    finally:
        deploy.stop()


def test_the_relay_subscribes_again_when_a_channel_slot_moves(cluster):
    relay = Relay(cluster.url, cluster=True)
    client = RedisCluster.from_url(cluster.url, decode_responses=True)
    channel = "relay-test:execution:{moving}:events"
    stream = relay.subscribe(channel)
    client.spublish(channel, json.dumps({"s": 0, "lines": "before\n"}))
    assert stream.get(timeout=5) == events.lines("before\n", seq=0)

    slot = client.keyslot(channel)
    source = client.nodes_manager.get_node_from_slot(slot)
    target = next(n for n in client.get_primaries() if n.name != source.name)
    _move_slot(slot, source, target)

    # The old owner tells its subscribers the channel is gone; the relay subscribes on the new one.
    wait_until(
        lambda: (
            relay._shard_of.get(channel) is not None
            and relay._shard_of[channel].name == target.name
            and _subscribed_on(target, channel)
        ),
        10,
        "the relay to subscribe on the slot's new owner",
    )
    client.nodes_manager.initialize()
    client.spublish(channel, json.dumps({"s": 1, "lines": "after\n"}))
    assert stream.get(timeout=5) == events.lines("after\n", seq=1)

    # A slot that moves while the relay is not listening on it: its map is stale, the first
    # subscription meets MOVED, and is sent again to the new owner.
    other = "relay-test:execution:{elsewhere}:events"
    slot = client.keyslot(other)
    source = client.nodes_manager.get_node_from_slot(slot)
    target = next(n for n in client.get_primaries() if n.name != source.name)
    _move_slot(slot, source, target)
    late = relay.subscribe(other)
    assert relay._shard_of[other].name == target.name
    client.nodes_manager.initialize()
    client.spublish(other, json.dumps({"s": 0, "lines": "moved\n"}))
    assert late.get(timeout=5) == events.lines("moved\n", seq=0)
    relay.unsubscribe(stream)
    relay.unsubscribe(late)
    client.close()


def test_streams_of_many_slots_ended_together_are_unsubscribed_and_the_shard_goes_on(cluster):
    """The relay sends the UNSUBSCRIBEs of streams that ended together in one write: one
    SUNSUBSCRIBE per channel, as a cluster refuses one naming channels of several slots (the
    autouse check counts CROSSSLOT answers); the shard's other streams go on."""
    relay = Relay(cluster.url, cluster=True)
    client = RedisCluster.from_url(cluster.url, decode_responses=True)
    channels = [f"relay-test:execution:{{together{i}}}:events" for i in range(40)]
    streams = [relay.subscribe(c) for c in channels]
    staying = relay.subscribe("relay-test:execution:{staying}:events")
    for stream in streams:
        relay.unsubscribe(stream)
    nodes = client.get_primaries()
    wait_until(
        lambda: not any(_subscribed_on(n, c) for n in nodes for c in channels),
        10,
        "every ended stream's channel unsubscribed",
    )
    client.spublish(staying.channel, json.dumps({"s": 0, "lines": "still here\n"}))
    assert staying.get(timeout=5) == events.lines("still here\n", seq=0)
    relay.unsubscribe(staying)
    client.close()


def mini_n8n(env: dict[str, str], *args: str) -> str:
    """What the `mini-n8n` command prints (it must succeed)."""
    done = subprocess.run(
        [sys.executable, "-m", "mini_n8n.cli", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _move_slot(slot: int, source, target) -> None:
    """Hand an empty slot from one primary to another, as a resharding does."""
    src = redis.Redis(host=source.host, port=source.port, decode_responses=True)
    dst = redis.Redis(host=target.host, port=target.port, decode_responses=True)
    src_id, dst_id = src.execute_command("CLUSTER MYID"), dst.execute_command("CLUSTER MYID")
    dst.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", src_id)
    src.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", dst_id)
    dst.execute_command("CLUSTER SETSLOT", slot, "NODE", dst_id)
    src.execute_command("CLUSTER SETSLOT", slot, "NODE", dst_id)


def _subscribed_on(node, channel: str) -> bool:
    client = redis.Redis(host=node.host, port=node.port, decode_responses=True)
    return channel in client.execute_command("PUBSUB SHARDCHANNELS")


def _clients_named(url: str, name: str) -> int:
    clients = redis.Redis.from_url(url, decode_responses=True).client_list()
    return sum(1 for c in clients if c["name"] == name)


def _sharded_publishes(url: str) -> int:
    stats = redis.Redis.from_url(url, decode_responses=True).info("commandstats")
    return int(stats.get("cmdstat_spublish", {}).get("calls", 0))


def test_the_lifecycle_keeps_its_invariants_on_the_cluster(cluster, monkeypatch):
    """The state machine of tests/core/test_lifecycle_machine.py, every transition in the
    cluster's steps of one slot each."""
    run_machine(
        lambda: RedisProbe(
            RedisCluster.from_url(cluster.url, decode_responses=True), queue_timeout_seconds=300
        ),
        monkeypatch,
        max_examples=25,
    )


def test_the_history_is_pruned_and_unsaved_ends_retired_in_steps_of_one_slot(cluster):
    """core/pruning.py and core/retention.py on the cluster: an execution's keys go in one
    script of its slot, the indexes in steps of their own (no CROSSSLOT, checked after)."""
    client = RedisCluster.from_url(cluster.url, decode_responses=True)
    keys = Keys(prefix=f"prune{uuid.uuid4().hex[:6]}:", cluster=True)
    store = ExecutionStore(client, keys)
    ended = []
    for i in range(6):
        record = ExecutionRecord(f"e{i}", "w1", created_at=now_ms(), queued_at=now_ms())
        store.create(record)
        running = record.next(status=Status.RUNNING, claim="t1")
        assert store.claim(record, running)
        final = running.next(status=Status.SUCCESS, stopped_at=now_ms())
        assert store.finish(running, final, "").written
        ended.append(final)
    Retention(store, Settings()).retire(ended[5])
    assert Pruner(store, Rules(max_count=2)).run().deleted == 3
    history = client.zrange(keys.executions_history(), 0, -1)
    assert [m.split(" ")[0] for m in history] == ["e3", "e4"]
    assert not client.exists(keys.execution("e0")) and client.ttl(keys.execution("e5")) <= 120


def test_on_the_cluster_a_message_for_a_session_with_an_unfinished_conversation_joins_it(cluster):
    """The look and the create are one step in the session's slot: a second conversation for
    the session is not started while one is unfinished, whichever api asks; once it ended,
    the next message starts the next one."""
    client = RedisCluster.from_url(cluster.url, decode_responses=True)
    keys = Keys(prefix=f"join{uuid.uuid4().hex[:6]}:", cluster=True)
    store = ExecutionStore(client, keys)

    def conversation(execution_id: str) -> ExecutionRecord:
        return ExecutionRecord(execution_id, "w1", session_id="s1", created_at=now_ms(),
                               queued_at=now_ms(), response_mode="responseNodes")  # fmt: skip

    first = conversation("c1")
    assert store.create(first, join=True) is None
    assert store.create(conversation("c2"), join=True) == "c1"
    assert not client.exists(keys.execution("c2"))  # not started: it is c1's reply
    assert client.lrange(keys.session_queue("w1", "s1"), 0, -1) == ["c1"]
    running = first.next(status=Status.RUNNING, claim="t1")
    assert store.claim(first, running)
    assert store.finish(running, running.next(status=Status.SUCCESS), "").written
    assert store.create(conversation("c3"), join=True) is None
    assert client.lrange(keys.session_queue("w1", "s1"), 0, -1) == ["c3"]


def test_on_the_cluster_a_conversation_found_ended_is_not_joined(cluster):
    client = RedisCluster.from_url(cluster.url, decode_responses=True)
    keys = Keys(prefix=f"join{uuid.uuid4().hex[:6]}:", cluster=True)
    store = ExecutionStore(client, keys)
    record = ExecutionRecord("c1", "w1", session_id="s1", response_mode="responseNodes")
    assert store.create(record, join=True) is None
    client.delete(keys.execution("c1"))  # its record expired: the conversation is over
    later = ExecutionRecord("c2", "w1", session_id="s1", response_mode="responseNodes")
    assert store.create(later, join=True) is None
