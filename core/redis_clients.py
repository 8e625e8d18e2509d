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
