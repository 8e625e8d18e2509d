"""n8n's chat WebSocket, `GET /chat?sessionId=…&executionId=…&isPublic=true`, on every api
process (n8n serves it from its main process only, polling its database every 3 s).

Server frames are what `@n8n/chat` expects: each Chat-node message as a text frame (its text as
is), `n8n|continue` after a message that waits for no reply, `n8n|heartbeat` when quiet
(answered `n8n|heartbeat-ack`), and `{"type":"error","message":…}` (the widget shows `message`)
when something cannot be done. The client's reply is `{"sessionId","action":"sendMessage",
"chatInput","files"}`; it resumes the waiting execution on any worker (api/conversation.py).

Messages come the way streamed tokens do: the relay's shared subscription, confirmed by Redis
before anything else happens. Then the messages not yet delivered are read from the execution's
list (core/waiting.py) and written, then live events follow; a message's index in the list says
whether it was written already. So none is missed or written twice, even when the client
reconnects to another api process (after a restart, say) in the middle of a conversation. The
socket closes when the execution ends; an error or an expired wait first gets an error frame.

Who may talk (issue 23): the socket checks the chat's authentication as its POST does (public,
allowedOrigins, basic auth) and requires the execution's resumeToken (`&token=`, which the
POST answered with: api/resume_tokens.py), so knowing ids is not enough. Every client frame
goes through the body rules of every door (api/bodies.py: size, values, depth, NaN, lone
surrogates), and its files through the multipart limits and types: a bad frame gets an error
frame and the wait goes on. A refusal, a bug, or a full process (MINI_N8N_CHAT_SOCKET_MAX)
ends the socket with a close frame that says why, never with HTTP bytes in the upgraded socket.

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

from flask import Flask, current_app, jsonify, request

from api import bodies, resume_tokens
from api.auth import check_webhook_auth
from api.chat_files import reply_files
from api.conversation import ReplyRefused, check_execution, deliver_reply, not_waiting
from api.cors import origin_allowed
from api.errors import ApiError
from api.relay import RelayError, Stream
from api.runtime import runtime
from api.websocket import ConnectionClosed, Handled, Handshake, WebSocket
from core.events import Event, Kind
from core.executions import FINISHED, Status
from core.jsontext import NOT_JSON, dumps
from core.waiting import WaitingStore
from core.workflow_store import WorkflowNotFound
from engine.nodes.chat_trigger import ChatSettings, ChatTrigger, chat_settings
from engine.workflow import Node

log = logging.getLogger("mini_n8n.api")

HEARTBEAT = "n8n|heartbeat"
HEARTBEAT_ACKS = ("n8n|heartbeat-ack", '{"type":"heartbeat-ack"}')
CONTINUE = "n8n|continue"
ALREADY_OPEN = "This conversation is already open in another window."
# 1012, "service restart": the client may reconnect (to this api once it is back, or another).
CLOSE_RESTART = 1012
CLOSE_IDLE = 1001  # "going away": no message from the client for too long
CLOSE_REFUSED = 1008  # "policy violation": not this chat's user (token, origin, login)
CLOSE_INTERNAL = 1011  # a bug; the reason says no more than an HTTP 500 would
CLOSE_FULL = 1013  # "try again later": this process holds as many sockets as it may
FULL = "This server holds as many chats as it may; try again shortly."
NOT_AN_OBJECT = "Messages must be JSON objects."
IDLE = "Closed after a long time without a message; reconnect to go on."

_open: set[ChatConnection] = set()
_open_lock = threading.Lock()


def register(app: Flask, settings) -> None:
    # A reply carries its files as base64 data URLs (4/3 of their size) beside a chat message.
    frame_bytes = settings.chat_files_max_bytes * 4 // 3 + settings.chat_body_max_bytes
    app.config.setdefault("MINI_N8N_CHAT_FRAME_BYTES", frame_bytes)
    # websocket=True: Werkzeug routes an upgrade request only to a rule that says it takes one.
    app.add_url_rule("/chat", "chat_socket", chat_socket, methods=["GET"], websocket=True)


def chat_socket():
    try:
        ws = WebSocket.accept(request.environ, current_app.config["MINI_N8N_CHAT_FRAME_BYTES"])
    except Handshake as err:
        return jsonify({"message": f"This is n8n's chat WebSocket: {err}"}), 400
    args = request.args
    connection = ChatConnection(
        runtime(), ws, args.get("sessionId", ""), args.get("executionId", "")
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
    def __init__(self, rt, ws, session_id: str, execution_id: str):
        self.rt = rt
        self.ws = ws
        self.session_id = session_id
        self.execution_id = execution_id
        self.waits = WaitingStore(rt.executions)
        self.next_n = 0  # index of the next message this client has not been written
        self.closed = threading.Event()
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
            stream = self.rt.relay().subscribe(
                self.rt.keys.execution_events(self.execution_id), ordered=False
            )
        except RelayError as err:
            # One subscription per channel and api process: a second socket for the same
            # execution on this process (another tab) is refused.
            already = "already" in str(err)
            if not already:
                log.warning("chat socket of execution %s: %s", self.execution_id, err)
            self.send(error_frame(ALREADY_OPEN if already else "The chat is unavailable."))
            return False
        self._stream = stream
        record = self._record() or record  # as it stands now that nothing can be missed
        with _open_lock:
            _open.add(self)
        kept = False
        try:
            self.next_n = self.waits.delivered(self.execution_id)
            written = self._write_pending()
            if record["status"] in FINISHED:
                # Late, it still gets what was sent; with nothing left, it is told it is over.
                if written:
                    self._end(record)
                else:
                    self.send(error_frame(not_waiting(record)))
                return False
            del record  # the open socket keeps none of the request's data
            kept = self._keep(stream)
            return kept
        finally:
            if not kept:
                self._done(stream)

    def _keep(self, stream: Stream) -> bool:
        """Go on in a greenlet of its own, so that the request's (its stack, gunicorn's request
        and the WSGI environ, Flask's context) ends now: the socket takes a descriptor of its
        own, gunicorn closes its one. False if the socket is gone already."""
        import gevent

        try:
            self.ws.detach()
        except OSError:
            self.closed.set()
            return False
        gevent.spawn_raw(self._run, stream)
        return True

    def _run(self, stream: Stream) -> None:
        try:
            self._relay(stream)
        except Exception:  # a bug: a close frame that says so, never a silent drop
            log.exception("chat socket of execution %s failed", self.execution_id)
            self.close("Internal server error", CLOSE_INTERNAL)
        finally:
            self._done(stream)
            self.ws.close()
            self.ws.release()

    def _done(self, stream: Stream) -> None:
        with _open_lock:
            _open.discard(self)
        self.closed.set()
        self.ws.stop_watching()
        self.rt.relay().unsubscribe(stream)

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

    def _check_access(self, record: dict[str, Any], token: str) -> None:
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

    def _trigger(self, record: dict[str, Any]) -> Node:
        try:
            _, workflow = self.rt.workflows.load(record.get("workflowId", ""))
        except WorkflowNotFound:
            raise ReplyRefused("The workflow of this execution is gone.") from None
        triggers = [n for n in workflow.nodes.values() if n.type == ChatTrigger.type]
        if not triggers:
            raise ReplyRefused("The workflow of this execution has no chat.")
        return triggers[0]

    def _record(self) -> dict[str, Any] | None:
        if not self.execution_id or len(self.execution_id) > 64:
            return None
        return self.rt.executions.get(self.execution_id)

    # --- the socket's one loop ---------------------------------------------------------------
    def _relay(self, stream: Stream) -> None:
        """Until the execution ends or the client goes: the relay's events, the client's frames
        (which wake the stream when they arrive) and a heartbeat when nothing was relayed for
        `keepalive_seconds`, all in this greenlet."""
        quiet = self.rt.settings.keepalive_seconds
        beat_at = time.monotonic() + quiet
        while not self.closed.is_set():
            self.ws.wake_when_readable(stream.wake)
            event = stream.get(timeout=max(beat_at - time.monotonic(), 0.0))
            if not self._read():
                return
            if event is not None:
                beat_at = time.monotonic() + quiet
                if not self._relayed(event):
                    return
            elif time.monotonic() >= beat_at:
                beat_at = time.monotonic() + quiet
                if not self._quiet():
                    return

    # --- server to client -----------------------------------------------------------------
    def _quiet(self) -> bool:
        """Nothing was relayed for a while: close an idle socket, else a heartbeat and a look at
        the execution. False once the socket is done."""
        if time.monotonic() - self.last_message > self.rt.settings.chat_socket_idle_seconds:
            self.close(IDLE, CLOSE_IDLE)  # the wait goes on; a reconnect picks it up
            return False
        self.send(HEARTBEAT)
        # As the relay does for streams: a lost worker or a reply no worker took in
        # time ends the execution (crashed) and, so, this socket.
        record = self.rt.executions.mark_crashed_if_lost(
            self.execution_id, self.rt.settings.queue_timeout_seconds
        )
        if record is None or record["status"] in FINISHED:
            self._write_pending()
            self._end(record)
            return False
        return True

    def _relayed(self, event: Event) -> bool:
        """One event of the execution; False once the socket is done."""
        if event.kind == Kind.MESSAGE:
            self._message(event.body)
        elif event.kind == Kind.DONE:
            self._write_pending()
            self._end(self._record() or {"status": Status.ERROR, **event.body})
            return False
        elif event.kind == Kind.BROKEN:
            if not self.closed.is_set():
                self.send(error_frame(f"The chat was interrupted: {event.reason}"))
            return False
        return True

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
        self.send(str(message.get("text", "")))
        if not message.get("wait"):
            self.send(CONTINUE)
        self.next_n = int(message["n"]) + 1
        self.waits.mark_delivered(self.execution_id, self.next_n)

    def _end(self, record: dict[str, Any] | None) -> None:
        """The execution ended: say why if it did not succeed; the socket then closes."""
        if record is None:
            self.send(error_frame("The execution is gone."))
        elif record["status"] != Status.SUCCESS:
            reason = record.get("error") or f"The execution ended ({record['status']})."
            self.send(error_frame(str(reason)))

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
        return True

    def _handle(self, data: str) -> None:
        if data in HEARTBEAT_ACKS:
            return
        try:
            body = self._reply(data)
        except ApiError as err:  # a bad frame: said so, and the wait goes on
            self.send(error_frame(err.message))
            return
        if body is None:
            return
        self.last_message = time.monotonic()
        try:
            deliver_reply(self.rt, self.execution_id, self.session_id, body)
        except ReplyRefused as err:
            self.send(error_frame(str(err)))

    def _reply(self, data: str) -> dict[str, Any] | None:
        """The frame as a reply, under the body rules of every door; None for an ack."""
        settings = self.rt.settings
        try:
            body = bodies.parse(data, settings.json_max_values)
        except ApiError as err:
            if err.message == NOT_JSON:  # what the widget shows: said as a chat, not a request
                raise ApiError(400, NOT_AN_OBJECT) from None
            raise
        if not isinstance(body, dict):
            raise ApiError(400, NOT_AN_OBJECT)
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
