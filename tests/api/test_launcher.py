"""What the api's launcher sends: items past 64 KiB as JSON go beside the record, once, and the
task's message (which Celery encodes three times over on the api's event loop) only says so."""

from __future__ import annotations

import json

from api.launcher import Launcher
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
