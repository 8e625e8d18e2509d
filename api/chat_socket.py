"""n8n's chat WebSocket, `GET /chat?sessionId=…&executionId=…&isPublic=true`, on every api
process (n8n serves it from its main process only, polling its database every 3 s): the view
that opens one and the life of an open socket.

A socket serves one conversation: what it says is api/chat_frames.py; who may open it,
api/chat_access.py; what it relays of its execution (the Chat nodes' messages, in order, none
missed or written twice across reconnects, and the execution's end), api/chat_feed.py; its
heartbeat, api/chat_heartbeat.py; the client's replies, api/chat_replies.py. A second socket for
the same execution on this process takes over from the first.

A client frame must arrive as a body must (`Arrival`): one that stalls or trickles is closed
with 1008 and HTTP's 408 words. A refusal, a bug, or a full process (MINI_N8N_CHAT_SOCKET_MAX)
ends the socket with a close frame that says why, never with HTTP bytes in the upgraded socket.

One greenlet per socket, the one gunicorn serves the request with (more greenlets made most of
an idle socket's memory: docs/limits.md). Its loop, `_relay`, waits for whichever comes first: an event
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

import redis
from flask import Flask, jsonify, request

from api import bodies
from api.body_limit import Door, body_limit
from api.chat_access import check_access
from api.chat_feed import ChatFeed
from api.chat_frames import (
    ALREADY_OPEN,
    CLOSE_FULL,
    CLOSE_INTERNAL,
    CLOSE_NORMAL,
    CLOSE_REFUSED,
    CLOSE_RESTART,
    CLOSE_TOO_SLOW,
    CLOSE_UNAVAILABLE,
    FULL,
    INTERNAL,
    UNAVAILABLE,
    error_frame,
)
from api.chat_heartbeat import Heartbeat
from api.chat_replies import Replies
from api.conversation import ReplyRefused, check_execution, not_waiting
from api.relay import RelayError, Stream
from api.runtime import runtime
from api.waiting_webhook import link_base
from api.websocket import ConnectionClosed, Handled, Handshake, WebSocket
from core.execution_record import ExecutionRecord

log = logging.getLogger("mini_n8n.api")

HANDOVER_SECONDS = 5.0

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
    # Button links are absolute, as n8n's, on the origin the client reached us by.
    connection = ChatConnection(
        runtime(), ws, args.get("sessionId", ""), args.get("executionId", ""), link_base(request)
    )
    kept = False
    try:
        kept = connection.serve(args.get("token", ""))
    except redis.RedisError as err:  # not a bug: Redis went away under the socket
        connection.unavailable(err)
    except Exception:  # a bug: the socket is upgraded, so the answer is a close frame
        log.exception("chat socket of execution %s failed", connection.execution_id)
        connection.close(INTERNAL, CLOSE_INTERNAL)
    finally:
        if not kept:
            ws.close()  # 1000 after the execution ended; nothing if a close was sent already
    return Handled()


def end_all(reason: str) -> int:
    """Close every chat socket of this process (the api is shutting down), so they do not hold
    the shutdown for the graceful timeout. A conversation loses nothing: the client reconnects
    and gets what it has not been written yet (api/chat_feed.py). Returns how many it closed."""
    with _open_lock:
        connections = list(_open)
    for connection in connections:
        connection.close(reason)
    return len(connections)


class ChatConnection:
    def __init__(self, rt, ws, session_id: str, execution_id: str, base_url: str = ""):
        self.rt = rt
        self.ws = ws
        self.session_id = session_id
        self.closed = threading.Event()
        self.released = threading.Event()  # its subscription is given up
        self._send_lock = threading.Lock()
        self.feed = ChatFeed(rt, execution_id, self.send, self._subscribe, base_url)
        self.heartbeat = Heartbeat(rt.settings)
        self.replies = Replies(rt, session_id, self.feed, self.heartbeat, self.send)

    @property
    def execution_id(self) -> str:
        """The execution it relays now (the conversation may have moved on to the next)."""
        return self.feed.execution_id

    def serve(self, token: str) -> bool:
        """Check who asks, subscribe, write what is pending; True if the socket then stays open,
        served by a greenlet of its own (`_run`) once the request's greenlet returns."""
        record = self._admitted(token)
        if record is None:
            return False
        try:
            self.feed.stream = self._subscribe(self.execution_id)
        except RelayError as err:
            log.warning("chat socket of execution %s: %s", self.execution_id, err)
            self.send(error_frame("The chat is unavailable."))
            return False
        record = self.feed.record() or record  # as it stands now that nothing can be missed
        with _open_lock:
            _open.add(self)
        kept = False
        try:
            written = self.feed.start()
            if record.finished:
                # Late, it still gets what was sent; with nothing left, it is told it is over.
                if written:
                    self.feed.end(record)
                else:
                    self.send(error_frame(not_waiting(record)))
                return False
            del record  # the open socket keeps none of the request's data
            kept = self._keep()
            return kept
        finally:
            if not kept:
                self._done()

    def _admitted(self, token: str) -> ExecutionRecord | None:
        """The execution's record if this process has room and the client may talk to it;
        else None, the socket closed with the reason."""
        if self._full():
            self.close(FULL, CLOSE_FULL)
            return None
        try:
            record = check_execution(self.feed.record(), self.session_id)
            chat = check_access(self.rt, record, self.execution_id, token)
        except ReplyRefused as err:
            self.send(error_frame(str(err)))
            self.close(str(err), CLOSE_REFUSED)
            return None
        self.replies.allowed_file_types = chat.allowed_file_types
        return record

    def _subscribe(self, execution_id: str) -> Stream:
        """The execution's events, confirmed. One subscription per channel and api process: a
        socket already open here for this execution (the widget reconnects after each message
        it POSTs, or another tab) hands over to this one, the newest."""
        channel = self.rt.keys.execution_events(execution_id)
        try:
            return self.rt.relay().subscribe(channel, ordered=False)
        except RelayError as err:
            if "already" not in str(err):
                raise
        with _open_lock:
            older = [c for c in _open if c.execution_id == execution_id and c is not self]
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
        except redis.RedisError as err:  # not a bug: Redis went away under the socket
            self.unavailable(err)
        except Exception:  # a bug: a close frame that says so, never a silent drop
            log.exception("chat socket of execution %s failed", self.execution_id)
            self.close(INTERNAL, CLOSE_INTERNAL)
        finally:
            self._done()
            self.ws.close()
            self.ws.release()

    def _done(self) -> None:
        with _open_lock:
            _open.discard(self)
        self.closed.set()
        self.ws.stop_watching()
        if self.feed.stream is not None:
            self.rt.relay().unsubscribe(self.feed.stream)
        self.released.set()

    def unavailable(self, err: redis.RedisError) -> None:
        """Redis failed while the socket was served: the client is told so in an error line
        (as a stream is), and the socket closes with "try again later"."""
        log.warning("chat socket of execution %s: Redis failed: %s", self.execution_id, err)
        with contextlib.suppress(Exception):  # the client may be gone too
            self.send(error_frame(UNAVAILABLE))
        self.close(UNAVAILABLE, CLOSE_UNAVAILABLE)

    def close(self, reason: str, code: int = CLOSE_RESTART) -> None:
        with self._send_lock:
            self.closed.set()
            with contextlib.suppress(Exception):  # already closed
                # A close frame's reason is at most 123 bytes of UTF-8.
                message = reason.encode()[:120].decode("utf-8", "ignore")
                self.ws.close(code, message)
        if self.feed.stream is not None:
            self.feed.stream.fail(reason)

    def _full(self) -> bool:
        with _open_lock:
            return len(_open) >= self.rt.settings.chat_socket_max

    def send(self, frame: str) -> None:
        if self.closed.is_set():
            return
        try:
            with self._send_lock:
                self.ws.send(frame)
        except (ConnectionClosed, OSError):
            self.closed.set()

    # --- the socket's one loop ---------------------------------------------------------------
    def _relay(self) -> None:
        """Until the execution ends or the client goes: the relay's events, the client's frames
        (which wake the stream when they arrive) and a heartbeat when nothing was relayed for
        `keepalive_seconds`, all in this greenlet."""
        feed, heartbeat = self.feed, self.heartbeat
        heartbeat.restart()
        while not self.closed.is_set():
            stream = feed.current()
            self.ws.wake_when_readable(stream.wake)
            wait = min(heartbeat.beat_at, feed.deadline(), self.ws.deadline()) - time.monotonic()
            event = stream.get(timeout=max(wait, 0.0))
            if not self._read():
                return
            if event is not None:
                heartbeat.restart()
                if not feed.relayed(event):
                    return
            elif not feed.in_time():
                return
            elif heartbeat.due():
                heartbeat.restart()
                if not self._quiet():
                    return

    def _quiet(self) -> bool:
        """Nothing was relayed for a while: close a silent or idle socket, else a heartbeat and
        a look at the execution. False once the socket is done."""
        refusal = self.heartbeat.why_close()
        if refusal is not None:
            self.close(*refusal)
            return False
        self.send(self.heartbeat.beat())
        self.feed.look()
        return True

    def _read(self) -> bool:
        """Handle the frames that arrived (without waiting for more); False once the client
        closed the socket or it broke."""
        try:
            frames = self.ws.receive_ready()
        except ConnectionClosed:
            self.closed.set()
            return False
        for data in frames:
            self.replies.handle(data)
        slow = self.ws.late()
        if slow is not None:
            self.close(slow, CLOSE_TOO_SLOW)
            return False
        return True
