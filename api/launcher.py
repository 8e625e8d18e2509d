"""Starting an execution from the api: record it, subscribe to its events, enqueue it.

The order is the point: the relay's subscription is confirmed by Redis before the task is
enqueued, so a worker can never publish an event nobody hears (peer-lessons: Dify #40948).
"""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, NoReturn

from api.relay import Relay, Stream
from api.task_sender import TaskSender
from core import jsontext
from core.clock import now_ms
from core.execution_outcomes import NotSubscribed, RouteChanged
from core.execution_record import ExecutionRecord
from core.executions import ExecutionStore
from core.keys import Keys
from core.redis_errors import error_text
from core.settings import Settings
from core.task import ITEMS_INLINE_BYTES, TaskPayload
from core.workflow_snapshots import WorkflowSnapshots
from core.workflow_store import RouteCheck
from engine.workflow import Workflow
from worker.celery_app import redis_message, send_execution, writes_own_messages

if TYPE_CHECKING:
    from worker.runtime import WorkerRuntime


class LaunchError(Exception):
    """Redis or the broker refused: the execution was recorded as failed, nothing runs."""


@dataclass(slots=True)
class Launch:
    execution_id: str
    stream: Stream | None  # None when nobody waits for the outcome (onReceived)
    joined: bool = False  # a conversation of the session was unfinished: nothing was started


class Launcher:
    def __init__(self, settings: Settings, keys: Keys, store: ExecutionStore, relay, celery):
        self.settings = settings
        self.keys = keys
        self.store = store
        self._relay = relay  # callables: built lazily, once per process
        self._celery = celery
        self._producer: Any = None  # a kombu Producer, once built
        self._publish_lock = threading.Lock()
        self._runtime: WorkerRuntime | None = None
        self._sender = TaskSender(self._send_task)
        self._own_messages = writes_own_messages(settings)  # else Celery sends them
        self._snapshots = WorkflowSnapshots(store.client, keys, settings.executions_ttl)

    @property
    def relay(self) -> Relay:
        return self._relay()

    def start(
        self,
        raw: dict[str, Any],
        workflow: Workflow,
        trigger: str,
        items: list[dict[str, Any]],
        *,
        mode: str,
        response_mode: str,
        session_id: str | None = None,
        push_ref: str | None = None,
        streaming: bool | None = None,
        route: RouteCheck | None = None,
        subscribe: bool | None = None,
    ) -> Launch:
        """`streaming` defaults to the response mode; a manual run from the editor streams to
        its push channel (`push_ref`) while nobody waits on the HTTP side. `route`: the webhook
        route the api remembered, confirmed by the create (RouteChanged: nothing started).
        `subscribe`: whether the Launch has a stream of the execution's events (by default,
        unless nobody waits for its outcome: onReceived, responseNodes)."""
        record = ExecutionRecord(
            id=secrets.token_hex(8),
            workflow_id=workflow.id,
            workflow_name=workflow.name,
            mode=mode,
            created_at=now_ms(),
            queued_at=now_ms(),
            session_id=session_id,
            response_mode=response_mode,
        )
        stored = self._large(items)
        payload = TaskPayload(
            record=record,
            start_node=trigger,
            items=[] if stored is not None else items,
            items_stored=stored is not None,
            streaming=response_mode == "streaming" if streaming is None else streaming,
            response_mode=response_mode,
            push_ref=push_ref,
            **self._workflow(raw),
        )
        # responseNodes answers at once too: its messages reach the chat WebSocket.
        streams = response_mode not in ("onReceived", "responseNodes")
        streams = streams if subscribe is None else subscribe
        join = response_mode == "responseNodes"  # a session has one conversation at a time
        if self._own_messages:
            return self._record_and_enqueue(record, stored, payload, streams, join, route)
        joined = self.store.create(record, stored, join=join, route=route)
        if joined is not None:
            return Launch(joined, None, joined=True)
        stream = None
        try:
            if streams:
                stream = self._open_stream(self.keys.execution_events(record.id))
            self._enqueue(payload)
        except Exception as err:
            self._not_started(record, stream, err)
        return Launch(record.id, stream)

    def _record_and_enqueue(self, record: ExecutionRecord, stored: bytes | None,
                            payload: TaskPayload, streams: bool, join: bool,
                            route: RouteCheck | None) -> Launch:  # fmt: skip
        """The broker is this Redis: the record and its task in one transaction, which
        happens only once Redis holds the stream's subscription (no event can come before the
        relay hears it). The SUBSCRIBE and the create go out one after the other, without
        waiting in between for the confirmation: a round trip less before the task is queued.
        In the rare case the create runs first, it writes nothing, and runs again confirmed."""
        channel = self.keys.execution_events(record.id) if streams else ""
        stream = None
        try:
            if streams:
                stream = self.relay.open(channel)
        except Exception as err:  # nothing recorded yet
            raise LaunchError(f"the execution could not be started: {error_text(err)}") from err
        queue = self.settings.task_queue
        try:
            task = (queue, redis_message(payload, queue))
            create = partial(self.store.create, record, stored, task=task, join=join,
                             route=route, channel=channel)  # fmt: skip
            try:
                joined = create()
            except NotSubscribed:
                if stream is None:  # only asked with a stream's channel
                    raise
                self.relay.confirm(stream)
                joined = create()
        except RouteChanged:  # nothing was written
            if stream is not None:
                self.relay.unsubscribe(stream)
            raise
        except Exception as err:  # perhaps written after all: failed, its task is dropped
            self._not_started(record, stream, err)
        if joined is not None:
            if stream is not None:
                self.relay.unsubscribe(stream)
            return Launch(joined, None, joined=True)
        return Launch(record.id, stream)

    def _not_started(
        self, record: ExecutionRecord, stream: Stream | None, err: Exception
    ) -> NoReturn:
        # Never leave a `new` record behind: it would hold its session's line until the queue
        # timeout. Failing it also hands the turn to the next message.
        if stream is not None:
            self.relay.unsubscribe(stream)
        self.store.fail_start(record, f"could not start: {error_text(err)}")
        raise LaunchError(f"the execution could not be started: {error_text(err)}") from err

    def _large(self, items: list[dict[str, Any]]) -> bytes | None:
        """Items too large for the task's message, as the JSON stored beside the record
        (core/task.py); None when they travel in the message. Regular mode keeps them: its
        payload never leaves this process."""
        if self.settings.executions_mode == "regular":
            return None
        text = jsontext.dumps_bytes(items)
        jsontext.let_others_run(text)
        return text if len(text) > ITEMS_INLINE_BYTES else None

    def resume(self, record: ExecutionRecord, saved: dict[str, Any],
               reply: dict[str, Any] | None) -> None:  # fmt: skip
        """Enqueue the continuation of a waiting execution, already moved `waiting -> new`
        (core/execution_transitions.py `reply`): whichever worker takes it continues the execution from
        Redis, with the workflow version it started with (what its first task carried)."""
        payload = TaskPayload.resuming(record, saved, reply)
        try:
            self._enqueue(payload)
        except Exception as err:
            self.store.fail_start(record, f"could not resume: {error_text(err)}")
            raise LaunchError(f"the reply could not be delivered: {error_text(err)}") from err

    def _workflow(self, raw: dict[str, Any]) -> dict[str, Any]:
        """The task's workflow: a reference to a stored version in queue mode (the message then
        stays small, core/workflow_snapshots.py); the JSON itself in regular mode, where the
        payload never leaves this process."""
        if self.settings.executions_mode == "regular":
            return {"workflow": raw}
        return {"workflow_ref": self._snapshots.ref(raw)}

    def open_stream(self, channel: str) -> Stream:
        """A confirmed stream of `channel` (an execution's events), as a launch opens one."""
        return self._open_stream(channel)

    def _open_stream(self, channel: str) -> Stream:
        if self.settings.executions_mode == "regular":
            return self.relay.open_local(channel)
        return self.relay.subscribe(channel)

    def warm(self) -> None:
        """Warm start: the relay's subscriber connection and the broker producer,
        opened before the first request instead of inside it; the producer on the sender's
        thread, where Celery and kombu keep their per-thread state for every send."""
        if self.settings.executions_mode == "regular":
            return
        self.relay.warm()
        if not self._own_messages:
            self._sender.call(self._warm_producer)

    def _warm_producer(self) -> None:
        with self._publish_lock:
            app = self._celery()
            if self._producer is None:
                self._producer = app.amqp.Producer(app.connection_for_write())
            producer = self._producer
            # Measured on a first send_task: Celery finds its (disabled) result backend by
            # reading every installed package's entry points, builds a result class and its
            # task sender (importing its event dispatcher), and kombu connects the producer's
            # channel and declares the queue; together most of a first message's extra time.
            _ = app.backend, app.AsyncResult, app.amqp.send_task_message, producer.channel
            producer.maybe_declare(app.amqp.queues[self.settings.task_queue])

    def _enqueue(self, payload: TaskPayload) -> None:
        if self.settings.executions_mode == "regular":
            message = payload.encode()
            threading.Thread(target=self._local_runtime().run, args=(message,), daemon=True).start()
            return
        if self._own_messages:
            queue = self.settings.task_queue
            self.store.client.lpush(queue, redis_message(payload, queue))
            return
        self._sender.send(payload)  # sent by one thread of this process: api/task_sender.py

    def _send_task(self, payload: TaskPayload) -> None:
        # One broker connection per api process, shared by every request: a publish is one
        # LPUSH, so taking turns costs little and the connection count stays constant.
        with self._publish_lock:
            app = self._celery()
            if self._producer is None:
                self._producer = app.amqp.Producer(app.connection_for_write())
            send_execution(app, payload, self._producer)

    def close(self) -> None:
        """Stop the background threads of the regular mode's runtime, if it was built."""
        with self._publish_lock:
            runtime, self._runtime = self._runtime, None
        if runtime is not None:
            runtime.close()

    def _local_runtime(self):
        """Regular mode (EXECUTIONS_MODE=regular): this api process runs executions itself,
        as n8n does without queue mode. Same runtime as a worker, events delivered locally."""
        with self._publish_lock:
            if self._runtime is None:
                from worker.publisher import LocalOutbox
                from worker.runtime import WorkerRuntime

                outbox = LocalOutbox(self.store.client, self.relay.deliver)
                self._runtime = WorkerRuntime(
                    self.settings, self.store.client, outbox=outbox, send_task=self._enqueue
                )
            return self._runtime
