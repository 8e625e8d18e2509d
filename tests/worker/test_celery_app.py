"""The Celery app: building one (as the api does to send tasks) connects no worker signal; the
worker connects them, and its task and signals reach the runtime kept on the app."""

from __future__ import annotations

import subprocess
import sys

import pytest
from celery import signals

from core.execution_record import ExecutionRecord
from core.settings import Settings
from core.task import TaskPayload
from worker.celery_app import (
    TASK_NAME,
    connect_worker_signals,
    create_celery,
    redis_message,
    send_execution,
    writes_own_messages,
)

WORKER_SIGNALS = (signals.worker_ready, signals.worker_shutting_down, signals.worker_shutdown)


class FakeRuntime:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def run(self, payload):
        self.calls.append(("run", payload))
        return "success"

    def warm(self):
        self.calls.append(("warm",))

    def start_background(self):
        self.calls.append(("start_background",))

    def stop_all_after(self, grace_seconds):
        self.calls.append(("stop_all_after", grace_seconds))

    def close(self):
        self.calls.append(("close",))


@pytest.fixture
def app():
    return create_celery(Settings(broker_url="memory://", shutdown_grace_seconds=3.0))


@pytest.fixture
def restore_signals(monkeypatch):
    """Whatever a test connects is gone after it: Celery's signals are process-wide."""
    for signal in WORKER_SIGNALS:
        monkeypatch.setattr(signal, "receivers", list(signal.receivers))


def test_building_the_app_connects_no_worker_signal():
    before = [len(s.receivers) for s in WORKER_SIGNALS]
    create_celery(Settings(broker_url="memory://"))
    assert [len(s.receivers) for s in WORKER_SIGNALS] == before


def test_building_the_app_builds_no_runtime(app):
    assert app.runtime is None


def test_the_task_hands_its_payload_to_the_runtime_on_the_app(app):
    app.runtime = FakeRuntime()
    assert app.tasks[TASK_NAME]({"record": {"id": "e1"}}) == "success"
    assert app.runtime.calls == [("run", {"record": {"id": "e1"}})]


def test_the_worker_signals_start_stop_and_close_the_runtime(app, restore_signals):
    app.runtime = FakeRuntime()
    connect_worker_signals(app)
    signals.worker_ready.send(sender=None)
    signals.worker_shutting_down.send(sender=None, sig="SIGTERM", how="Warm", exitcode=0)
    signals.worker_shutdown.send(sender=None)
    assert app.runtime.calls == [
        ("warm",),
        ("start_background",),
        ("stop_all_after", 3.0),
        ("close",),
    ]


def test_a_shutdown_before_any_runtime_was_built_builds_none(app, restore_signals):
    connect_worker_signals(app)
    signals.worker_shutting_down.send(sender=None, sig="SIGTERM", how="Warm", exitcode=0)
    signals.worker_shutdown.send(sender=None)
    assert app.runtime is None


def test_importing_the_task_name_does_not_import_celery():
    # The api imports TASK_NAME; only a process that sends or runs tasks needs Celery.
    code = "import sys, worker.celery_app; assert 'celery' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_message_the_api_writes_is_the_one_celery_sends(redis_url, redis_client, keys):
    """The api writes a task's message itself when the broker is its Redis (redis_message):
    what kombu reads back from it is what Celery's own send_task would have sent."""
    queue = keys.prefix + "queue"
    settings = Settings(redis_url=redis_url, broker_url=redis_url, task_queue=queue)
    assert writes_own_messages(settings)
    app = create_celery(settings)
    record = ExecutionRecord("e1", "wf1", session_id="s\u00e9", mode="webhook")
    items = [{"json": {"chatInput": "caf\u00e9 \U0001f600", "n": 1.5, "none": None}}]
    payload = TaskPayload(record=record, start_node="Trigger", items=items, streaming=True,
                          response_mode="streaming", workflow_ref="v1")  # fmt: skip
    send_execution(app, payload)
    redis_client.lpush(queue, redis_message(payload, queue))
    with app.connection_for_read() as connection:
        reader = connection.SimpleQueue(queue, no_ack=True)
        celerys, ours = reader.get(timeout=5), reader.get(timeout=5)  # LPUSH, BRPOP: in order
        reader.close()
    embed = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}
    assert ours.decode() == celerys.decode() == [[payload.encode()], {}, embed]
    assert ours.headers.pop("origin") and celerys.headers.pop("origin")  # pid@host
    assert ours.headers == celerys.headers
    assert ours.headers["task"] == TASK_NAME and ours.headers["id"] == "e1"
    assert ours.content_type == celerys.content_type == "application/json"
    assert ours.delivery_info["routing_key"] == celerys.delivery_info["routing_key"] == queue
    assert TaskPayload.decode(ours.decode()[0][0]).record == record


@pytest.mark.parametrize(
    ("changes", "own"),
    [
        ({}, True),
        ({"broker_url": "amqp://guest@localhost//"}, False),
        ({"broker_url": "redis://elsewhere:6379/0"}, False),
        ({"redis_cluster": True, "broker_url": "redis://broker:6379/0"}, False),
        ({"executions_mode": "regular"}, False),
    ],
)
def test_the_api_writes_its_own_messages_only_where_the_broker_is_its_redis(changes, own):
    url = "redis://redis:6379/0"
    assert writes_own_messages(Settings(**{"redis_url": url, "broker_url": url, **changes})) is own


@pytest.mark.parametrize("acked", [False, True])
def test_received_tasks_keep_no_ack_bookkeeping_in_redis_and_an_unacked_one_goes_back(
    redis_url, redis_client, keys, acked
):
    """kombu's ack emulation is off (worker/celery_app.py): receiving a task writes nothing
    beside the queue, and a task received but never acknowledged (a worker stopping warm with
    one in hand) is put back on its queue from memory when the channel closes."""
    queue = keys.prefix + "queue"
    settings = Settings(redis_url=redis_url, broker_url=redis_url, task_queue=queue)
    app = create_celery(settings)
    payload = TaskPayload(record=ExecutionRecord("e1", "wf1", mode="webhook"), start_node="T",
                          items=[{"json": {}}], workflow_ref="v1")  # fmt: skip
    redis_client.lpush(queue, redis_message(payload, queue))
    with app.connection_for_read() as connection:
        reader = connection.SimpleQueue(queue, no_ack=False)
        message = reader.get(timeout=5)
        assert redis_client.llen(queue) == 0
        assert not redis_client.keys("unacked*")  # kombu's unacked hash, its index and mutex
        if acked:
            message.ack()
        reader.close()
    assert redis_client.llen(queue) == (0 if acked else 1)
    if not acked:
        with app.connection_for_read() as connection:
            reader = connection.SimpleQueue(queue, no_ack=True)
            again = reader.get(timeout=5)
            reader.close()
        assert again.headers["id"] == "e1" and again.decode() == message.decode()
