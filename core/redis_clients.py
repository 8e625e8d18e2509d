"""Clients of the deployment's Redis: one server, or a Redis Cluster (MINI_N8N_REDIS_CLUSTER).

Every process builds its clients here, so the choice is made in one place. What differs in a
cluster and matters to callers:
- keys that one command, script or transaction touches together share a hash tag (core/keys.py
  builds them so; `Keys(cluster=True)`);
- pub/sub of executions is sharded: events go out with SPUBLISH to the shard owning the
  channel's slot, and the api's relay listens with SSUBSCRIBE on that shard (`publish` below,
  api/relay.py). Plain PUBLISH in a cluster is broadcast to every node, which costs every node
  every token; only the workers' stop broadcast (rare, and meant for all) stays plain.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import redis
from redis.cluster import ClusterPipeline, RedisCluster

Client = redis.Redis | RedisCluster
# The first line of a script that carries work in flight to its end (a claim, a lease's renewal,
# a wait, an end): Redis runs it even when full (maxmemory, noeviction), where it refuses every
# script that starts new work (a create, a reply). So a full Redis stops new chats at the door
# (503) while the ones running finish, rather than strand them half done. (Redis 7's flags.)
IN_FLIGHT = "#!lua flags=allow-oom\n"
_JOIN_BYTES = 1024 * 1024


def connect(url: str, cluster: bool = False, *, blocking_pool: int = 0, **options: Any) -> Any:
    """A client of `url`: with `cluster`, a cluster client that `url` (any node) introduces.

    `blocking_pool` > 0 caps the connections (per node in a cluster) and makes a caller wait
    for a free one rather than open more: the connection count stays constant under load."""
    if blocking_pool:
        options = {
            **options,
            "max_connections": blocking_pool,
            "connection_pool_class": redis.BlockingConnectionPool,
        }
    if cluster:
        return RedisCluster.from_url(url, **options)
    if blocking_pool:
        pool_class = options.pop("connection_pool_class")
        return redis.Redis(connection_pool=pool_class.from_url(url, **options))
    return redis.Redis.from_url(url, **options)


def pools(client: Any) -> list[redis.ConnectionPool]:
    """The connection pools behind `client`: one, or one per primary of a cluster."""
    if isinstance(client, RedisCluster):
        return [node.redis_connection.connection_pool for node in client.get_primaries()]
    return [client.connection_pool]


def is_cluster(client: Any) -> bool:
    """Is `client` (or pipeline) one of a Redis Cluster?"""
    return isinstance(client, RedisCluster | ClusterPipeline)


def publish(client: Any, channel: str, message: str | bytes) -> Any:
    """Publish an execution's or an editor's event: sharded in a cluster, plain otherwise.
    `client` may be a pipeline, which queues the command."""
    if is_cluster(client):
        return client.spublish(channel, message)
    return client.publish(channel, message)


def publish_command(client: Any) -> str:
    """The command a Lua script publishes with (the channel must then be one of its KEYS)."""
    return "SPUBLISH" if is_cluster(client) else "PUBLISH"


def script_sha(source: str) -> str:
    """The SHA-1 Redis names a script by (EVALSHA)."""
    return hashlib.sha1(source.encode()).hexdigest()


def script(client: Any, source: str) -> Any:
    """A Lua script to call as `run(keys=[...], args=[...])`: a redis-py Script, or on one
    Redis the same script run the quick way (`Quick`)."""
    registered = client.register_script(source)
    quick = Quick.of(client)
    if quick is None:
        return registered
    return _QuickScript(quick, registered)


class Quick:
    """Commands written and read on a connection of a plain client's pool, without the layers
    redis-py puts around each (the command wrappers, its retry closure, observability hooks,
    response callbacks, a Pipeline object), which cost more CPU than the command's own I/O
    (docs/performance.md), on the steps every chat message takes (the api's create; the worker's
    claim, memory, publishes and end). So only commands whose raw reply is their answer. The pool's
    own checks stay (a connection with unread data is not handed out; the health check's PING). A
    connection that may hold half a reply (an error, a greenlet killed mid-read) is closed, never
    handed back as it is."""

    __slots__ = ("client", "pool")

    def __init__(self, client: redis.Redis):
        self.client, self.pool = client, client.connection_pool

    @classmethod
    def of(cls, client: Any) -> Quick | None:
        """For a plain redis.Redis only: not a cluster, a pipeline or a test double."""
        return cls(client) if type(client) is redis.Redis else None

    def call(self, *args: Any, fallback: Callable[[], Any] | None = None) -> Any:
        """One command's reply. A broken connection falls back to redis-py's own call (or to
        `fallback`), which retries it as it always did."""
        try:
            (reply,) = self.exchange([args])
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
            return fallback() if fallback is not None else self.client.execute_command(*args)
        if isinstance(reply, redis.exceptions.ResponseError):
            raise reply
        return reply

    def exchange(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        """The replies of `commands`, sent in one write (an error reply is returned, not
        raised: every reply is read); what breaks the connection is raised."""
        pool = self.pool
        conn = pool.get_connection()
        try:
            packed = [p for c in commands for p in conn.pack_command(*c)]
            # One write, joined; a large value (a request body) goes as the pieces redis-py
            # packed it in, rather than copied into one more buffer of its size.
            if sum(len(p) for p in packed) < _JOIN_BYTES:
                packed = [b"".join(packed)]
            conn.send_packed_command(packed)
            replies = []
            for _ in commands:
                try:
                    replies.append(conn.read_response())
                except redis.exceptions.ResponseError as err:
                    replies.append(err)
        except BaseException:
            conn.disconnect()
            pool.release(conn)
            raise
        pool.release(conn)
        return replies


class _QuickScript:
    """A script called the quick way; a script Redis forgot (NOSCRIPT) or a broken connection
    falls back to redis-py's Script, which loads it and retries as it always did."""

    __slots__ = ("quick", "registered", "sha")

    def __init__(self, quick: Quick, registered: Any):
        self.quick, self.registered = quick, registered
        self.sha = registered.sha

    @property
    def script(self) -> str:
        return self.registered.script

    def __call__(self, keys: list[Any], args: list[Any]) -> Any:
        def again() -> Any:
            return self.registered(keys=keys, args=args)

        try:
            return self.quick.call("EVALSHA", self.sha, len(keys), *keys, *args, fallback=again)
        except redis.exceptions.NoScriptError:
            return again()
