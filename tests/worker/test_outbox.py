"""The worker's outbox keeps publishing whatever one message, one batch or Redis does to it: the
thread that serves every execution of a worker must never die of one of them, a flush tells
when everything before it is out, and the final event is numbered after it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from core.clock import now_ms
from core.execution_record import ExecutionRecord, Status
from core.executions import ExecutionStore
from core.results import FinalResult
from core.task import TaskPayload
from engine.run_data import Run
from worker import publisher
from worker.publisher import Outbox
from worker.waiting import Conversations

ROOT = Path(__file__).resolve().parents[2]


def _subscriber(redis_url: str, channel: str):
    """Subscribed, and Redis has confirmed it."""
    pubsub = redis.Redis.from_url(redis_url, decode_responses=True).pubsub()
    pubsub.subscribe(channel)
    confirmation = pubsub.get_message(timeout=5)
    assert confirmation and confirmation["type"] == "subscribe"
    return pubsub


def _messages(pubsub, count: int) -> list[dict]:
    out = []
    while len(out) < count:
        message = pubsub.get_message(timeout=5)
        assert message is not None, f"only {len(out)} of {count} messages arrived"
        out.append(json.loads(message["data"]))
    return out


def test_a_lone_surrogate_in_a_chunk_is_published_as_a_json_escape(redis_url, redis_client):
    pubsub = _subscriber(redis_url, "c1:events")
    outbox = Outbox(redis_client)
    outbox.chunk("c1:events", {"type": "item", "content": "a\ud800b"})
    assert outbox.flush("c1:events").wait(5)
    (first,) = _messages(pubsub, 1)
    assert first["lines"] == '{"type":"item","content":"a\\ud800b"}\n'
    assert json.loads(first["lines"])["content"] == "a\ud800b"


def test_the_final_event_is_numbered_after_everything_flushed_before_it(redis_url, redis_client):
    pubsub = _subscriber(redis_url, "c4:events")
    outbox = Outbox(redis_client)
    outbox.chunk("c4:events", {"type": "item", "content": "a"})
    outbox.response("c4:events", {"status": 200, "body": "ok"})
    assert outbox.flush("c4:events").wait(5)
    assert [m["s"] for m in _messages(pubsub, 2)] == [0, 1]
    event, seq = outbox.final("c4:events", FinalResult(Status.SUCCESS))
    assert seq == 2 and json.loads(event) == {"s": 2, "done": {"status": "success", "error": None}}
    assert (
        outbox.final("c4:events", FinalResult(Status.SUCCESS))[1] == 0
    )  # the channel is forgotten


class FailingOnce(redis.Redis):
    """A client whose first pipeline fails with something other than a RedisError."""

    failures = 1

    def pipeline(self, *args, **kwargs):
        pipe = super().pipeline(*args, **kwargs)
        if FailingOnce.failures:
            FailingOnce.failures -= 1

            def boom():
                raise RuntimeError("not a Redis error")

            pipe.execute = boom
        return pipe


def test_an_unexpected_error_in_one_batch_does_not_stop_the_next(redis_url):
    client = FailingOnce.from_url(redis_url, decode_responses=True)
    pubsub = _subscriber(redis_url, "c2:events")
    outbox = Outbox(client)
    outbox.chunk("c0:events", {"type": "item", "content": "lost"})
    assert outbox.flush("c0:events").wait(
        5
    )  # its finisher is not left waiting on a batch that failed
    outbox.chunk("c2:events", {"type": "item", "content": "after"})
    assert outbox.flush("c2:events").wait(5)
    assert [m.get("lines") for m in _messages(pubsub, 1)] == ['{"type":"item","content":"after"}\n']
    assert outbox.idle()


class UnreachableTwice(redis.Redis):
    """A client whose first two pipelines find Redis unreachable."""

    failures = 2

    def pipeline(self, *args, **kwargs):
        pipe = super().pipeline(*args, **kwargs)
        execute = pipe.execute

        def flaky():
            if UnreachableTwice.failures:
                UnreachableTwice.failures -= 1
                raise redis.ConnectionError("Connection refused")
            return execute()

        pipe.execute = flaky
        return pipe


def test_a_batch_redis_refused_is_published_once_it_answers(redis_url, caplog):
    client = UnreachableTwice.from_url(redis_url, decode_responses=True)
    pubsub = _subscriber(redis_url, "c5:events")
    outbox = Outbox(client, sleep=lambda seconds: None)
    outbox.chunk("c5:events", {"type": "item", "content": "kept"})
    assert outbox.flush("c5:events").wait(5)
    assert _messages(pubsub, 1)[0]["lines"] == '{"type":"item","content":"kept"}\n'
    assert caplog.text.count("retrying") == 2


def test_a_batch_redis_refuses_past_the_bound_is_dropped_and_the_flush_ends(
    redis_url, monkeypatch, caplog
):
    monkeypatch.setattr(publisher, "PUBLISH_RETRY_SECONDS", 0)
    UnreachableTwice.failures = 1
    outbox = Outbox(UnreachableTwice.from_url(redis_url), sleep=lambda seconds: None)
    outbox.chunk("c6:events", {"type": "item", "content": "dropped"})
    assert outbox.flush("c6:events").wait(5)
    assert "dropped" in caplog.text


class _Killed(BaseException):
    """What only kills a thread: its loop goes on after any Exception."""


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the kill
def test_a_dead_publisher_thread_is_started_again(redis_url, redis_client):
    pubsub = _subscriber(redis_url, "c3:events")
    outbox = Outbox(redis_client)
    send = outbox._send

    def dying(publishes):
        outbox._send = send
        raise _Killed()

    outbox._send = dying
    outbox.chunk("c3:events", {"type": "item", "content": "lost"})
    assert outbox.flush("c3:events").wait(5)  # the dying batch's waiters go on
    dead = outbox._thread.thread
    assert dead is not None
    dead.join(5)
    assert not dead.is_alive()
    outbox.chunk("c3:events", {"type": "item", "content": "x"})
    assert outbox.flush("c3:events").wait(5)
    assert _messages(pubsub, 1)[0]["lines"] == '{"type":"item","content":"x"}\n'
    assert outbox._thread.thread is not dead and outbox._thread.thread.is_alive()


def test_a_publish_redis_refuses_is_logged_not_dropped_in_silence(
    redis_url, redis_client, keys, caplog
):
    """A publish Redis answers with an error (here an ACL that denies the channel) is an error
    of the batch, logged, as the pipeline's execute raised it; the outbox goes on."""
    user = f"{keys.prefix}outbox"
    redis_client.acl_setuser(user, enabled=True, passwords=["+pw"], commands=["+@all"],
                             keys=["*"], channels=["allowed*"])  # fmt: skip
    try:
        client = redis.Redis.from_url(redis_url, username=user, password="pw")
        outbox = Outbox(client)
        outbox.chunk("denied:events", {"type": "item", "content": "x"})
        assert outbox.flush("denied:events").wait(5)
        assert "could not publish a batch" in caplog.text and "No permissions" in caplog.text
        pubsub = _subscriber(redis_url, "allowed1:events")
        outbox.chunk("allowed1:events", {"type": "item", "content": "y"})
        assert outbox.flush("allowed1:events").wait(5)
        assert _messages(pubsub, 1)[0]["lines"] == '{"type":"item","content":"y"}\n'
    finally:
        redis_client.acl_deluser(user)


def under_gevent(script: str, redis_url: str) -> None:
    """`script` in a process of its own, monkey-patched as a worker is; it asserts."""
    done = subprocess.run(
        [sys.executable, "-c", script, redis_url],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]


GEVENT_HANDOVER = """
from gevent import monkey; monkey.patch_all()
import sys, greenlet, redis
from worker.publisher import Outbox

outbox = Outbox(redis.Redis.from_url(sys.argv[1]))
outbox.chunk("c8:events", {"type": "begin"})  # starts the outbox's thread (a greenlet)
assert outbox.flush("c8:events").wait(5)
switches = []
greenlet.settrace(lambda event, args: switches.append(event))
for token in ("a", "b", "c"):
    outbox.chunk("c8:events", {"type": "item", "content": token})
greenlet.settrace(None)
assert switches == [], switches
assert outbox.flush("c8:events").wait(5)
"""


def test_under_gevent_handing_a_chunk_over_lets_nothing_else_run_first(redis_url):
    """The execution goes on with its tokens (and its model request) before the outbox or a
    worker's broker read get a turn: Thread.is_alive() switched to the hub on every chunk."""
    under_gevent(GEVENT_HANDOVER, redis_url)


GEVENT_ONE_WRITE = """
from gevent import monkey; monkey.patch_all()
import sys, threading, gevent, redis
from core import redis_clients
from worker.publisher import Outbox

writes = []
exchange = redis_clients.Quick.exchange
def counted(self, commands):
    writes.append(len(commands))
    return exchange(self, commands)
redis_clients.Quick.exchange = counted

outbox = Outbox(redis.Redis.from_url(sys.argv[1]))
for channel in ("a:events", "b:events"):  # two executions streaming
    outbox.chunk(channel, {"type": "begin"})
    assert outbox.flush(channel).wait(5)
writes.clear()
read = threading.Event()  # the other execution's model read, as its pump hands it over

def other_execution():
    read.wait()
    outbox.chunk("b:events", {"type": "item", "content": "b"})

other = gevent.spawn(other_execution)
gevent.sleep(0.01)  # it waits for its read
outbox.chunk("a:events", {"type": "item", "content": "a"})  # wakes the outbox first
read.set()  # then the other execution
assert outbox.flush("a:events").wait(5) and outbox.flush("b:events").wait(5)
other.join()
assert writes == [2], writes  # both in one write: the outbox let the loop turn first
"""


def test_under_gevent_tokens_of_executions_woken_together_go_out_in_one_write(redis_url):
    under_gevent(GEVENT_ONE_WRITE, redis_url)


def test_an_execution_streaming_alone_is_published_without_a_pause(redis_url, monkeypatch):
    pauses = []
    monkeypatch.setattr(publisher, "let_the_loop_turn", lambda: pauses.append("turn"))
    pubsub = _subscriber(redis_url, "c9:events")
    outbox = Outbox(redis.Redis.from_url(redis_url))
    for token in ("a", "b", "c"):
        outbox.chunk("c9:events", {"type": "item", "content": token})
        assert outbox.flush("c9:events").wait(5)
    assert len(_messages(pubsub, 3)) == 3 and pauses == []


def test_each_numbered_event_is_kept_for_a_while_as_it_is_published(redis_url, redis_client, keys):
    channel = keys.execution_events("k1")
    pubsub = _subscriber(redis_url, channel)
    outbox = Outbox(redis_client)
    outbox.chunk(channel, {"type": "item", "content": "a"})
    assert outbox.flush(channel).wait(5)
    redis_client.script_flush()  # as after a Redis restart: the outbox loads its script again
    outbox.response(channel, {"status": 200, "body": "ok"})
    assert outbox.flush(channel).wait(5)
    heard = _messages(pubsub, 2)
    kept = [json.loads(m) for m in redis_client.lrange(keys.execution_sent("k1"), 0, -1)]
    assert kept == heard and [m["s"] for m in kept] == [0, 1]
    assert 0 < redis_client.pttl(keys.execution_sent("k1")) <= publisher.REPLAY_SECONDS * 1000


def test_a_forgotten_channel_keeps_no_numbering_once_what_came_before_is_out(
    redis_url, redis_client
):
    pubsub = _subscriber(redis_url, "c7:events")
    outbox = Outbox(redis_client)
    outbox.chunk("c7:events", {"type": "item", "content": "a"})
    outbox.response("c7:events", {"status": 200, "body": "ok"})
    outbox.forget("c7:events")
    assert outbox.flush("c7:events").wait(5)
    assert [m["s"] for m in _messages(pubsub, 2)] == [0, 1]  # numbered before it went
    assert outbox.numbered == 0
    outbox.chunk("c7:events", {"type": "item", "content": "b"})  # resumed here: numbered afresh
    assert outbox.flush("c7:events").wait(5)
    assert [m["s"] for m in _messages(pubsub, 1)] == [0]


def test_an_execution_that_waits_for_a_reply_leaves_no_numbering_in_its_worker(redis_client, keys):
    store = ExecutionStore(redis_client, keys)
    outbox = Outbox(redis_client)
    record = ExecutionRecord("e1", "w1", created_at=now_ms(), response_mode="responseNodes")
    store.create(record)
    running = record.next(status=Status.RUNNING, claim="t1")
    assert store.claim(record, running)
    outbox.chunk(keys.execution_events("e1"), {"type": "item", "content": "a"})
    run = Run(status=Status.WAITING, waiting={"node": "Ask name"})
    payload = TaskPayload(running, workflow={"id": "w1"}, response_mode="responseNodes")
    outcome, _ = Conversations(store, outbox).pause(payload, running, run, {})
    assert outcome == "paused"
    assert outbox.flush(keys.execution_events("e1")).wait(5)
    assert outbox.numbered == 0


def test_a_resumed_execution_numbers_its_events_on_from_where_its_wait_left_them(
    redis_url, redis_client, keys
):
    """A stream open across a wait (a Wait node in a streaming chat) reads one numbering: the
    run that goes on, here or on another worker, publishes no number twice and skips none."""
    channel = keys.execution_events("e1")
    pubsub = _subscriber(redis_url, channel)
    store = ExecutionStore(redis_client, keys)
    outbox = Outbox(redis_client)
    record = ExecutionRecord("e1", "w1", created_at=now_ms(), response_mode="streaming")
    store.create(record)
    running = record.next(status=Status.RUNNING, claim="t1")
    assert store.claim(record, running)
    outbox.chunk(channel, {"type": "item", "content": "before"})
    run = Run(status=Status.WAITING, waiting={"node": "Wait", "waitFor": "time"})
    payload = TaskPayload(running, workflow={"id": "w1"}, streaming=True, response_mode="streaming")
    conversations = Conversations(store, outbox)
    assert conversations.pause(payload, running, run, {})[0] == "paused"
    saved = conversations.waiting.resume_state("e1")
    assert (saved["events"], saved["streaming"]) == (1, True)
    queued = store.resume_expired(store.get("e1"))
    resumed = TaskPayload.decode(TaskPayload.resuming(queued, saved, None).encode())
    assert (resumed.events, resumed.streaming, resumed.expired) == (1, True, True)
    conversations.continue_numbering(resumed, queued)  # on this worker, just after its forget
    outbox.chunk(channel, {"type": "item", "content": "after"})
    assert outbox.flush(channel).wait(5)
    assert [m["s"] for m in _messages(pubsub, 2)] == [0, 1]
    assert outbox.final(channel, FinalResult(Status.SUCCESS))[1] == 2
