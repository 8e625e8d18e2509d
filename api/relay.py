"""The relay: one shared pub/sub connection per api process serves every open stream.

A dispatcher thread (a greenlet under gunicorn's gevent worker) reads the connection and hands
each message to the stream of its channel. `subscribe` returns only once Redis has confirmed the
subscription, so the caller can enqueue the execution knowing no event can be missed. Streams
are bounded: a client that does not read fast enough is cut off rather than letting the api's
memory grow.

A connection that drops (killed, Redis restarted) ends no stream: the relay connects again, with
backoff, and subscribes every open stream's channel anew; once Redis confirmed it, each of those
streams is told it may have missed events (`events.missed()`), and catches up from what the
worker kept (core/replay.py). A gap in an execution's numbering is told the same way.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time

import redis
from redis.cluster import RedisCluster

from core import events
from core.events import Event, EventError

log = logging.getLogger("mini_n8n.relay")

SUBSCRIBE_TIMEOUT = 5.0
# How long an ended stream's channel may wait to be unsubscribed with a later subscription's
# write before it is sent on its own.
LEAVE_DELAY = 0.01
# How often an idle sender of unsubscriptions looks whether its connection was reset.
LEAVE_IDLE_LOOK = 1.0
# Subscribing again after a connection dropped: the first try at once-ish, then backoff.
REJOIN_FIRST_DELAY = 0.05
REJOIN_MAX_DELAY = 2.0


class RelayError(Exception):
    pass


class Stream:
    """The events of one execution on their way to one HTTP response."""

    # Thousands are open at once in one api process: no per-instance dict.
    __slots__ = ("channel", "local", "ordered", "max_bytes", "confirmed", "_items", "_ready",
                 "_bytes", "_lock", "overflowed", "next_seq", "rejoining")  # fmt: skip

    def __init__(self, channel: str, max_bytes: int, ordered: bool = True, local: bool = False):
        self.channel = channel
        self.local = local  # fed from inside this process (regular mode), not by Redis
        self.ordered = ordered  # one publisher, numbered events (executions); not for push
        self.max_bytes = max_bytes
        self.confirmed = threading.Event()
        # One reader, one or two writers: a list (rarely more than a few items; an empty deque
        # is larger) and a wake-up flag, where a queue.Queue (a lock and three conditions)
        # cost several times that per open stream (docs/performance.md).
        self._items: list[str | Event] = []
        self._ready = threading.Event()
        self._bytes = 0
        self._lock = threading.Lock()
        self.overflowed = False
        self.next_seq = 0
        self.rejoining = False  # its connection dropped: it is being subscribed again

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

    def rejoined(self) -> None:
        """Subscribed again after its connection dropped: what was published meanwhile is to
        be caught up on."""
        self.rejoining = False
        self._push(events.missed())

    def wake(self) -> None:
        """Wake the reader without an event: its `get` returns None at once (a chat socket's
        client sent something, api/chat_socket.py)."""
        self._ready.set()

    def _push(self, item: str | Event) -> None:
        self._items.append(item)
        self._ready.set()

    def get(self, timeout: float) -> Event | None:
        """The next event, or None after `timeout` seconds of silence."""
        deadline = None
        while True:
            if not self._items:
                self._ready.clear()
                if not self._items:  # a push between the check and the clear is not missed
                    if deadline is None:
                        deadline = time.monotonic() + timeout
                    self._ready.wait(max(deadline - time.monotonic(), 0))
            try:
                data = self._items.pop(0)
            except IndexError:
                return None
            event = self._event(data)
            if event is not None:
                return event

    def ready(self) -> Event | None:
        """The next event if one is here already; None at once if not."""
        while self._items:
            event = self._event(self._items.pop(0))
            if event is not None:
                return event
        return None

    def _event(self, data: str | Event) -> Event | None:
        """The event `data` holds; None for a repeat of one already read (a publish retried
        after a timeout that had gone out, worker/publisher.py)."""
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
        if self.ordered and event.seq < self.next_seq:
            return None
        if self.ordered and event.seq != self.next_seq:
            return events.missed(event)  # the reader catches up, then takes this one
        self.next_seq += 1
        return event


class _Shard:
    """One pub/sub connection, its reader, and the channels subscribed on it: the one of the
    api process on a single Redis, one per primary in a cluster. `leaving`: channels whose
    streams ended, to unsubscribe with the next write to the connection (see Relay.unsubscribe)."""

    def __init__(self, name: str, conn):
        self.name = name
        self.conn = conn
        self.channels: set[str] = set()
        self.leaving: list[str] = []
        self.left = threading.Event()  # something was added to `leaving`


class Relay:
    def __init__(
        self,
        redis_url: str,
        max_stream_bytes: int = 8 * 1024 * 1024,
        cluster: bool = False,
        subscribe_timeout: float = SUBSCRIBE_TIMEOUT,
    ):
        self.redis_url = redis_url
        self.subscribe_timeout = subscribe_timeout
        self.max_stream_bytes = max_stream_bytes
        self.cluster = cluster
        # In a cluster, events are published with SPUBLISH to the shard owning the channel's
        # slot, and heard only there (core/redis_clients.py).
        self._subscribe, self._unsubscribe = (
            ("SSUBSCRIBE", "SUNSUBSCRIBE") if cluster else ("SUBSCRIBE", "UNSUBSCRIBE")
        )
        self._streams: dict[str, Stream] = {}
        self._local: dict[str, Stream] = {}
        self._lock = threading.Lock()  # guards the maps below and writes to the connections
        self._shards: dict[str, _Shard] = {}  # by node name ("" on a single Redis)
        self._shard_of: dict[str, _Shard] = {}  # channel -> the shard it is subscribed on
        self._topology: RedisCluster | None = None  # a cluster's slot map
        self._topology_lock = threading.Lock()  # made once, by the first who needs it
        self._stale = False  # read the slot map again before the next lookup
        self._rejoin: set[str] = set()  # channels whose connection dropped, to subscribe again
        self._rejoiner = False  # a thread is subscribing them

    def open_streams(self) -> int:
        return len(self._streams) + len(self._local)

    def subscribe(self, channel: str, ordered: bool = True) -> Stream:
        """A stream of `channel`, once Redis has confirmed the subscription."""
        return self.confirm(self.open(channel, ordered))

    def open(self, channel: str, ordered: bool = True) -> Stream:
        """A stream of `channel`, its subscription sent but not yet confirmed: the caller
        may do other work meanwhile, then `confirm`, or check in a Redis script of its own
        that the subscription is there (api/launcher.py)."""
        stream = Stream(channel, self.max_stream_bytes, ordered)
        try:
            node = self._node_of(channel)
        except (redis.RedisError, OSError) as err:
            raise RelayError(f"cannot subscribe: {err}") from err
        with self._lock:
            if channel in self._streams:
                raise RelayError(f"{channel} is already being relayed")
            self._streams[channel] = stream
            # Twice: a connection that dropped since its last read fails the first write, and
            # a new one is made for the second.
            for attempt in (1, 2):
                try:
                    self._send_subscribe(self._shard(node), channel)
                    break
                except (redis.RedisError, OSError) as err:
                    self._shard_of.pop(channel, None)
                    self._rejoin.discard(channel)
                    self._reset(self._shards.get(node[0]))
                    if attempt == 2:
                        self._streams.pop(channel, None)
                        raise RelayError(f"cannot subscribe: {err}") from err
        return stream

    def confirm(self, stream: Stream) -> Stream:
        """`stream` once Redis has confirmed its subscription (RelayError, unsubscribed, if it
        does not in time)."""
        if not stream.confirmed.wait(self.subscribe_timeout):
            self.unsubscribe(stream)
            raise RelayError("Redis did not confirm the subscription in time")
        return stream

    def warm(self) -> None:
        """Open the shared connection(s) and start their readers now (RelayError if Redis is
        not there; the first subscription then tries again)."""
        try:
            nodes = self._nodes()
        except (redis.RedisError, OSError) as err:
            raise RelayError(f"cannot connect: {err}") from err
        with self._lock:
            for node in nodes:
                try:
                    self._shard(node)
                except (redis.RedisError, OSError) as err:
                    self._reset(self._shards.get(node[0]))
                    raise RelayError(f"cannot connect: {err}") from err

    def open_local(self, channel: str) -> Stream:
        """A stream fed from inside this process (regular mode): no Redis subscription."""
        stream = Stream(channel, self.max_stream_bytes, local=True)
        with self._lock:
            if channel in self._local:
                raise RelayError(f"{channel} is already being relayed")
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
            shard = self._shard_of.pop(stream.channel, None)
            if shard is not None and self._shards.get(shard.name) is shard:
                # Not sent at once: it goes out with the next subscription's write, or within
                # LEAVE_DELAY, several channels in one write. Under load each message's
                # unsubscribe is then no write and no system call of its own; meanwhile
                # whatever Redis still sends on the channel finds no stream and is dropped.
                shard.channels.discard(stream.channel)
                shard.leaving.append(stream.channel)
                shard.left.set()

    # --- where a channel is heard ---------------------------------------------------------
    def _nodes(self) -> list[tuple[str, str, int]]:
        """(name, host, port) of every node the relay listens on."""
        if not self.cluster:
            return [("", "", 0)]
        return [(n.name, n.host, n.port) for n in self._cluster().get_primaries()]

    def _node_of(self, channel: str) -> tuple[str, str, int]:
        if not self.cluster:
            return ("", "", 0)
        cluster = self._cluster()
        node = cluster.nodes_manager.get_node_from_slot(cluster.keyslot(channel))
        return (node.name, node.host, node.port)

    def _cluster(self) -> RedisCluster:
        with self._topology_lock:
            if self._topology is None:
                self._topology = RedisCluster.from_url(self.redis_url, socket_timeout=5)
                self._stale = False
            elif self._stale:
                # A shard's connection broke: a failover may have moved its slots to a replica.
                self._topology.nodes_manager.initialize()
                self._stale = False
            return self._topology

    def _moved(self, channels: list[str]) -> None:
        """The slots of these channels moved (or our map was stale): learn the map again and
        subscribe each on its new owner. Events published in between are missed: those streams
        see a gap in the sequence and end with an error line rather than a wrong answer."""
        try:
            self._cluster().nodes_manager.initialize()
        except (redis.RedisError, OSError) as err:
            log.warning("relay: cannot read the cluster's slots: %s", err)
        for channel in channels:
            try:
                node = self._node_of(channel)
            except (redis.RedisError, OSError):
                node = None
            with self._lock:
                stream = self._streams.get(channel)
                if stream is None:
                    continue
                if node is None:
                    self._drop(channel, "Redis was unreachable: the api lost its connection to it")
                    continue
                old = self._shard_of.pop(channel, None)
                if old is not None:
                    old.channels.discard(channel)
                try:
                    self._send_subscribe(self._shard(node), channel)
                except (redis.RedisError, OSError):
                    self._reset(self._shards.get(node[0]))

    # --- the connections and their readers (call with _lock held) -------------------------
    def _send_subscribe(self, shard: _Shard, channel: str) -> None:
        # Noted before it is sent: the confirmation may be read (and the subscriber go on)
        # before this thread runs again. The channels left since the last write go first, in
        # the same write (a channel left and taken again ends subscribed).
        shard.channels.add(channel)
        self._shard_of[channel] = shard
        conn = shard.conn
        packed = self._packed_leaving(shard) + conn.pack_command(self._subscribe, channel)
        conn.send_packed_command([b"".join(packed)])

    def _packed_leaving(self, shard: _Shard) -> list[bytes]:
        """The UNSUBSCRIBEs of the channels left, one command each (a cluster refuses one
        SUNSUBSCRIBE naming channels of several slots), to go out in one write."""
        leaving, shard.leaving = shard.leaving, []
        return [p for c in leaving for p in shard.conn.pack_command(self._unsubscribe, c)]

    def _send_leaving(self, shard: _Shard) -> None:
        """Unsubscribe, in one write, the channels left that no subscription took along."""
        while True:
            shard.left.wait(LEAVE_IDLE_LOOK)
            time.sleep(LEAVE_DELAY)
            with self._lock:
                if self._shards.get(shard.name) is not shard:
                    return  # reset: the connection and its subscriptions are gone
                shard.left.clear()
                if not shard.leaving:
                    continue
                try:
                    shard.conn.send_packed_command([b"".join(self._packed_leaving(shard))])
                except (redis.RedisError, OSError):
                    self._reset(shard)

    def _shard(self, node: tuple[str, str, int]) -> _Shard:
        name, host, port = node
        shard = self._shards.get(name)
        if shard is None:
            # A subscriber waits for messages indefinitely: no read timeout (redis-py 8 has a
            # 5 s default), TCP keepalive to notice a dead peer.
            options = redis.connection.parse_url(self.redis_url)
            if self.cluster:
                options.update(host=host, port=port)
            pool = redis.ConnectionPool(
                **options,
                protocol=2,
                client_name="mini-n8n-relay",
                socket_timeout=None,
                socket_keepalive=True,
            )
            conn = pool.make_connection()
            conn.connect()
            shard = self._shards[name] = _Shard(name, conn)
            threading.Thread(target=self._dispatch, args=(shard,), daemon=True).start()
            threading.Thread(target=self._send_leaving, args=(shard,), daemon=True).start()
        return shard

    def _reset(self, shard: _Shard | None) -> None:
        """Drop a broken connection; the open streams it carried are subscribed again on a new
        one (`_rejoin_all`); one whose caller waits for its first confirmation gets it then."""
        if shard is None or self._shards.get(shard.name) is not shard:
            return
        del self._shards[shard.name]
        self._stale = self.cluster
        with contextlib.suppress(Exception):  # it is broken already
            shard.conn.disconnect()
        for channel in list(shard.channels):
            stream = self._streams.get(channel)
            if stream is None:
                continue
            self._shard_of.pop(channel, None)
            stream.rejoining = stream.confirmed.is_set()  # events may have been missed
            self._rejoin.add(channel)
        shard.channels.clear()
        shard.leaving.clear()
        shard.left.set()  # its sender of unsubscriptions sees it is gone, and returns
        if self._rejoin and not self._rejoiner:
            self._rejoiner = True
            threading.Thread(target=self._rejoin_all, name="relay-rejoin", daemon=True).start()

    def _rejoin_all(self) -> None:
        """Subscribe again, on new connections, every channel whose connection dropped, trying
        with backoff until done (a stream that ends meanwhile is no longer waited for)."""
        delay = REJOIN_FIRST_DELAY
        while True:
            with self._lock:
                channels = [c for c in self._rejoin if c in self._streams]
                self._rejoin.clear()
                if not channels:
                    self._rejoiner = False
                    return
            failed = self._subscribe_again(channels)
            if not failed:
                delay = REJOIN_FIRST_DELAY
                continue
            with self._lock:
                self._rejoin.update(failed)
            log.warning("relay: cannot subscribe again yet (%d streams wait)", len(failed))
            time.sleep(delay)
            delay = min(delay * 2, REJOIN_MAX_DELAY)

    def _subscribe_again(self, channels: list[str]) -> list[str]:
        """The channels that could not be subscribed again now."""
        failed = []
        for channel in channels:
            try:
                node = self._node_of(channel)
            except (redis.RedisError, OSError):
                failed.append(channel)
                continue
            with self._lock:
                if channel not in self._streams or channel in self._shard_of:
                    continue
                try:
                    self._send_subscribe(self._shard(node), channel)
                except (redis.RedisError, OSError):
                    self._shard_of.pop(channel, None)
                    self._reset(self._shards.get(node[0]))
                    failed.append(channel)
        return failed

    def _drop(self, channel: str, reason: str) -> None:
        stream = self._streams.pop(channel, None)
        self._shard_of.pop(channel, None)
        if stream is not None:
            stream.fail(reason)
            stream.confirmed.set()

    def _dispatch(self, shard: _Shard) -> None:
        while True:
            try:
                reply = shard.conn.read_response()
            except (redis.exceptions.MovedError, redis.exceptions.AskError):
                # A subscription sent to a node that no longer owns the slot: the channels of
                # this shard that are not confirmed yet are sent again where they now belong.
                with self._lock:
                    streams = [self._streams.get(c) for c in shard.channels]
                    waiting = [s.channel for s in streams if s and not s.confirmed.is_set()]
                threading.Thread(target=self._moved, args=(waiting,), daemon=True).start()
                continue
            except (redis.RedisError, OSError, AttributeError) as err:
                with self._lock:
                    if self._shards.get(shard.name) is shard:
                        log.warning("relay connection lost: %s", err)
                        self._reset(shard)
                return
            try:
                self._route(shard, reply)
            except Exception:  # one bad message must not end every stream of this process
                log.exception("relay: a message could not be routed")

    def _route(self, shard: _Shard, reply) -> None:
        if not isinstance(reply, list) or len(reply) < 3:
            return
        kind, channel, data = reply[0], reply[1], reply[2]
        kind = kind.decode() if isinstance(kind, bytes) else kind
        channel = channel.decode() if isinstance(channel, bytes) else channel
        stream = self._streams.get(channel)
        if stream is None:
            return
        if kind in ("message", "smessage"):
            text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
            if not stream.put(text):
                self.unsubscribe(stream)
        elif kind in ("subscribe", "ssubscribe"):
            if stream.rejoining:
                stream.rejoined()
            stream.confirmed.set()
        elif kind == "sunsubscribe" and self._shard_of.get(channel) is shard:
            # Not asked for: the channel's slot moved to another shard (a resharding).
            threading.Thread(target=self._moved, args=([channel],), daemon=True).start()
