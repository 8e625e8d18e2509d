"""The engine's own tests run without a network, a Redis server or gevent (the engine does no
I/O of its own: tests/test_layout.py). Redis Chat Memory is lent fakeredis here; what it does on a
real Redis is tests/memory's. Any connection a test opens fails it."""

from __future__ import annotations

import socket

import fakeredis
import pytest


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a test of the engine opened a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)


@pytest.fixture
def fake_redis():
    """A client of an in-memory Redis of this test's own (decode_responses, as the runners')."""
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer(), decode_responses=True)
    yield client
    client.close()
