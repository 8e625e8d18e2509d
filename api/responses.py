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
from api.http_response import Last
from api.launcher import Launch
from api.liveness import LivenessChecks
from api.relay import Stream
from core import chunks, replay
from core.answers import output_text
from core.events import Event, Kind
from core.execution_record import ExecutionRecord, Status
from core.executions import ExecutionStore
from core.public_errors import public_error
from core.results import FinalResult
from core.stops import request_stop
from engine.nodes.wait import SHORT_WAIT_MS

log = logging.getLogger("mini_n8n.api")

NDJSON = "application/x-ndjson; charset=utf-8"
# Set in the app's config where the server reads no environ once the app returned (gunicorn as
# api/gunicorn_conf.py runs it): an open stream may then let go of its own (see _Body).
RELEASE_ENVIRON = "MINI_N8N_RELEASE_ENVIRON"
# Once the record says the execution finished, its final event was published in the same step
# (core/executions.py): it is on its way through this process's relay, or was lost with the
# relay's connection. How long its delivery may take before the record's word is taken instead.
DELIVERY_SECONDS = 1.0


class Outcome:
    """Reads one execution's events until it ends, checking on it when it is quiet.

    A method called once per event rather than a generator: every open stream waits inside
    it, and each generator between the server and that wait is one more C stack frame the
    stream's greenlet keeps a copy of (docs/performance.md)."""

    __slots__ = ("launch", "stream", "store", "relay", "settings", "checks",
                 "_unreachable_since", "_finished", "_delivery_until", "_caught_up")  # fmt: skip

    def __init__(self, launch: Launch, store: ExecutionStore, relay, settings, checks):
        assert launch.stream is not None, "an onReceived launch has no outcome to wait for"
        self.launch = launch
        self.stream: Stream = launch.stream
        self.store = store
        self.relay = relay
        self.settings = settings
        self.checks: LivenessChecks = checks  # api/liveness.py: this process's checks, batched
        self._unreachable_since: float | None = None
        self._finished: ExecutionRecord | None = None  # the record, once it showed the end
        self._delivery_until = 0.0
        self._caught_up: list[Event] = []  # events read back from what was kept, to hand out

    def next_event(self) -> Event | None:
        """The next event; None means a quiet interval passed and the execution is still
        alive. The last is a `done` event, real or, when it never came (the execution was lost,
        or the relay lost it), made from the record; call `close` after it (or to give up)."""
        if self._caught_up:
            return self._caught_up.pop(0)
        if self._finished is not None:
            return self._delivered(self._finished)
        event = self._checked(self.stream.get(timeout=self.settings.keepalive_seconds))
        if event is not None:
            return event
        if self._caught_up:
            return self._caught_up.pop(0)
        if self._finished is not None:  # seen on subscribing again
            return self._delivered(self._finished)
        try:
            record = self.checks.check(self.launch.execution_id)
        except redis.RedisError as err:
            return self._unreachable(err)
        self._unreachable_since = None
        if record is None:
            return _done(FinalResult(Status.CRASHED, "The execution record is gone.", public=True))
        if not record.finished:
            if answered_at_wait(record):  # as n8n: the stream ends, lastNode has the wait's data
                return _done(FinalResult.from_record(record, self.stream.next_seq))
            return None
        self._finished = record
        self._delivery_until = time.monotonic() + DELIVERY_SECONDS
        if record.events is not None:  # what was published before its final event
            self._catch_up(until=record.events - 1)
        if self._caught_up:
            return self._caught_up.pop(0)
        return self._delivered(record)

    def queued_event(self) -> Event | None:
        """The next event if it is here already (None without waiting): what came together is
        written together."""
        if self._caught_up:
            return self._caught_up.pop(0)
        if self._finished is not None:
            return None
        return self._checked(self.stream.ready())

    def _checked(self, event: Event | None) -> Event | None:
        """A channel's failure as the stream's end; missed events caught up on (then handed
        out first: None if there were none)."""
        if event is None:
            return None
        if event.kind == Kind.BROKEN:
            return _done(FinalResult(Status.ERROR, event.reason, public=True))
        if event.kind != Kind.MISSED:
            return event
        early: Event | None = event.body
        self._catch_up(until=None if early is None else early.seq)
        if early is None:
            self._look_on_rejoining()
            return None
        if self.stream.next_seq != early.seq:
            lost = "Events of this execution were lost on the way."
            return _done(FinalResult(Status.ERROR, lost, public=True))
        self.stream.next_seq += 1
        self._caught_up.append(early)
        return self._caught_up.pop(0)

    def _look_on_rejoining(self) -> None:
        """Subscribed again: the final event may have been published while it was not, and
        would then never come. The record is asked now, not after a quiet interval: a relay
        that took over a finished execution (api/hub/follow.py) ends it at once. Everything
        published before the final event was kept, so the catch-up just done holds it all."""
        try:
            record = self.checks.check(self.launch.execution_id)
        except redis.RedisError:
            return  # the next quiet interval asks again
        if record is not None and record.finished:
            self._finished = record
            self._delivery_until = time.monotonic() + DELIVERY_SECONDS

    def _catch_up(self, until: int | None) -> None:
        """The events from the stream's next number (up to `until`) that the worker kept
        (core/replay.py), queued to hand out first."""
        try:
            kept = replay.kept(self.store.client, self.store.keys, self.launch.execution_id)
        except redis.RedisError as err:
            log.warning("execution %s: kept events unreadable: %s", self.launch.execution_id, err)
            return
        found = replay.missed(kept, self.stream.next_seq, until)
        self.stream.next_seq += len(found)
        self._caught_up += found

    def close(self) -> None:
        self.relay.unsubscribe(self.stream)

    def _delivered(self, record: ExecutionRecord) -> Event:
        """The events still on their way once the record showed the end, then the end."""
        wait = self._delivery_until - time.monotonic()
        event = self.stream.get(timeout=wait) if wait > 0 else None
        if event is not None and event.kind != Kind.BROKEN:
            return event
        return _done(FinalResult.from_record(record, self.stream.next_seq))

    def _unreachable(self, err: redis.RedisError) -> Event | None:
        """Redis does not answer: the execution may well go on meanwhile, and its events come
        once Redis is back. Past `redis_outage_seconds`, the stream ends saying so."""
        log.warning("execution %s: Redis unreachable: %s", self.launch.execution_id, err)
        self._unreachable_since = self._unreachable_since or time.monotonic()
        waited = time.monotonic() - self._unreachable_since
        if waited < self.settings.redis_outage_seconds:
            return None
        error = f"Redis was unreachable for {waited:.0f} s; the outcome is unknown."
        return _done(FinalResult(Status.ERROR, error, public=True))


def answered_at_wait(record: ExecutionRecord) -> bool:
    """Whether a request that waits for the execution's outcome is answered now that it waits,
    as n8n answers it when the wait goes to its database: a Wait node's wait for a call of its
    resume URL, or for SHORT_WAIT_MS or more. A shorter wait n8n keeps in its process, and its
    request gets the answer after it: so does ours, though the wait holds no worker here."""
    if record.status != Status.WAITING or record.wait_for in (None, "reply"):
        return False
    if record.wait_for != "time" or record.wait_till is None:
        return True
    return record.wait_till - (record.waiting_since or 0) >= SHORT_WAIT_MS


def _done(result: FinalResult) -> Event:
    """A final event made here (not published): it carries the result itself."""
    return Event(Kind.DONE, result)


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
    # request in it (headers, parsed body): nothing of it is read from here on.
    request.environ.pop("werkzeug.request", None)
    return _NdjsonResponse(body, status=200, mimetype=None, content_type=NDJSON, headers=headers)


class _NdjsonResponse(Response):
    """A streamed answer whose body generator the server iterates itself: werkzeug's own app
    iterator puts two more levels in between (an encoder and a closing iterator), each one
    more C stack frame that every open stream's greenlet keeps a copy of."""

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
        # the whole stream (docs/performance.md). PEP 3333 lets the application
        # change the environ as it likes; it is emptied only where the server reads it no more.
        if self._environ is not None:
            self._environ.clear()
        self._response.headers.clear()
        return iter(self._response.response)

    def close(self) -> None:
        self._response.close()


def _ndjson(outcome: Outcome, arrived: float, stop_on_disconnect: bool = False) -> Iterator[bytes]:
    """The stream's lines, each as soon as it comes; lines that came together (the answer's items
    and its end, under load) in one write: one system call and one HTTP chunk, not one each."""
    meter = metrics.StreamMeter(arrived)
    lines = _Lines(outcome.launch.execution_id)
    try:
        while not lines.finished:
            event: Event | None = outcome.next_event()
            texts = [(lines.text(event), event is None)]
            while event is not None and not lines.finished:
                event = outcome.queued_event()
                if event is not None:
                    texts.append((lines.text(event), False))
            if any(text for text, _ in texts):
                piece = "".join(text for text, _ in texts).encode()
                # The end's line goes out with the HTTP body's end (api/http_response.py).
                yield Last(piece) if lines.finished else piece
                for text, keepalive in texts:
                    if text:
                        meter.sent(text, keepalive)
    finally:
        meter.close()
        outcome.close()  # the client may be gone: unsubscribe now, not when collected
        if stop_on_disconnect and not lines.finished:
            # Closed before the end: the client went away (a write failed).
            request_stop(outcome.store, outcome.launch.execution_id)


class _Lines:
    """What a stream writes for each event, and what it has seen so far."""

    __slots__ = ("execution_id", "saw_error", "saw_items", "finished")

    def __init__(self, execution_id: str):
        self.execution_id = execution_id
        self.saw_error = self.saw_items = self.finished = False

    def text(self, event: Event | None) -> str:
        """None is a quiet interval: a keepalive line."""
        if event is None:
            return chunks.KEEPALIVE
        if event.kind == Kind.LINES:
            self.saw_error = self.saw_error or event.errors > 0
            self.saw_items = self.saw_items or event.items > 0
            return event.body
        if event.kind == Kind.DONE:
            self.finished = True
            return _closing_lines(_result(event), self.saw_error, self.saw_items, self.execution_id)
        return ""


def _result(event: Event) -> FinalResult:
    if isinstance(event.body, FinalResult):
        return event.body
    return FinalResult.from_json(event.body)


def _closing_lines(result: FinalResult, saw_error: bool, saw_items: bool, execution_id: str) -> str:
    if result.ok and result.read_from_record and saw_items and not result.complete:
        # Part of the answer went out but the rest was lost: say so rather than repeat it.
        result = FinalResult(
            Status.ERROR, "The end of this answer was lost on its way.", public=True
        )
    if result.status == Status.WAITING:
        return ""  # it waits long: the stream ends with what went out, as n8n's does
    if result.ok:
        if result.streamed or (result.read_from_record and saw_items):
            return ""
        # Nothing streamed (no Agent, or streaming off): the output as one begin/item/end.
        return chunks.whole_answer(output_text(result.output))
    if saw_error:
        return ""
    return chunks.error_line(_public(result, execution_id), execution_id)


def _public(result: FinalResult, execution_id: str) -> str:
    """What the client, nobody signed in, is told of a failure (core/public_errors.py); the
    record keeps the full text for the editor."""
    ours = result.public or result.expired
    return public_error(result.status, result.error, execution_id, ours=ours)


# --- waiting modes ----------------------------------------------------------------------------
def last_node_response(outcome: Outcome, headers: dict[str, str]) -> Response:
    event = _wait(outcome, want_response=False)
    done = _result(event)
    headers = {**headers, "X-Execution-Id": outcome.launch.execution_id}
    if not done.ok and done.status != Status.WAITING:  # waiting: its last node's data, as n8n
        body = {"message": "Error in workflow", "error": _public(done, outcome.launch.execution_id)}
        return _json(body, 500, headers)
    output = done.output
    if output is None:
        output = {
            "message": "Workflow executed successfully but the last node did not return any data"
        }
    return _json(output, 200, headers)


def response_node_response(outcome: Outcome, headers: dict[str, str]) -> Response:
    event = _wait(outcome, want_response=True)
    headers = {**headers, "X-Execution-Id": outcome.launch.execution_id}
    if event.kind == Kind.RESPONSE:
        answer = event.body
        merged = {**headers, **(answer.get("headers") or {})}
        return Response(
            answer.get("body", ""), status=int(answer.get("status", 200)), headers=merged
        )
    done = _result(event)
    if not done.ok:
        body = {"message": "Error in workflow", "error": _public(done, outcome.launch.execution_id)}
        return _json(body, 500, headers)
    return _json(
        {"message": "Workflow executed successfully but no Respond to Webhook node ran"},
        200,
        headers,
    )


def _wait(outcome: Outcome, want_response: bool) -> Event:
    """The execution's Respond to Webhook answer (`want_response`) or its final event."""
    try:
        while True:
            event = outcome.next_event()
            if event is None:
                continue
            if (
                want_response
                and event.kind == Kind.DONE
                and _result(event).status == Status.WAITING
            ):
                continue  # a Respond to Webhook node after the wait still answers
            if (want_response and event.kind == Kind.RESPONSE) or event.kind == Kind.DONE:
                return event
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
