"""The Redis Chat Memory's own `redis` credential (n8n exports always name one)."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
import redis

from core.credentials import CredentialError, CredentialStore
from core.redis_credentials import RedisConnections

PASSWORD = "redis-SECRET-pw-5555"
REF = {"id": "HbXX", "name": "Redis account"}


def redis_credential(redis_url: str, name: str = "Redis account", **data) -> dict:
    at = urlsplit(redis_url)
    return {
        "id": f"id-{name}",
        "name": name,
        "type": "redis",
        "data": {"host": at.hostname, "port": at.port, "database": 0, **data},
    }


def test_without_a_redis_credential_the_deployments_redis_is_used(redis_client):
    connect = RedisConnections(CredentialStore([]), redis_client)
    assert connect(REF) is redis_client
    assert RedisConnections(None, redis_client)(REF) is redis_client  # no credentials file


def test_a_configured_credential_gets_its_own_client_built_once(redis_url, redis_client):
    store = CredentialStore([redis_credential(redis_url, database=3)])
    connect = RedisConnections(store, redis_client)
    client = connect(REF)
    assert client is not redis_client and connect(REF) is client
    assert client.connection_pool.connection_kwargs["db"] == 3
    assert client.ping()


def test_an_unmatched_reference_is_an_error_naming_it_not_a_silent_fallback(
    redis_url, redis_client
):
    store = CredentialStore(
        [redis_credential(redis_url, "Cache"), redis_credential(redis_url, "Queue")]
    )
    with pytest.raises(CredentialError, match='credential "Redis account"'):
        RedisConnections(store, redis_client)(REF)


def test_the_password_is_sent_but_never_shown(redis_url, redis_client):
    store = CredentialStore([redis_credential(redis_url, password=PASSWORD, user="bob")])
    client = RedisConnections(store, redis_client)(REF)
    assert client.connection_pool.connection_kwargs["password"] == PASSWORD
    assert PASSWORD not in repr(client) and PASSWORD not in repr(store)
    with pytest.raises(redis.RedisError) as failed:  # the test server knows no such user
        client.ping()
    assert PASSWORD not in str(failed.value)


def test_a_port_that_is_not_a_number_is_a_readable_error(redis_client):
    store = CredentialStore([{"name": "Redis account", "type": "redis", "data": {"port": "x"}}])
    with pytest.raises(CredentialError, match="port and database must be numbers"):
        RedisConnections(store, redis_client)(REF)
