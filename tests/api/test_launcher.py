"""What the api's launcher sends: items past 64 KiB as JSON go beside the record, once, and the
task's message (which Celery encodes three times over on the api's event loop) only says so."""

from __future__ import annotations

import base64
import json

import pytest
import redis

from api.launcher import Launcher, LaunchError
from api.relay import RelayError
from api.task_sender import TaskSender
from core.executions import ExecutionStore
from core.settings import Settings
from core.task import ITEMS_INLINE_BYTES, TaskPayload
from engine.workflow import load_workflow
from tests.workflows import GREETING, example


def launch(redis_client, keys, items) -> tuple[TaskPayload, ExecutionStore]:
    store = ExecutionStore(redis_client, keys)
    launcher = Launcher(Settings(), keys, store, relay=lambda: None, celery=lambda: None)
    sent: list[TaskPayload] = []
    launcher._sender = TaskSender(sent.append)
    raw = example(GREETING)
    launcher.start(raw, load_workflow(raw), "Webhook", items, mode="webhook",
                   response_mode="onReceived")  # fmt: skip
    (payload,) = sent
    return payload, store


def test_items_past_the_inline_size_are_stored_beside_the_record_and_named_by_the_task(
    redis_client, keys
):
    items = [{"json": {"body": {"text": "x" * ITEMS_INLINE_BYTES}}}]
    payload, store = launch(redis_client, keys, items)
    message = payload.encode()
    assert message["itemsStored"] is True and message["items"] == []
    assert len(json.dumps(message)) < 2048
    assert store.stored_items(payload.record.id) == items
    assert TaskPayload.decode(message).items_stored


def test_small_items_travel_in_the_tasks_message(redis_client, keys):
    items = [{"json": {"body": {"name": "Ada"}}}]
    payload, store = launch(redis_client, keys, items)
    assert payload.encode()["items"] == items and "itemsStored" not in payload.encode()
    assert store.stored_items(payload.record.id) is None


class Relay:
    """Subscribes for real as the api's relay would, noting what Redis held at that moment.
    `slow`: the SUBSCRIBE reaches Redis only once the launcher waits for its confirmation (it
    was sent, and the create overtook it)."""

    def __init__(self, client, keys, fail: bool = False, slow: bool = False, lost: bool = False):
        self.client, self.keys, self.fail, self.slow, self.lost = client, keys, fail, slow, lost
        self.seen: list[tuple[str, int, int]] = []
        self.unsubscribed: list[str] = []
        self.confirmed: list[str] = []
        self.pubsub = client.pubsub()

    def open(self, channel: str) -> str:
        if self.fail:
            raise ConnectionError("Redis went away")
        execution_id = channel.split(":")[-2]
        record = self.client.exists(self.keys.execution(execution_id))
        self.seen.append((execution_id, record, self.client.llen(self.keys.prefix + "queue")))
        if not self.slow:
            self.pubsub.subscribe(channel)
        return channel

    def confirm(self, stream: str) -> str:
        self.confirmed.append(stream)
        if self.lost:  # Redis paused, or the relay's connection dropped, after the SUBSCRIBE
            raise RelayError("Redis did not confirm the subscription in time")
        self.pubsub.subscribe(stream)
        return stream

    def unsubscribe(self, stream) -> None:
        self.unsubscribed.append(stream)


def own_launcher(redis_url, redis_client, keys, relay: Relay) -> Launcher:
    settings = Settings(redis_url=redis_url, broker_url=redis_url, task_queue=keys.prefix + "queue")
    store = ExecutionStore(redis_client, keys)
    return Launcher(settings, keys, store, relay=lambda: relay, celery=lambda: None)


def start_streaming(launcher: Launcher):
    raw = example(GREETING)
    return launcher.start(raw, load_workflow(raw), "Webhook", [{"json": {}}], mode="webhook",
                          response_mode="streaming")  # fmt: skip


def test_with_the_broker_on_its_redis_the_api_subscribes_then_records_and_enqueues_at_once(
    redis_url, redis_client, keys
):
    relay = Relay(redis_client, keys)
    launch = start_streaming(own_launcher(redis_url, redis_client, keys, relay))
    assert relay.seen == [(launch.execution_id, 0, 0)]  # nothing yet when it subscribed
    (message,) = redis_client.lrange(keys.prefix + "queue", 0, -1)
    body = json.loads(base64.b64decode(json.loads(message)["body"]))
    assert TaskPayload.decode(body[0][0]).record.id == launch.execution_id
    assert ExecutionStore(redis_client, keys).get(launch.execution_id).status == "new"


def test_a_create_that_overtakes_its_subscribe_writes_nothing_and_runs_again_once_confirmed(
    redis_url, redis_client, keys
):
    relay = Relay(redis_client, keys, slow=True)
    launch = start_streaming(own_launcher(redis_url, redis_client, keys, relay))
    channel = keys.execution_events(launch.execution_id)
    assert relay.confirmed == [channel]
    assert redis_client.llen(keys.prefix + "queue") == 1  # one task, after the confirmation
    assert ExecutionStore(redis_client, keys).get(launch.execution_id).status == "new"


def test_a_create_that_overtook_a_subscribe_never_confirmed_starts_nothing_and_lets_go(
    redis_url, redis_client, keys
):
    relay = Relay(redis_client, keys, slow=True, lost=True)
    with pytest.raises(LaunchError, match="did not confirm"):
        start_streaming(own_launcher(redis_url, redis_client, keys, relay))
    ((execution_id, _, _),) = relay.seen
    assert relay.unsubscribed == [keys.execution_events(execution_id)]
    left = [k for k in redis_client.scan_iter(match=keys.prefix + "*") if ":snapshot:" not in k]
    assert left == []  # no record, no task, no place in the session's line


def test_a_subscription_that_fails_leaves_nothing_behind(redis_url, redis_client, keys):
    launcher = own_launcher(redis_url, redis_client, keys, Relay(redis_client, keys, fail=True))
    with pytest.raises(LaunchError, match="Redis went away"):
        start_streaming(launcher)
    left = [k for k in redis_client.scan_iter(match=keys.prefix + "*") if ":snapshot:" not in k]
    assert left == []  # no record, no task, no index entry (the workflow's version may stay)


def test_a_record_that_cannot_be_written_is_failed_and_its_stream_let_go(
    redis_url, redis_client, keys, monkeypatch
):
    relay = Relay(redis_client, keys)
    launcher = own_launcher(redis_url, redis_client, keys, relay)
    monkeypatch.setattr(launcher.store, "create", _refused)
    with pytest.raises(LaunchError, match="READONLY"):
        start_streaming(launcher)
    ((execution_id, _, _),) = relay.seen
    assert relay.unsubscribed == [keys.execution_events(execution_id)]
    assert redis_client.llen(keys.prefix + "queue") == 0


def _refused(*_args, **_kwargs):
    raise redis.ReadOnlyError("READONLY You can't write against a read only replica.")
