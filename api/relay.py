"""The relay: one shared pub/sub connection per api process serves every open stream.

A dispatcher thread (a greenlet under gunicorn's gevent worker) reads the connection and hands
each message to the stream of its channel. `subscribe` returns only once Redis has confirmed the
subscription, so the caller can enqueue the execution knowing no event can be missed. Streams
are bounded: a client that does not read fast enough is cut off rather than letting the api's
memory grow.
"""

from __future__ import annotations

import contextlib
import logging
import threading

import redis

from core import events
from core.events import Event, EventError

log = logging.getLogger("mini_n8n.relay")

SUBSCRIBE_TIMEOUT = 5.0


class RelayError(Exception):
    pass


class Stream:
    """The events of one execution on their way to one HTTP response."""

    # Thousands are open at once in one api process: no per-instance dict (issue 14).
    __slots__ = ("channel", "local", "ordered", "max_bytes", "confirmed", "_items", "_ready",
                 "_bytes", "_lock", "overflowed", "next_seq")  # fmt: skip

    def __init__(self, channel: str, max_bytes: int, ordered: bool = True, local: bool = False):
        self.channel = channel
        self.local = local  # fed from inside this process (regular mode), not by Redis
        self.ordered = ordered  # one publisher, numbered events (executions); not for push
        self.max_bytes = max_bytes
        self.confirmed = threading.Event()
        # One reader, one or two writers: a list (rarely more than a few items; a deque starts
        # at 600 bytes) and a wake-up flag, where a queue.Queue (a lock and three conditions)
        # cost 2.5 KB per open stream (issue 14, tracemalloc).
        self._items: list[str | Event] = []
        self._ready = threading.Event()
        self._bytes = 0
        self._lock = threading.Lock()
        self.overflowed = False
        self.next_seq = 0

    def put(self, data: str) -> bool:
        with self._lock:
            if self.overflowed:
                return False
            self._bytes += len(data)
            if self._bytes > self.max_bytes:
                self.overflowed = True
                self._push(events.broken("the client is not reading the stream fast enough"))
                return False
        self._push(data)
        return True

    def fail(self, reason: str) -> None:
        self._push(events.broken(reason))

    def _push(self, item: str | Event) -> None:
        self._items.append(item)
        self._ready.set()

    def get(self, timeout: float) -> Event | None:
        """The next event, or None after `timeout` seconds of silence."""
        if not self._items:
            self._ready.clear()
            if not self._items:  # a push between the check and the clear is not missed
                self._ready.wait(timeout)
        try:
            data = self._items.pop(0)
        except IndexError:
            return None
        if isinstance(data, Event):
            return data
        with self._lock:
            self._bytes -= len(data)
        try:
            event = events.decode(data)
        except EventError:
            return events.broken("an event of this execution could not be read")
        if event.seq is None:
            return event  # a control message (a stop of a queued execution) or a push event
        if self.ordered and event.seq != self.next_seq:
            return events.broken("events of this execution were lost on the way")
        self.next_seq += 1
        return event


class Relay:
    def __init__(self, redis_url: str, max_stream_bytes: int = 8 * 1024 * 1024):
        self.redis_url = redis_url
        self.max_stream_bytes = max_stream_bytes
        self._streams: dict[str, Stream] = {}
        self._local: dict[str, Stream] = {}
        self._lock = threading.Lock()  # guards _streams and writes to the connection
        self._conn: redis.connection.ConnectionInterface | None = None
        self._thread: threading.Thread | None = None

    def open_streams(self) -> int:
        return len(self._streams) + len(self._local)

    def subscribe(self, channel: str, ordered: bool = True) -> Stream:
        stream = Stream(channel, self.max_stream_bytes, ordered)
        with self._lock:
            if channel in self._streams:
                raise RelayError(f"{channel} is already being relayed")
            self._streams[channel] = stream
            try:
                self._connection().send_command("SUBSCRIBE", channel)
            except (redis.RedisError, OSError) as err:
                self._streams.pop(channel, None)
                self._reset()
                raise RelayError(f"cannot subscribe: {err}") from err
        if not stream.confirmed.wait(SUBSCRIBE_TIMEOUT):
            self.unsubscribe(stream)
            raise RelayError("Redis did not confirm the subscription in time")
        return stream

    def warm(self) -> None:
        """Open the shared connection and start its reader now (RelayError if Redis is not
        there; the first subscription then tries again)."""
        with self._lock:
            try:
                self._connection()
            except (redis.RedisError, OSError) as err:
                self._reset()
                raise RelayError(f"cannot connect: {err}") from err

    def open_local(self, channel: str) -> Stream:
        """A stream fed from inside this process (regular mode): no Redis subscription."""
        stream = Stream(channel, self.max_stream_bytes, local=True)
        with self._lock:
            self._local[channel] = stream
        return stream

    def deliver(self, channel: str, message: str) -> None:
        """Hand a message to this process's stream of `channel`, if there is one."""
        stream = self._local.get(channel)
        if stream is not None and not stream.put(message):
            self.unsubscribe(stream)

    def unsubscribe(self, stream: Stream) -> None:
        with self._lock:
            if stream.local:
                self._local.pop(stream.channel, None)
                return
            if self._streams.get(stream.channel) is not stream:
                return
            del self._streams[stream.channel]
            if self._conn is not None:
                try:
                    self._conn.send_command("UNSUBSCRIBE", stream.channel)
                except (redis.RedisError, OSError):
                    self._reset()

    # --- the connection and its reader (call with _lock held) ------------------------------
    def _connection(self):
        if self._conn is None:
            # A subscriber waits for messages indefinitely: no read timeout (redis-py 8 has a
            # 5 s default), TCP keepalive to notice a dead peer.
            pool = redis.ConnectionPool.from_url(
                self.redis_url,
                protocol=2,
                client_name="mini-n8n-relay",
                socket_timeout=None,
                socket_keepalive=True,
            )
            self._conn = pool.make_connection()
            self._conn.connect()
            self._thread = threading.Thread(target=self._dispatch, args=(self._conn,), daemon=True)
            self._thread.start()
        return self._conn

    def _reset(self) -> None:
        """Drop a broken connection; every open stream ends with an error."""
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):  # it is broken already
                conn.disconnect()
        streams, self._streams = self._streams, {}
        for stream in streams.values():
            stream.fail("Redis was unreachable: the api lost its connection to it")
            stream.confirmed.set()

    def _dispatch(self, conn) -> None:
        while True:
            try:
                reply = conn.read_response()
            except (redis.RedisError, OSError, AttributeError) as err:
                with self._lock:
                    if self._conn is conn:
                        log.warning("relay connection lost: %s", err)
                        self._reset()
                return
            try:
                self._route(reply)
            except Exception:  # one bad message must not end every stream of this process
                log.exception("relay: a message could not be routed")

    def _route(self, reply) -> None:
        if not isinstance(reply, list) or len(reply) < 3:
            return
        kind, channel, data = reply[0], reply[1], reply[2]
        kind = kind.decode() if isinstance(kind, bytes) else kind
        channel = channel.decode() if isinstance(channel, bytes) else channel
        stream = self._streams.get(channel)
        if stream is None:
            return
        if kind == "subscribe":
            stream.confirmed.set()
        elif kind == "message":
            text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
            if not stream.put(text):
                self.unsubscribe(stream)
