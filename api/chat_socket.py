"""n8n's chat WebSocket, `GET /chat?sessionId=…&executionId=…&isPublic=true`, on every api
process (n8n serves it from its main process only, polling its database every 3 s).

Server frames are what `@n8n/chat` expects: each Chat-node message as a text frame (its text as
is; an approval's buttons with their links made absolute, api/waiting_webhook.py),
`n8n|continue` after a message that waits for no reply and, as n8n does, before the next message
when a wait ended some other way than by a reply on this socket (a button click, a POST, an
expired limit), `n8n|heartbeat` when quiet (answered `n8n|heartbeat-ack`), and
`{"type":"error","message":…}` (the widget shows `message`) when something cannot be done. A
client that leaves heartbeats unanswered for MINI_N8N_CHAT_HEARTBEAT_TIMEOUT (60 s, n8n's) is
closed (n8n also cancels the execution; here it waits on, for a new socket or a POST). The
client's reply is `{"sessionId","action":"sendMessage","chatInput","files"}`: the session's next
message, which the conversation takes (api/conversation.py).

Messages come the way streamed tokens do: the relay's shared subscription, confirmed by Redis
before anything else happens. Then the messages not yet delivered are read from the execution's
list (core/waiting.py) and written, then live events follow; a message's index in the list says
whether it was written already. So none is missed or written twice, even when the client
reconnects to another api process (after a restart, say) in the middle of a conversation. The
socket closes when the execution ends (an error first gets an error frame), unless the
conversation goes on in the session's next execution (messages it never waited for started it,
core/events.py `next`): the socket follows it there. A second socket for the same execution on
this process takes over from the first.

Who may talk (issue 23): the socket checks the chat's authentication as its POST does (public,
allowedOrigins, basic auth) and requires the execution's resumeToken (`&token=`, which the
POST answered with: api/resume_tokens.py), so knowing ids is not enough. Every client frame
goes through the body rules of every door in HTTP's words (api/bodies.py `parse_object`; a
binary frame must be UTF-8), its files through the multipart limits and types: a bad frame
gets an error frame and the wait goes on. It must arrive as a body must (`Arrival`): one that
stalls or trickles is closed with 1008 and HTTP's 408 words. A refusal, a bug, or a full process
(MINI_N8N_CHAT_SOCKET_MAX) ends the socket with a close frame that says why, never with HTTP
bytes in the upgraded socket.

One greenlet per socket, the one gunicorn serves the request with (issue 23: an idle socket
cost about 160 KiB with three). Its loop, `_relay`, waits for whichever comes first: an event
of the execution (the relay's stream), bytes from the client (the socket wakes the same stream,
api/websocket.py, with no reader of its own), or the time for a heartbeat. Then it reads the
frames that arrived without blocking, handles the event if there is one, and beats if it is
time. Replies are handled in that same greenlet, so events wait in the stream meanwhile.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any

import redis
from flask import Flask, jsonify, request

from api import bodies, resume_tokens
from api.auth import check_webhook_auth
from api.body_limit import Door, body_limit
from api.chat_files import reply_files
from api.conversation import ReplyRefused, check_execution, deliver_reply, not_waiting
from api.cors import origin_allowed
from api.errors import ApiError
from api.relay import RelayError, Stream
from api.runtime import runtime
from api.waiting_webhook import absolute_links
from api.websocket import ConnectionClosed, Handled, Handshake, WebSocket
from core.chat_node_message import ChatNodeMessage
from core.events import Event, Kind
from core.execution_record import ExecutionRecord, Status
from core.jsontext import dumps
from core.public_errors import public_error
from core.results import FinalResult
from core.retention import REDIS_FULL
from core.waiting import WaitingStore
from core.workflow_store import WorkflowNotFound
from engine.nodes.chat_trigger import ChatSettings, ChatTrigger, chat_settings
from engine.workflow import Node

log = logging.getLogger("mini_n8n.api")

HEARTBEAT = "n8n|heartbeat"
HEARTBEAT_ACKS = ("n8n|heartbeat-ack", '{"type":"heartbeat-ack"}')
CONTINUE = "n8n|continue"
ALREADY_OPEN = "This conversation was opened in another window."
HANDOVER_SECONDS = 5.0
# How long a socket waits to hear where its conversation goes on (core/events.py `next`).
FOLLOW_SECONDS = 10.0
# Once the record says the execution ended, how long its final event may take to arrive.
DELIVERY_SECONDS = 1.0
# 1012, "service restart": the client may reconnect (to this api once it is back, or another).
CLOSE_RESTART = 1012
CLOSE_NORMAL = 1000
CLOSE_SILENT = 1001  # "going away": the client stopped answering heartbeats
CLOSE_IDLE = 1001  # "going away": no message from the client for too long
CLOSE_REFUSED = 1008  # "policy violation": not this chat's user (token, origin, login)
CLOSE_INTERNAL = 1011  # a bug; the reason says no more than an HTTP 500 would
CLOSE_FULL = 1013  # "try again later": this process holds as many sockets as it may
CLOSE_TOO_SLOW = 1008  # "policy violation": a message that stalled or trickled (HTTP's 408)
FULL = "This server holds as many chats as it may; try again shortly."
IDLE = "Closed after a long time without a message; reconnect to go on."

_open: set[ChatConnection] = set()
_open_lock = threading.Lock()


def register(app: Flask) -> None:
    # websocket=True: Werkzeug routes an upgrade request only to a rule that says it takes one.
    app.add_url_rule("/chat", "chat_socket", chat_socket, methods=["GET"], websocket=True)


def chat_socket():
    try:
        frame_bytes = body_limit(runtime().settings, Door.CHAT_SOCKET)
        ws = WebSocket.accept(request.environ, frame_bytes, bodies.intake())
    except Handshake as err:
        return jsonify({"message": f"This is n8n's chat WebSocket: {err}"}), 400
    args = request.args
    # Button links are written on the origin the client reached us by, with the page's scheme
    # ("//host/..."): behind a TLS proxy this process sees http while the page is https.
    connection = ChatConnection(
        runtime(), ws, args.get("sessionId", ""), args.get("executionId", ""), f"//{request.host}"
    )
    kept = False
    try:
        kept = connection.serve(args.get("token", ""))
    except Exception:  # a bug: the socket is upgraded, so the answer is a close frame
        log.exception("chat socket of execution %s failed", connection.execution_id)
        connection.close("Internal server error", CLOSE_INTERNAL)
    finally:
        if not kept:
            ws.close()  # 1000 after the execution ended; nothing if a close was sent already
    return Handled()


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
        # The execution ended: (its record, by when its final event must have come).
        self._ending: tuple[ExecutionRecord | None, float] | None = None
        # Its end said the conversation goes on: until when to wait to hear where.
        self._following_until: float | None = None
        self.closed = threading.Event()
        self.released = threading.Event()  # its subscription is given up
        self._send_lock = threading.Lock()
        self._stream: Stream | None = None
        self._settings: ChatSettings | None = None
        self.last_message = time.monotonic()

    def serve(self, token: str) -> bool:
        """Check who asks, subscribe, write what is pending; True if the socket then stays open,
        served by a greenlet of its own (`_run`) once the request's greenlet returns."""
        if self._full():
            self.close(FULL, CLOSE_FULL)
            return False
        try:
            record = check_execution(self._record(), self.session_id)
            self._check_access(record, token)
        except ReplyRefused as err:
            self.send(error_frame(str(err)))
            self.close(str(err), CLOSE_REFUSED)
            return False
        try:
            stream = self._subscribe()
        except RelayError as err:
            log.warning("chat socket of execution %s: %s", self.execution_id, err)
            self.send(error_frame("The chat is unavailable."))
            return False
        self._stream = stream
        record = self._record() or record  # as it stands now that nothing can be missed
        with _open_lock:
            _open.add(self)
        kept = False
        try:
            self.next_n = self.waits.delivered(self.execution_id)
            written = self._write_pending()
            if record.finished:
                # Late, it still gets what was sent; with nothing left, it is told it is over.
                if written:
                    self._end(record)
                else:
                    self.send(error_frame(not_waiting(record)))
                return False
            del record  # the open socket keeps none of the request's data
            kept = self._keep()
            return kept
        finally:
            if not kept:
                self._done()

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
            older = [c for c in _open if c.execution_id == self.execution_id and c is not self]
        for connection in older:
            connection.close(ALREADY_OPEN, CLOSE_NORMAL)
            connection.released.wait(HANDOVER_SECONDS)
        return self.rt.relay().subscribe(channel, ordered=False)

    def _keep(self) -> bool:
        """Go on in a greenlet of its own, so that the request's (its stack, gunicorn's request
        and the WSGI environ, Flask's context) ends now: the socket takes a descriptor of its
        own, gunicorn closes its one. False if the socket is gone already."""
        import gevent

        try:
            self.ws.detach()
        except OSError:
            self.closed.set()
            return False
        gevent.spawn_raw(self._run)
        return True

    def _run(self) -> None:
        try:
            self._relay()
        except Exception:  # a bug: a close frame that says so, never a silent drop
            log.exception("chat socket of execution %s failed", self.execution_id)
            self.close("Internal server error", CLOSE_INTERNAL)
        finally:
            self._done()
            self.ws.close()
            self.ws.release()

    def _done(self) -> None:
        with _open_lock:
            _open.discard(self)
        self.closed.set()
        self.ws.stop_watching()
        if self._stream is not None:
            self.rt.relay().unsubscribe(self._stream)
        self.released.set()

    def close(self, reason: str, code: int = CLOSE_RESTART) -> None:
        with self._send_lock:
            self.closed.set()
            with contextlib.suppress(Exception):  # already closed
                # A close frame's reason is at most 123 bytes of UTF-8.
                message = reason.encode()[:120].decode("utf-8", "ignore")
                self.ws.close(code, message)
        if self._stream is not None:
            self._stream.fail(reason)

    def _full(self) -> bool:
        with _open_lock:
            return len(_open) >= self.rt.settings.chat_socket_max

    def _check_access(self, record: ExecutionRecord, token: str) -> None:
        """As the Chat Trigger's POST: public, allowedOrigins (browsers apply no CORS to
        WebSockets; the api's own origin, the hosted page, always), its authentication; then the
        resumeToken that POST answered with."""
        node = self._trigger(record)
        chat = self._settings = chat_settings(node)
        if not chat.public:
            raise ReplyRefused("There is no such execution in this chat session.")
        origin = request.headers.get("Origin")
        if origin is not None and not origin_allowed(origin, chat.allowed_origins, request):
            raise ReplyRefused(f"Origin {origin} is not allowed")
        try:
            check_webhook_auth(self.rt, node, chat.authentication, request)
        except ApiError as err:
            raise ReplyRefused(err.message) from None
        if not token or not resume_tokens.valid(self.rt, self.execution_id, token):
            raise ReplyRefused("This chat needs the resumeToken its message was answered with.")

    def _trigger(self, record: ExecutionRecord) -> Node:
        try:
            _, workflow = self.rt.workflows.load(record.workflow_id)
        except WorkflowNotFound:
            raise ReplyRefused("The workflow of this execution is gone.") from None
        triggers = [n for n in workflow.nodes.values() if n.type == ChatTrigger.type]
        if not triggers:
            raise ReplyRefused("The workflow of this execution has no chat.")
        return triggers[0]

    def _record(self) -> ExecutionRecord | None:
        if not self.execution_id or len(self.execution_id) > 64:
            return None
        return self.rt.executions.get(self.execution_id)

    # --- the socket's one loop ---------------------------------------------------------------
    def _relay(self) -> None:
        """Until the execution ends or the client goes: the relay's events, the client's frames
        (which wake the stream when they arrive) and a heartbeat when nothing was relayed for
        `keepalive_seconds`, all in this greenlet."""
        quiet = self.rt.settings.keepalive_seconds
        beat_at = time.monotonic() + quiet
        while not self.closed.is_set():
            stream = self._current()
            self.ws.wake_when_readable(stream.wake)
            wait = min(beat_at, self._deadline(), self.ws.deadline()) - time.monotonic()
            event = stream.get(timeout=max(wait, 0.0))
            if not self._read():
                return
            if event is not None:
                beat_at = time.monotonic() + quiet
                if not self._relayed(event):
                    return
            elif not self._in_time():
                return
            elif time.monotonic() >= beat_at:
                beat_at = time.monotonic() + quiet
                if not self._quiet():
                    return

    def _current(self) -> Stream:
        assert self._stream is not None, "the socket relays once subscribed"
        return self._stream

    def _deadline(self) -> float:
        """When the loop must look again without an event: an end or a follow-up awaited."""
        pending = [self._ending[1]] if self._ending else []
        pending += [self._following_until] if self._following_until is not None else []
        return min(pending, default=float("inf"))

    def _in_time(self) -> bool:
        """False (and the socket done) once what it awaited did not come in time: the final
        event of an execution whose record says it ended, or where its conversation goes on."""
        now = time.monotonic()
        if self._following_until is not None and now >= self._following_until:
            self._end(self._record())
            return False
        if self._ending is not None and now >= self._ending[1]:
            self._write_pending()
            self._end(self._ending[0])
            return False
        return True

    # --- server to client -----------------------------------------------------------------
    def _quiet(self) -> bool:
        """Nothing was relayed for a while: close a silent or idle socket, else a heartbeat and
        a look at the execution. False once the socket is done."""
        if self._silent():
            timeout = self.rt.settings.chat_heartbeat_timeout_seconds
            self.close(f"no heartbeat acknowledgement for {timeout:g} s", CLOSE_SILENT)
            return False
        if time.monotonic() - self.last_message > self.rt.settings.chat_socket_idle_seconds:
            self.close(IDLE, CLOSE_IDLE)  # the wait goes on; a reconnect picks it up
            return False
        self._heartbeat()
        # As the relay does for streams: a lost worker or a reply no worker took in
        # time ends the execution (crashed) and, so, this socket.
        record = self.rt.liveness.check(self.execution_id)
        if (record is None or record.finished) and self._ending is None:
            # Its final event went out with its record (core/executions.py) and is on its way
            # here, unless the relay lost it.
            self._ending = (record, time.monotonic() + DELIVERY_SECONDS)
        return True

    def _relayed(self, event: Event) -> bool:
        """One event of the execution; False once the socket is done."""
        if event.kind == Kind.MESSAGE:
            self._message(ChatNodeMessage.from_json(event.body))
        elif event.kind == Kind.DONE:
            self._write_pending()
            result = FinalResult.from_json(event.body)
            if result.continues:  # its `next` event says where: wait for it
                self._following_until = time.monotonic() + FOLLOW_SECONDS
                self._ending = None
                return True
            self._end(self._record(), result)
            return False
        elif event.kind == Kind.NEXT and self._following_until is not None:
            return self._follow(str(event.body.get("executionId", "")))
        elif event.kind == Kind.MISSED:
            return self._caught_up(event.body)
        elif event.kind == Kind.BROKEN:
            if not self.closed.is_set():
                self.send(error_frame(f"The chat was interrupted: {event.reason}"))
            return False
        return True

    def _caught_up(self, early: Event | None) -> bool:
        """Events may have been missed (a gap, or subscribed again after the relay's connection
        dropped): the messages from the execution's list, then the event after the gap, or a
        look at the record, as after a quiet interval."""
        self._write_pending()
        if early is not None:
            return self._relayed(early)
        record = self._record()
        if (record is None or record.finished) and self._ending is None:
            self._ending = (record, time.monotonic() + DELIVERY_SECONDS)
        return True

    def _follow(self, execution_id: str) -> bool:
        """The conversation goes on in the session's next execution (messages that came
        while it ran and no Chat node waited for): relay that one now."""
        old, self.execution_id = self._current(), execution_id
        try:
            self._stream = self._subscribe()
        except RelayError:
            self._stream = old
            self._end(self._record())
            return False
        self.rt.relay().unsubscribe(old)
        self._following_until = self._ending = None
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

    def _message(self, message: ChatNodeMessage) -> None:
        n = message.n
        if n is None or n < self.next_n:
            return  # written already (replayed from the list)
        if n > self.next_n:
            self._write_pending()  # fill a gap from the list, which holds every message
            return
        self._write(message)

    def _write_pending(self) -> int:
        pending = self.waits.messages(self.execution_id, self.next_n)
        for message in pending:
            self._write(message)
        return len(pending)

    def _write(self, message: ChatNodeMessage) -> None:
        if self.awaiting:
            # The wait ended without a reply on this socket (a button, another door, its time
            # limit): n8n says so, and the widget stops treating its input as that reply.
            self.send(CONTINUE)
        self.send(absolute_links(message.text, self.base_url))
        self.awaiting = message.wait
        if not self.awaiting:
            self.send(CONTINUE)
        self.next_n = (message.n or 0) + 1
        # Redis full: the count goes with the next message's (a reconnect may show this again).
        with contextlib.suppress(redis.OutOfMemoryError):
            self.waits.mark_delivered(self.execution_id, self.next_n)

    def _end(self, record: ExecutionRecord | None, result: FinalResult | None = None) -> None:
        """The execution ended: say why if it did not succeed; the socket then closes."""
        status, error = (record.status, record.error) if record else (None, None)
        if result is not None and (record is None or not record.finished):
            status, error = result.status, result.error
        if status is None:
            self.send(error_frame("The execution is gone."))
        elif status != Status.SUCCESS:
            self.send(error_frame(public_error(status, error, self.execution_id)))

    def send(self, frame: str) -> None:
        if self.closed.is_set():
            return
        try:
            with self._send_lock:
                self.ws.send(frame)
        except (ConnectionClosed, OSError):
            self.closed.set()

    # --- client to server -----------------------------------------------------------------
    def _read(self) -> bool:
        """Handle the frames that arrived (without waiting for more); False once the client
        closed the socket or it broke."""
        try:
            frames = self.ws.receive_ready()
        except ConnectionClosed:
            self.closed.set()
            return False
        for data in frames:
            self._handle(data)
        slow = self.ws.late()
        if slow is not None:
            self.close(slow, CLOSE_TOO_SLOW)
            return False
        return True

    def _handle(self, data: str | bytes) -> None:
        if data in HEARTBEAT_ACKS:
            self.unacked_since = None
            return
        try:
            body = self._reply(data)
        except ApiError as err:  # a bad frame: said so, and the wait goes on
            self.send(error_frame(err.message))
            return
        if body is None:
            self.unacked_since = None  # a JSON heartbeat-ack
            return
        self.last_message = time.monotonic()
        # Before the delivery: the resumed run's next message may be written before it returns.
        awaiting, self.awaiting = self.awaiting, False
        try:
            deliver_reply(self.rt, self.execution_id, self.session_id, body)
        except ReplyRefused as err:
            self.awaiting = awaiting
            self.send(error_frame(str(err)))
        except redis.OutOfMemoryError:  # as HTTP's 503: nothing changed, the wait goes on
            self.awaiting = awaiting
            self.send(error_frame(REDIS_FULL))

    def _reply(self, data: str | bytes) -> dict[str, Any] | None:
        """The frame as a reply, under the body rules of every door; None for an ack."""
        settings = self.rt.settings
        body = bodies.parse_object(data, settings.json_max_values)
        if body.get("type") == "heartbeat-ack":
            return None
        if body.get("action") != "sendMessage" or not isinstance(body.get("chatInput"), str):
            raise ApiError(400, 'A reply needs "action": "sendMessage" and a "chatInput".')
        allowed = self._settings.allowed_file_types if self._settings else []
        files_bytes = reply_files(body.get("files"), settings, allowed)
        # Beside its files, a frame is held to the limit of a chat message POSTed as JSON.
        if len(data) - files_bytes > settings.chat_body_max_bytes:
            raise ApiError(413, f"A message may be at most {settings.chat_body_max_bytes} bytes")
        return body
