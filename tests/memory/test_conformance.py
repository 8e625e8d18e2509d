"""Every memory backend passes the same conformance suite."""

from __future__ import annotations

import fakeredis
import pytest
import redis

from memory.redis import RedisMemory
from memory.window import InProcessMemory
from tests.memory.conformance import MemoryConformance


class TestInProcessMemory(MemoryConformance):
    @pytest.fixture
    def memory(self):
        return InProcessMemory()


class TestRedisMemory(MemoryConformance):
    """The real server, a client decoding responses (as the app uses it)."""

    @pytest.fixture
    def memory(self, redis_client, keys):
        return RedisMemory(redis_client, keys)


class TestRedisMemoryWithBytesClientAndTtl(MemoryConformance):
    """The real server, a client returning bytes, and the EXPIRE path of add_turn."""

    @pytest.fixture
    def memory(self, redis_url, keys):
        client = redis.Redis.from_url(redis_url)
        yield RedisMemory(client, keys, ttl_seconds=600)
        client.close()


class TestRedisMemoryOnFakeRedis(MemoryConformance):
    @pytest.fixture
    def memory(self, keys):
        client = fakeredis.FakeRedis(server=fakeredis.FakeServer(), decode_responses=True)
        return RedisMemory(client, keys)
