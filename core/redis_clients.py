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

from typing import Any

import redis
from redis.cluster import ClusterPipeline, RedisCluster

Client = redis.Redis | RedisCluster


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


def script(client: Any, source: str) -> Any:
    """A Lua script to call as `run(keys=[...], args=[...])`: a redis-py Script, or on one
    Redis the same script run by `_QuickScript`."""
    registered = client.register_script(source)
    if is_cluster(client):
        return registered
    return _QuickScript(client.connection_pool, registered)


class _QuickScript:
    """EVALSHA written and read on a connection of the client's pool, without the layers redis-py
    puts around a command (the Script and command wrappers, its retry closure, observability
    hooks, response callbacks): about half the client's CPU for a call, on the steps every
    chat message takes (the api's create, the worker's claim and end). The pool's own checks
    stay (a connection with unread data is not handed out; the health check's PING). Whatever
    goes wrong falls back to redis-py's own call, which loads a missing script and retries a
    broken connection as it always did; a connection that may hold half a reply (an error or a
    greenlet killed mid-read) is closed, never handed back as it is."""

    __slots__ = ("pool", "registered", "sha")

    def __init__(self, pool: redis.ConnectionPool, registered: Any):
        self.pool, self.registered = pool, registered
        self.sha = registered.sha

    @property
    def script(self) -> str:
        return self.registered.script

    def __call__(self, keys: list[Any], args: list[Any]) -> Any:
        conn = self.pool.get_connection()
        try:
            conn.send_command("EVALSHA", self.sha, len(keys), *keys, *args)
            reply = conn.read_response()
        except (redis.exceptions.NoScriptError, redis.exceptions.ConnectionError,
                redis.exceptions.TimeoutError):  # fmt: skip
            self._drop(conn)
            return self.registered(keys=keys, args=args)
        except redis.exceptions.ResponseError:  # the script's own error: a whole reply was read
            self.pool.release(conn)
            raise
        except BaseException:
            self._drop(conn)
            raise
        self.pool.release(conn)
        return reply

    def _drop(self, conn: Any) -> None:
        """Closed, then handed back: the pool opens it again when it is next taken."""
        conn.disconnect()
        self.pool.release(conn)
