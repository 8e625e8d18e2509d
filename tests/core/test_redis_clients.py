"""The quick way the hot steps' scripts run (core/redis_clients.py `script`): the same answers
as redis-py's Script, and the same ways out when the script or the connection is missing."""

from __future__ import annotations

import pytest
import redis

from core.redis_clients import connect, script

SOURCE = "redis.call('INCR', KEYS[1]); return {redis.call('GET', KEYS[1]), ARGV[1]}"


@pytest.fixture
def client(redis_url):
    client = connect(redis_url, blocking_pool=2, decode_responses=True)
    yield client
    client.close()


def test_a_script_answers_as_redis_pys_own(client, keys):
    run = script(client, SOURCE)
    assert run(keys=[keys.prefix + "n"], args=["é"]) == ["1", "é"]
    assert client.register_script(SOURCE)(keys=[keys.prefix + "n"], args=["é"]) == ["2", "é"]


def test_a_script_redis_forgot_is_loaded_again(client, keys):
    run = script(client, SOURCE)
    run(keys=[keys.prefix + "n"], args=["a"])
    client.script_flush()
    assert run(keys=[keys.prefix + "n"], args=["a"]) == ["2", "a"]


def test_a_scripts_own_error_is_raised_and_its_connection_serves_the_next(client, keys):
    failing = script(client, "return redis.error_reply('NOPE not today')")
    with pytest.raises(redis.ResponseError, match="not today"):
        failing(keys=[], args=[])
    assert script(client, SOURCE)(keys=[keys.prefix + "n"], args=["b"]) == ["1", "b"]


def test_a_connection_broken_under_it_is_replaced_and_the_call_answers(client, redis_client, keys):
    run = script(client, SOURCE)
    run(keys=[keys.prefix + "n"], args=["c"])
    killed = redis_client.client_kill_filter(_type="normal", skipme=True)  # as a restart does
    assert killed >= 1
    assert run(keys=[keys.prefix + "n"], args=["c"]) == ["2", "c"]


def test_a_call_interrupted_mid_reply_leaves_no_reply_behind(client, keys, monkeypatch):
    """A caller stopped between its command and the reply (a greenlet killed, a signal): the
    connection is closed, so the next caller never reads the answer meant for this one."""
    run = script(client, SOURCE)
    run(keys=[keys.prefix + "n"], args=["d"])
    conn = client.connection_pool.get_connection()
    client.connection_pool.release(conn)

    def interrupted(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr(conn, "read_response", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run(keys=[keys.prefix + "n"], args=["d"])
    monkeypatch.undo()
    assert conn._sock is None  # closed, not handed out with a reply waiting in it
    assert run(keys=[keys.prefix + "n"], args=["e"]) == ["3", "e"]
