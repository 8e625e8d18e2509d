"""Answering a webhook in each response mode (DESIGN section 4).

`streaming` relays the execution's chunks as NDJSON, one flushed line each; `lastNode` and
`responseNode` wait for the outcome. Every wait is bounded: when the channel is quiet, a
keepalive line goes out (streaming) and the execution record is checked, so a lost worker or a
queue timeout ends the response with an error instead of a hung request.

A streaming client that goes away does not stop its execution: the answer is still produced and
saved to memory (Dify and LibreChat behave so). A workflow with our own setting
`"settings": {"stopOnClientDisconnect": true}` is stopped instead (Langflow's choice). Under
gevent a gone client is noticed on the next write (an item or a keepalive line), so the stop
follows within about one token or one keepalive interval.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import redis
from flask import Response, current_app, jsonify, request

from api import metrics
from api.launcher import Launch
from api.relay import Stream
from core import events
from core.answers import output_text
from core.events import Event, Kind
from core.executions import FINISHED, ExecutionStore, Status
from core.jsontext import dumps
from engine.run_data import Run

log = logging.getLogger("mini_n8n.api")

NDJSON = "application/x-ndjson; charset=utf-8"
KEEPALIVE = '{"type":"keepalive"}\n'
# Set in the app's config where the server reads no environ once the app returned (gunicorn as
# api/gunicorn_conf.py runs it): an open stream may then let go of its own (see _Body).
RELEASE_ENVIRON = "MINI_N8N_RELEASE_ENVIRON"
# How long to wait for an execution's last events once its record says it ended and no worker
# holds its lease any more. A worker writes the record just before it hands the last events to
# its outbox and keeps the lease until they are published (with thousands of executions on one
# busy worker its outbox was measured running seconds behind: a fixed 2 s grace declared 141 of
# 5,000 complete answers' ends lost, issue 14), so past the lease they are already on their way.
FINAL_GRACE_SECONDS = 10.0


class Outcome:
    """Reads one execution's events until it ends, checking on the worker when it is quiet.

    A method called once per event rather than a generator: every open stream waits inside
    it, and each generator between the server and that wait is one more C stack frame the
    stream's greenlet keeps a copy of (about 0.6 KB each; issue 14)."""

    __slots__ = ("launch", "stream", "store", "relay", "settings", "checks",
                 "_unreachable_since", "_ended", "_owed")  # fmt: skip

    def __init__(self, launch: Launch, store: ExecutionStore, relay, settings, checks=None):
        assert launch.stream is not None, "an onReceived launch has no outcome to wait for"
        self.launch = launch
        self.stream: Stream = launch.stream
        self.store = store
        self.relay = relay
        self.settings = settings
        self.checks = checks  # api/liveness.py: this process's checks, batched
        self._unreachable_since: float | None = None
        self._ended: Event | None = None  # what the record said once it showed the end
        self._owed = True  # a worker may still hold the final event (see _await_done)

    def next_event(self) -> Event | None:
        """The next event; None means a quiet interval passed and the execution is still
        alive. The last is a `done` event, real or, when the execution was lost, synthesized;
        call `close` after it (or to give up)."""
        if self._ended is not None:
            return self._await_done(self._ended)
        event = self.stream.get(timeout=self.settings.keepalive_seconds)
        if event is None:
            ended = self._check_reachable()
            if ended is None:
                return None
            self._ended = ended
            return self._await_done(ended)
        if event.kind == Kind.BROKEN:
            return events.done({"status": Status.ERROR, "error": event.reason})
        return event

    def close(self) -> None:
        self.relay.unsubscribe(self.stream)

    def _await_done(self, ended: Event) -> Event | None:
        """The record says the execution ended; its last events are normally a few milliseconds
        behind. While its worker holds the lease they are still in that worker's outbox: wait,
        with keepalives. Once it does not (released after publishing, or run out with a lost
        worker), wait FINAL_GRACE_SECONDS for what is on its way, then fall back to what the
        record says."""
        if ended.body.get("status") == Status.CRASHED:
            return ended
        while True:
            wait = self.settings.keepalive_seconds if self._owed else FINAL_GRACE_SECONDS
            event = self.stream.get(timeout=wait)
            if event is None:
                if not self._owed:
                    return ended
                self._owed = self._final_event_owed()
                if self._owed:
                    return None
            elif event.kind == Kind.BROKEN:
                return ended
            else:
                return event

    def _final_event_owed(self) -> bool:
        """Whether the finished execution's worker still holds its lease (worker/execution_run.py
        keeps it until the final event is published). Unknown counts as no: the record already
        says how the execution ended."""
        if self.checks is None:
            return False
        try:
            return self.checks.leased(self.launch.execution_id)
        except redis.RedisError:
            return False

    def _check_reachable(self) -> Event | None:
        """`_check`, tolerating Redis being unreachable for up to a lease: the execution may
        well go on meanwhile. Past that, the stream ends with an error that says so."""
        try:
            ended = self._check()
        except redis.RedisError as err:
            self._unreachable_since = self._unreachable_since or time.monotonic()
            waited = time.monotonic() - self._unreachable_since
            log.warning("execution %s: Redis unreachable: %s", self.launch.execution_id, err)
            if waited < self.settings.lease_seconds:
                return None
            error = f"Redis was unreachable for {waited:.0f} s; the outcome is unknown."
            return events.done({"status": Status.ERROR, "error": error})
        self._unreachable_since = None
        return ended

    def _check(self) -> Event | None:
        if self.checks is not None:
            record = self.checks.check(self.launch.execution_id)
        else:
            record = self.store.mark_crashed_if_lost(
                self.launch.execution_id, self.settings.queue_timeout_seconds
            )
        if record is None:
            return events.done({"status": Status.CRASHED, "error": "The execution record is gone."})
        if record["status"] in FINISHED:
            return events.done(_result_from_record(record))
        return None


def _result_from_record(record: dict[str, Any]) -> dict[str, Any]:
    run = Run(
        status=record["status"],
        run_data=record.get("runData") or {},
        last_node=record.get("lastNodeExecuted"),
    )
    return {
        "status": record["status"],
        "error": record.get("error"),
        "output": run.first_json(),
        "fromRecord": True,  # the real final event never came
    }


# --- streaming --------------------------------------------------------------------------------
def stop_on_client_disconnect(workflow: dict[str, Any]) -> bool:
    """Our own workflow setting (n8n has none): stop the execution when its streaming client
    goes away before the end. Off by default: the answer is still saved."""
    return (workflow.get("settings") or {}).get("stopOnClientDisconnect") is True


def streaming_response(
    outcome: Outcome, headers: dict[str, str], stop_on_disconnect: bool = False
) -> Response:
    headers = {
        **headers,
        "Cache-Control": "no-cache",
        "X-Accel-Buffering": "no",
        "X-Execution-Id": outcome.launch.execution_id,
    }
    body = _ndjson(outcome, metrics.arrival(), stop_on_disconnect)
    # The server keeps the WSGI environ while the answer streams, and werkzeug filed the
    # request in it (headers, parsed body): nothing of it is read from here on (issue 14).
    request.environ.pop("werkzeug.request", None)
    return _NdjsonResponse(body, status=200, mimetype=None, content_type=NDJSON, headers=headers)


class _NdjsonResponse(Response):
    """A streamed answer whose body generator the server iterates itself: werkzeug's own app
    iterator puts two more levels in between (an encoder and a closing iterator), each one
    more C stack frame that every open stream's greenlet keeps a copy of (issue 14)."""

    def get_app_iter(self, environ):
        if environ["REQUEST_METHOD"] == "HEAD":
            return super().get_app_iter(environ)
        release = current_app.config.get(RELEASE_ENVIRON, False)  # called in the app's context
        return _Body(self, environ if release else None)


class _Body:
    """What the server iterates (the body generator, which yields bytes) and closes (the
    response: the generator's cleanup, then its call_on_close callbacks, the access log)."""

    __slots__ = ("_response", "_environ")

    def __init__(self, response: Response, environ: dict | None):
        self._response = response
        self._environ = environ

    def __iter__(self):
        # The server iterates once it sent the status and headers: from here on only the body
        # generator is read. The request's environ and the response's headers would stay for
        # the whole stream (1.3 KiB per open stream at 10,000). PEP 3333 lets the application
        # change the environ as it likes; it is emptied only where the server reads it no more.
        if self._environ is not None:
            self._environ.clear()
        self._response.headers.clear()
        return iter(self._response.response)

    def close(self) -> None:
        self._response.close()


def _ndjson(outcome: Outcome, arrived: float, stop_on_disconnect: bool = False) -> Iterator[bytes]:
    meter = metrics.StreamMeter(arrived)
    saw_error = saw_items = finished = False
    try:
        while not finished:
            event = outcome.next_event()
            if event is None:
                text = KEEPALIVE
            elif event.kind == Kind.LINES:
                saw_error = saw_error or event.errors > 0
                saw_items = saw_items or event.items > 0
                text = event.body
            elif event.kind == Kind.DONE:
                finished = True
                execution_id = outcome.launch.execution_id
                text = "".join(_closing_lines(event.body, saw_error, saw_items, execution_id))
            else:
                continue
            if text:
                yield text.encode()
                meter.sent(text, keepalive=event is None)
    finally:
        meter.close()
        outcome.close()  # the client may be gone: unsubscribe now, not when collected
        if stop_on_disconnect and not finished:
            # Closed before the end: the client went away (a write failed).
            outcome.store.request_stop(outcome.launch.execution_id)


def _closing_lines(
    done: dict[str, Any], saw_error: bool, saw_items: bool, execution_id: str
) -> Iterator[str]:
    status = done.get("status")
    if status == Status.SUCCESS and done.get("fromRecord") and saw_items:
        # Part of the answer went out but its end was lost: say so rather than repeat it.
        status, done = Status.ERROR, {"error": "The end of this answer was lost on its way."}
    if status == Status.SUCCESS:
        if not done.get("streamed"):
            # Nothing streamed (no Agent, or streaming off): the output as one begin/item/end.
            meta = {"nodeName": None, "itemIndex": 0, "runIndex": 0}
            yield _line({"type": "begin", "metadata": meta})
            yield _line(
                {"type": "item", "content": output_text(done.get("output")), "metadata": meta}
            )
            yield _line({"type": "end", "metadata": meta})
        return
    if not saw_error:
        message = done.get("error") or _default_error(status)
        yield _line(
            {"type": "error", "content": message, "metadata": {"executionId": execution_id}}
        )


def _default_error(status: str | None) -> str:
    if status == Status.CANCELED:
        return "The execution was stopped."
    return "The execution failed."


def _line(chunk: dict[str, Any]) -> str:
    return dumps(chunk) + "\n"


# --- waiting modes ----------------------------------------------------------------------------
def last_node_response(outcome: Outcome, headers: dict[str, str]) -> Response:
    done = _wait(outcome, want_response=False)
    headers = {**headers, "X-Execution-Id": outcome.launch.execution_id}
    if done.get("status") != Status.SUCCESS:
        body = {"message": "Error in workflow", "error": done.get("error") or "unknown error"}
        return _json(body, 500, headers)
    output = done.get("output")
    if output is None:
        output = {
            "message": "Workflow executed successfully but the last node did not return any data"
        }
    return _json(output, 200, headers)


def response_node_response(outcome: Outcome, headers: dict[str, str]) -> Response:
    event = _wait(outcome, want_response=True)
    headers = {**headers, "X-Execution-Id": outcome.launch.execution_id}
    if "body" in event:
        merged = {**headers, **(event.get("headers") or {})}
        return Response(event.get("body", ""), status=int(event.get("status", 200)), headers=merged)
    if event.get("status") != Status.SUCCESS:
        body = {"message": "Error in workflow", "error": event.get("error") or "unknown error"}
        return _json(body, 500, headers)
    return _json(
        {"message": "Workflow executed successfully but no Respond to Webhook node ran"},
        200,
        headers,
    )


def _wait(outcome: Outcome, want_response: bool) -> dict[str, Any]:
    try:
        while True:
            event = outcome.next_event()
            if event is None:
                continue
            if want_response and event.kind == Kind.RESPONSE:
                return event.body
            if event.kind == Kind.DONE:
                return event.body
    finally:
        outcome.close()


def _json(body: Any, status: int, headers: dict[str, str]) -> Response:
    response = jsonify(body)
    response.status_code = status
    response.headers.update(headers)
    return response


def started_response(execution_id: str, headers: dict[str, str]) -> Response:
    body = {"message": "Workflow was started", "executionId": execution_id}
    return _json(body, 200, {**headers, "X-Execution-Id": execution_id})
