"""Redis clients for the Redis Chat Memory's own `redis` credential.

n8n's Redis memory always names a credential (`"credentials": {"redis": {"id", "name"}}`) with
the fields host, port, password, database, user and ssl. A worker builds one client per distinct
credential and reuses it (with its connection pool) for every execution it runs.

A deployment that configures no `redis` credential at all keeps chat memory in its own Redis
(REDIS_URL): an n8n export then runs with only its model credential configured. Once any `redis`
credential is configured, a reference that matches none of them is an error naming it, never a
silent switch to another server.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping
from typing import Any

import orjson
import redis

from core.credentials import CredentialError

TYPE = "redis"
MAX_CLIENTS = 16  # distinct Redis credentials per worker process; the oldest is dropped beyond


class RedisConnections:
    """`services.redis_for_credential`: a credential reference -> a redis.Redis client."""

    def __init__(self, credentials: Any, default: redis.Redis | None):
        self._credentials = credentials  # a CredentialStore, or None when none could be loaded
        self._default = default
        self._clients: dict[str, redis.Redis] = {}
        self._lock = threading.Lock()

    def __call__(self, ref: Mapping[str, Any] | None) -> redis.Redis:
        if not self._has_redis_credentials():
            if self._default is None:
                raise CredentialError("no redis credential is configured and REDIS_URL is unset")
            return self._default
        credential = self._credentials.resolve(TYPE, ref)  # CredentialError names the ref
        # Keyed by a digest: the cache holds no secret of its own.
        digest = hashlib.sha256(_canonical(credential)).hexdigest()
        with self._lock:
            client = self._clients.get(digest)
            if client is None:
                client = _client(credential)
                if len(self._clients) >= MAX_CLIENTS:
                    self._clients.pop(next(iter(self._clients))).close()
                self._clients[digest] = client
            return client

    def _has_redis_credentials(self) -> bool:
        return self._credentials is not None and self._credentials.has_type(TYPE)

    def __repr__(self) -> str:
        return f"RedisConnections({len(self._clients)} clients)"


def _client(credential) -> redis.Redis:
    name = getattr(credential, "name", TYPE)
    try:
        port = int(credential.get("port") or 6379)
        database = int(credential.get("database") or 0)
    except (TypeError, ValueError):
        raise CredentialError(
            f'credential "{name}" of type redis: port and database must be numbers'
        ) from None
    return redis.Redis(
        host=str(credential.get("host") or "localhost"),
        port=port,
        db=database,
        username=credential.get("user") or None,
        password=credential.get("password") or None,
        ssl=bool(credential.get("ssl")),
        decode_responses=True,
        socket_connect_timeout=5,  # an unreachable server fails the turn, not hangs it
        health_check_interval=30,
        client_name="mini-n8n-memory",
    )


def _canonical(credential: Mapping[str, Any]) -> bytes:
    """The credential as JSON with sorted keys: the same text for the same credential."""
    try:
        return orjson.dumps(credential, option=orjson.OPT_SORT_KEYS)
    except (TypeError, orjson.JSONEncodeError):  # what orjson will not write (a huge integer)
        return json.dumps(credential, sort_keys=True).encode()
