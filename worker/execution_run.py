"""Running one execution on a worker: wait for the session's turn, claim it (`new -> running`),
run the engine with hooks that publish to the execution's channel, record the outcome.

The claim is what makes delivery at most once (core/executions.py): a redelivered or duplicated
task, or one whose execution was stopped or marked crashed meanwhile, finds the record no longer
`new` and is dropped without running anything.

The lease outlives the run: the outcome is recorded at once (what a client that got the end
reads, and the session's turn handed on, as always), then the worker takes the lease again
until the outbox has published the final event. A busy outbox can run seconds behind; while
the lease is held, the api's streams know the end is still coming (api/responses.py) instead
of calling it lost.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import redis

from core.clock import now_ms
from core.executions import ExecutionStore, Status
from core.settings import Settings
from core.workflow_snapshots import WorkflowSnapshots
from engine.executor import run_workflow
from engine.hooks import Hooks
from engine.run_data import Run
from engine.services import Services
from worker.metrics import Claim, WorkerMetrics
from worker.push import PushHooks
from worker.stops import Stops
from worker.waiting import Conversations
from worker.workflow_cache import WorkflowCache

log = logging.getLogger("mini_n8n.worker")

MAX_RUN_DATA_BYTES = 512 * 1024  # run data beyond this keeps node metadata only
# How long a finished execution keeps trying to record its outcome while Redis is unreachable.
RECORD_RETRY_SECONDS = 60.0
# How long a waiting execution blocks for its wake-up before it looks at its session again.
TURN_CHECK_SECONDS = 1.0
# How long a finished execution keeps its lease waiting for the outbox to publish its final
# event: far beyond any lag measured; an outbox stuck longer should not hold the lease forever.
FINAL_PUBLISH_SECONDS = 120.0


class ExecutionRunner:
    def __init__(
        self,
        settings: Settings,
        store: ExecutionStore,
        outbox,
        services: Services,
        stops: Stops,
        *,
        engine: Callable[..., Run] = run_workflow,
        metrics: WorkerMetrics | None = None,
    ):
        self.store = store
        self.keys = store.keys
        self.outbox = outbox
        self.services = services
        self.stops = stops
        self.engine = engine
        self.metrics = metrics or WorkerMetrics()
        self.lease_ms = int(settings.lease_seconds * 1000)
        self.timeout_seconds = settings.execution_timeout_seconds
        self.identity = {"host": socket.gethostname(), "pid": os.getpid()}
        self.workflows = WorkflowCache()
        self.conversations = Conversations(store, outbox)
        self.snapshots = WorkflowSnapshots(store.client, store.keys, settings.executions_ttl)

    def run(self, payload: dict[str, Any]) -> str:
        """Run the payload's execution; its final status, or "dropped" if it was not ours to run."""
        record = payload["record"]
        execution_id = record["id"]
        if not self._wait_for_turn(record):
            return "dropped"
        started = {
            **record,
            "status": Status.RUNNING,
            "startedAt": now_ms(),
            "worker": self.identity,
        }
        cancel = self.stops.add(execution_id)
        try:
            if not self.store.transition(started, {Status.NEW}, lease_ms=self.lease_ms):
                return "dropped"  # stopped, or lost and marked crashed, before it could start
            claim = self.metrics.claimed(started)
            try:
                if self.store.stop_requested(execution_id):
                    cancel.set()
                run = self._execute(payload, started, cancel)
                self._finish(payload, started, run, claim)
            finally:
                claim.close()
            return run.status
        finally:
            self.stops.remove(execution_id)

    def _wait_for_turn(self, record: dict[str, Any]) -> bool:
        """Wait until the execution heads its session's line; False if it stopped being `new`
        meanwhile (stopped, or marked crashed for waiting too long)."""
        queue = self.store.session_queue(record)
        if not queue:
            return True
        while not self.store.my_turn(record["id"], queue):
            current = self.store.get(record["id"])
            if current is None or current["status"] != Status.NEW:
                return False
            self.store.wait_turn(record["id"], timeout=TURN_CHECK_SECONDS)
        return True

    def _execute(self, payload: dict[str, Any], record: dict[str, Any], cancel) -> Run:
        limit = self.timeout_seconds
        timed_out = threading.Event()

        def time_out() -> None:
            timed_out.set()
            cancel.set()

        timer = threading.Timer(limit, time_out)
        timer.daemon = True
        timer.start()
        try:
            run = self.engine(
                self._workflow(payload),
                payload["items"],
                start_node=payload.get("startNode"),
                hooks=self._hooks(payload, record),
                services=self.services,
                execution_id=record["id"],
                mode=record.get("mode", "webhook"),
                streaming=bool(payload.get("streaming")),
                cancel=cancel,
                **self.conversations.engine_kwargs(payload, record),
            )
        except Exception as err:
            # A snapshot that no longer loads, or a bug: the record must still say it failed
            # rather than stay `running` until a reaper calls the worker lost.
            log.exception("execution %s could not run", record["id"])
            run = Run(status=Status.ERROR, error=f"The execution could not run: {err}")
        finally:
            timer.cancel()
        if run.status == "canceled" and timed_out.is_set():
            run.status = "error"
            run.error = f"The execution timed out after {limit:g} s (MINI_N8N_EXECUTION_TIMEOUT)."
        return run

    def _workflow(self, payload: dict[str, Any]):
        if "workflowRef" in payload:  # queue mode: a version stored once (api/launcher.py)
            return self.workflows.get_ref(payload["workflowRef"], self.snapshots.load)
        return self.workflows.get(payload["workflow"])

    def _hooks(self, payload: dict[str, Any], record: dict[str, Any]) -> Hooks:
        channel = self.keys.execution_events(record["id"])
        hooks = Hooks()
        if payload.get("streaming") and payload.get("responseMode") != "onReceived":
            hooks.add_handler("sendChunk", lambda chunk: self.outbox.chunk(channel, chunk))
        hooks.add_handler("sendResponse", lambda resp: self.outbox.response(channel, resp))
        if payload.get("pushRef"):
            PushHooks(self.outbox, self.keys.push(payload["pushRef"]), record).attach(hooks)
        self.conversations.attach(hooks, payload, record)
        return hooks

    def _finish(
        self, payload: dict[str, Any], record: dict[str, Any], run: Run, claim: Claim
    ) -> None:
        """Record the outcome, count it (crashed when a reaper marked the execution lost first,
        or when Redis never took it), publish it, and release the lease once it is published.
        A run that waits for its chat user's reply is not finished: it is saved as `waiting`
        (worker/waiting.py) and publishes nothing."""
        if run.status == Status.WAITING:
            paused = self.conversations.pause(payload, record, run, _bounded_run_data(run.run_data))
            claim.ended(Status.WAITING if paused else Status.CRASHED)
            return
        self.conversations.ended(payload, record)
        final = {
            **record,
            "status": run.status,
            "stoppedAt": now_ms(),
            "error": run.error,
            "errorNode": run.error_node,
            "lastNodeExecuted": run.last_node,
            **_bounded_run_data(run.run_data),
        }
        recorded = self._record_outcome(final)
        claim.ended(run.status if recorded else Status.CRASHED)
        result = {
            "status": run.status,
            "error": run.error,
            "errorNode": run.error_node,
            "output": run.first_json(),
            "streamed": run.streamed,
        }
        held = recorded and self._hold_lease(record["id"])
        published = self.outbox.done(self.keys.execution_events(record["id"]), result)
        if payload.get("pushRef"):
            finished = {"executionId": record["id"], "status": run.status, "error": run.error}
            self.outbox.event(self.keys.push(payload["pushRef"]), "executionFinished", finished)
        if held:
            self._release(record["id"], published)

    def _hold_lease(self, execution_id: str) -> bool:
        """Take the lease again while the final event waits in the outbox (the lease thread
        renews it, since the execution still runs here until `run` returns)."""
        try:
            self.store.hold_lease(execution_id, self.lease_ms)
            return True
        except redis.RedisError as err:  # the stream then waits a grace period, as before
            log.warning("execution %s: lease not held for the final event: %s", execution_id, err)
            return False

    def _release(self, execution_id: str, published: threading.Event) -> None:
        """Drop the lease once the final event is out (or the outbox gave up on it). Should
        Redis refuse, the lease runs out by itself (no one renews it once the run returns) and
        a reaper clears it."""
        if not published.wait(FINAL_PUBLISH_SECONDS):
            log.warning("execution %s: its final event is not published yet", execution_id)
        try:
            self.store.drop_lease(execution_id)
        except redis.RedisError as err:
            log.warning("execution %s: lease not released, Redis: %s", execution_id, err)

    def _record_outcome(self, final: dict[str, Any]) -> bool:
        """Write the finished record. While Redis is unreachable, keep trying for a while: a
        reaper that saw the lease run out meanwhile has marked the execution crashed ("worker
        lost"), and this worker, which did not get lost, then replaces that with what happened."""
        allowed = {Status.RUNNING}
        delay, deadline = 0.25, time.monotonic() + RECORD_RETRY_SECONDS
        while True:
            try:
                if not self.store.transition(final, allowed):
                    log.warning("execution %s was marked lost before it finished", final["id"])
                    return False
                return True
            except redis.RedisError as err:
                if time.monotonic() + delay > deadline:
                    log.error("execution %s: outcome not recorded, Redis: %s", final["id"], err)
                    return False
                log.warning("execution %s: Redis unreachable, retrying: %s", final["id"], err)
                allowed = {Status.RUNNING, Status.CRASHED}
                time.sleep(delay)
                delay = min(delay * 2, 5.0)


def _bounded_run_data(run_data: dict[str, Any]) -> dict[str, Any]:
    text = json.dumps(run_data, default=str)
    if len(text) <= MAX_RUN_DATA_BYTES:
        return {"runData": run_data}
    slim = {
        name: [
            {k: v for k, v in task.items() if k not in ("data", "inputOverride")} for task in tasks
        ]
        for name, tasks in run_data.items()
    }
    return {"runData": slim, "runDataTruncated": True}
