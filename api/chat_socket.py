"""n8n's chat WebSocket, `GET /chat?sessionId=…&executionId=…&isPublic=true`, on every api
process (n8n serves it from its main process only, polling its database every 3 s).

Server frames are what `@n8n/chat` expects: each Chat-node message as a text frame (its text as
is; an approval's buttons with their links made absolute, api/waiting_webhook.py),
`n8n|continue` after a message that waits for no reply and, as n8n does, before the next message
when a wait ended some other way than by a reply on this socket (a button click, an expired
limit), `n8n|heartbeat` when quiet (answered `n8n|heartbeat-ack`), and
`{"type":"error","message":…}` (the widget shows `message`) when something cannot be done. A
client that leaves heartbeats unanswered for MINI_N8N_CHAT_HEARTBEAT_TIMEOUT (60 s, n8n's) is
closed (n8n also cancels the execution; here it waits on, for a new socket or a POST). The
client's reply is `{"sessionId","action":"sendMessage","chatInput","files"}`; it resumes the
waiting execution on any worker (api/conversation.py).

Messages come the way streamed tokens do: the relay's shared subscription, confirmed by Redis
before anything else happens. Then the messages not yet delivered are read from the execution's
list (core/waiting.py) and written, then live events follow; a message's index in the list says
whether it was written already. So none is missed or written twice, even when the client
reconnects to another api process (after a restart, say) in the middle of a conversation. The
socket closes when the execution ends; an error or an expired wait first gets an error frame.

Served by flask-sock (simple-websocket), which takes over the connection under gunicorn's gevent
worker: its reader runs in a greenlet, so one api process holds many sockets.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from typing import Any

from flask import Flask, request
from flask_sock import Sock
from simple_websocket import ConnectionClosed

from api.conversation import ReplyRefused, check_execution, deliver_reply, not_waiting
from api.cors import origin_allowed
from api.relay import RelayError, Stream
from api.runtime import runtime
from api.waiting_webhook import absolute_links
from core.events import Event, Kind
from core.execution_record import ExecutionRecord, Status
from core.jsontext import dumps
from core.results import FinalResult
from core.waiting import WaitingStore
from core.workflow_store import WorkflowNotFound
from engine.nodes.chat_trigger import ChatTrigger, chat_settings

log = logging.getLogger("mini_n8n.api")

HEARTBEAT = "n8n|heartbeat"
HEARTBEAT_ACKS = ("n8n|heartbeat-ack", '{"type":"heartbeat-ack"}')
CONTINUE = "n8n|continue"
CLIENT_GONE = "the chat client went away"
ALREADY_OPEN = "This conversation was opened in another window."
HANDOVER_SECONDS = 5.0
# How long a socket waits to hear where its conversation goes on (core/events.py `next`).
FOLLOW_SECONDS = 10.0
# Once the record says the execution ended, how long its final event may take to arrive.
DELIVERY_SECONDS = 1.0
# 1012, "service restart": the client may reconnect (to this api once it is back, or another).
CLOSE_RESTART = 1012
CLOSE_NORMAL = 1000
# 1001, "going away": the client stopped answering heartbeats.
CLOSE_SILENT = 1001

_open: set[ChatConnection] = set()
_open_lock = threading.Lock()


def register(app: Flask, max_message_bytes: int) -> None:
    # A reply carries its files as data URLs: as large as a request body may be.
    app.config.setdefault("SOCK_SERVER_OPTIONS", {"max_message_size": max_message_bytes})
    Sock(app).route("/chat")(chat_socket)


def chat_socket(ws) -> None:
    args = request.args
    # Button links are written on the origin the client reached us by, with the page's scheme
    # ("//host/..."): behind a TLS proxy this process sees http while the page is https.
    connection = ChatConnection(
        runtime(), ws, args.get("sessionId", ""), args.get("executionId", ""), f"//{request.host}"
    )
    connection.serve()


def end_all(reason: str) -> None:
    """Close every chat socket of this process (the api is shutting down), so they do not hold
    the shutdown for the graceful timeout. A conversation loses nothing: the client reconnects
    and gets what it has not been written yet (see the module docstring)."""
    with _open_lock:
        connections = list(_open)
    for connection in connections:
        connection.close(reason)


def error_frame(message: str) -> str:
    return dumps({"type": "error", "message": message})


class ChatConnection:
    def __init__(self, rt, ws, session_id: str, execution_id: str, base_url: str = ""):
        self.rt = rt
        self.ws = ws
        self.session_id = session_id
        self.execution_id = execution_id
        self.base_url = base_url
        self.waits = WaitingStore(rt.executions)
        self.next_n = 0  # index of the next message this client has not been written
        # The last message written waits for a reply that has not come over this socket.
        self.awaiting = False
        # When the oldest heartbeat still unanswered went out (monotonic); None: all answered.
        self.unacked_since: float | None = None
        self.closed = threading.Event()
        self.released = threading.Event()  # its subscription is given up
        self._send_lock = threading.Lock()
        self._stream: Stream | None = None

    def serve(self) -> None:
        try:
            record = check_execution(self._record(), self.session_id)
            self._check_origin(record)
        except ReplyRefused as err:
            self.send(error_frame(str(err)))
            return
        try:
            stream = self._subscribe()
        except RelayError as err:
            self.send(error_frame(f"The chat is unavailable: {err}"))
            return
        self._stream = stream
        record = self._record() or record  # as it stands now that nothing can be missed
        with _open_lock:
            _open.add(self)
        try:
            self.next_n = self.waits.delivered(self.execution_id)
            written = self._write_pending()
            if record.finished:
                # Late, it still gets what was sent; with nothing left, it is told it is over.
                if written:
                    self._end(record)
                else:
                    self.send(error_frame(not_waiting(record)))
                return
            threading.Thread(target=self._read, daemon=True).start()
            self._relay()
        finally:
            with _open_lock:
                _open.discard(self)
            self.closed.set()
            self.rt.relay().unsubscribe(self._stream)
            self.released.set()

    def _subscribe(self) -> Stream:
        """The execution's events, confirmed. One subscription per channel and api process: a
        socket already open here for this execution (the widget reconnects after each message
        it POSTs, or another tab) hands over to this one, the newest."""
        channel = self.rt.keys.execution_events(self.execution_id)
        try:
            return self.rt.relay().subscribe(channel, ordered=False)
        except RelayError as err:
            if "already" not in str(err):
                raise
        with _open_lock:
            older = [c for c in _open if c.execution_id == self.execution_id]
        for connection in older:
            connection.close(ALREADY_OPEN, CLOSE_NORMAL)
            connection.released.wait(HANDOVER_SECONDS)
        return self.rt.relay().subscribe(channel, ordered=False)

    def close(self, reason: str, code: int = CLOSE_RESTART) -> None:
        with self._send_lock:
            self.closed.set()
            with contextlib.suppress(Exception):  # already closed
                self.ws.close(reason=code, message=reason[:100])
        if self._stream is not None:
            self._stream.fail(reason)

    def _check_origin(self, record: ExecutionRecord) -> None:
        """Browsers apply no CORS to WebSockets: the Chat Trigger's allowedOrigins are checked
        here, as for its POST (api/cors.py; the api's own origin, the hosted page, always)."""
        origin = request.headers.get("Origin")
        if origin is None:
            return
        try:
            _, workflow = self.rt.workflows.load(record.workflow_id)
        except WorkflowNotFound:
            raise ReplyRefused("The workflow of this execution is gone.") from None
        allowed = [
            o
            for n in workflow.nodes.values()
            if n.type == ChatTrigger.type
            for o in chat_settings(n).allowed_origins
        ]
        if not origin_allowed(origin, allowed, request):
            raise ReplyRefused(f"Origin {origin} is not allowed")

    def _record(self) -> ExecutionRecord | None:
        if not self.execution_id or len(self.execution_id) > 64:
            return None
        return self.rt.executions.get(self.execution_id)

    # --- server to client -----------------------------------------------------------------
    def _relay(self) -> None:
        quiet = self.rt.settings.keepalive_seconds
        while not self.closed.is_set():
            if self._silent():
                timeout = self.rt.settings.chat_heartbeat_timeout_seconds
                self.close(f"no heartbeat acknowledgement for {timeout:g} s", CLOSE_SILENT)
                return
            event = self._current().get(timeout=quiet)
            if event is None:
                self._heartbeat()
                # As the relay does for streams: a lost worker or a reply no worker took in
                # time ends the execution (crashed) and, so, this socket.
                record = self.rt.liveness.check(self.execution_id)
                if record is not None and not record.finished:
                    continue
                # It ended: its final event went out with its record (core/executions.py) and
                # is on its way here, unless the relay lost it.
                event = self._current().get(timeout=DELIVERY_SECONDS)
                if event is None:
                    self._write_pending()
                    self._end(record)
                    return
            if not self._on(event):
                return

    def _on(self, event: Event) -> bool:
        """Relay one event; False once the socket is done."""
        if event.kind == Kind.MESSAGE:
            self._message(event.body)
        elif event.kind == Kind.DONE:
            self._write_pending()
            result = FinalResult.from_json(event.body)
            if result.continues and self._follow():
                return True
            self._end(self._record(), result)
            return False
        elif event.kind == Kind.BROKEN:
            if not self.closed.is_set():
                self.send(error_frame(f"The chat was interrupted: {event.reason}"))
            return False
        return True

    def _current(self) -> Stream:
        assert self._stream is not None, "the socket relays once subscribed"
        return self._stream

    def _follow(self) -> bool:
        """The conversation goes on in the session's next execution (messages that came
        while it ran and no Chat node waited for, api/conversation.py): relay that one now.
        False if its start is not heard of in time."""
        deadline = time.monotonic() + FOLLOW_SECONDS
        while (left := deadline - time.monotonic()) > 0 and not self.closed.is_set():
            event = self._current().get(timeout=left)
            if event is not None and event.kind == Kind.BROKEN:
                return False
            if event is not None and event.kind == Kind.NEXT:
                break
        else:
            return False
        old, self.execution_id = self._current(), str(event.body.get("executionId", ""))
        try:
            self._stream = self._subscribe()
        except RelayError:
            self._stream = old
            return False
        self.rt.relay().unsubscribe(old)
        self.next_n = self.waits.delivered(self.execution_id)
        self._write_pending()
        return True

    def _heartbeat(self) -> None:
        if self.unacked_since is None:
            self.unacked_since = time.monotonic()
        self.send(HEARTBEAT)

    def _silent(self) -> bool:
        """The client has left a heartbeat unanswered for longer than the limit."""
        since = self.unacked_since
        limit = self.rt.settings.chat_heartbeat_timeout_seconds
        return since is not None and time.monotonic() - since >= limit

    def _message(self, body: dict[str, Any]) -> None:
        n = body.get("n")
        if not isinstance(n, int) or n < self.next_n:
            return  # written already (replayed from the list)
        if n > self.next_n:
            self._write_pending()  # fill a gap from the list, which holds every message
            return
        self._write(body)

    def _write_pending(self) -> int:
        pending = self.waits.messages(self.execution_id, self.next_n)
        for message in pending:
            self._write(message)
        return len(pending)

    def _write(self, message: dict[str, Any]) -> None:
        if self.awaiting:
            # The wait ended without a reply on this socket (a button, another door, its time
            # limit): n8n says so, and the widget stops treating its input as that reply.
            self.send(CONTINUE)
        self.send(absolute_links(str(message.get("text", "")), self.base_url))
        self.awaiting = bool(message.get("wait"))
        if not self.awaiting:
            self.send(CONTINUE)
        self.next_n = int(message["n"]) + 1
        self.waits.mark_delivered(self.execution_id, self.next_n)

    def _end(self, record: ExecutionRecord | None, result: FinalResult | None = None) -> None:
        """The execution ended: say why if it did not succeed; the socket then closes."""
        status, error = (record.status, record.error) if record else (None, None)
        if result is not None and (record is None or not record.finished):
            status, error = result.status, result.error
        if status is None:
            self.send(error_frame("The execution is gone."))
        elif status != Status.SUCCESS:
            self.send(error_frame(error or f"The execution ended ({status})."))

    def send(self, frame: str) -> None:
        if self.closed.is_set():
            return
        try:
            with self._send_lock:
                self.ws.send(frame)
        except (ConnectionClosed, OSError):
            self.closed.set()

    # --- client to server -----------------------------------------------------------------
    def _read(self) -> None:
        try:
            while not self.closed.is_set():
                data = self.ws.receive()
                if data is not None:
                    self._handle(data if isinstance(data, str) else data.decode("utf-8", "replace"))
        except ConnectionClosed:
            pass
        except Exception:  # never let a reader die silently with the socket open
            log.exception("chat socket of execution %s: reading failed", self.execution_id)
        self.closed.set()
        if self._stream is not None:
            self._stream.fail(CLIENT_GONE)  # wakes the relay loop, which then unsubscribes

    def _handle(self, data: str) -> None:
        if data in HEARTBEAT_ACKS:
            self.unacked_since = None
            return
        try:
            body = json.loads(data)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self.send(error_frame("Messages must be JSON objects."))
            return
        if body.get("type") == "heartbeat-ack":
            self.unacked_since = None
            return
        if body.get("action") != "sendMessage" or not isinstance(body.get("chatInput"), str):
            self.send(error_frame('A reply needs "action": "sendMessage" and a "chatInput".'))
            return
        files = body.get("files")
        if files is not None and not (
            isinstance(files, list) and all(isinstance(f, dict) for f in files)
        ):
            self.send(error_frame('"files" must be a list of {name, type, data} objects.'))
            return
        # Before the delivery: the resumed run's next message may be written before it returns.
        awaiting, self.awaiting = self.awaiting, False
        try:
            deliver_reply(self.rt, self.execution_id, self.session_id, body)
        except ReplyRefused as err:
            self.awaiting = awaiting
            self.send(error_frame(str(err)))
