"""core/redis_errors.py: Redis's and the broker's errors, for records and clients, without the
address redis-py names (real clients against a real server and a closed port)."""

from __future__ import annotations

import pytest
import redis
from kombu import Connection
from redis.backoff import NoBackoff
from redis.retry import Retry

from core.redis_errors import error_text
from mini_n8n.redis_server import free_port


@pytest.fixture(scope="module")
def closed_port() -> int:
    return free_port()


def unretried(port: int) -> redis.Redis:
    return redis.Redis(port=port, socket_connect_timeout=2, retry=Retry(NoBackoff(), 0))


def raised(call) -> BaseException:
    with pytest.raises(Exception) as info:
        call()
    return info.value


def test_a_refused_connection_says_redis_is_unreachable_without_host_or_port(closed_port):
    err = raised(unretried(closed_port).ping)
    assert f"localhost:{closed_port}" in str(err)  # what redis-py says, for the log
    assert error_text(err) == "Redis is unreachable"


def test_a_broker_error_raised_from_a_redis_error_is_named_the_same(closed_port):
    def send():
        url = f"redis://localhost:{closed_port}//"
        with Connection(url, connect_timeout=2, transport_options={"max_retries": 0}) as conn:
            conn.SimpleQueue("q").put("x")

    err = raised(send)
    assert f"localhost:{closed_port}" in str(err)
    assert error_text(err) == "Redis is unreachable"


def test_a_wrapped_redis_error_keeps_the_wrapper_out_and_the_address_out(closed_port):
    try:
        try:
            unretried(closed_port).ping()
        except redis.ConnectionError as inner:
            raise RuntimeError(f"cannot connect: {inner}") from inner
    except RuntimeError as err:
        assert error_text(err) == "Redis is unreachable"


def test_the_servers_own_answer_is_kept(redis_url):
    client = redis.Redis.from_url(redis_url)
    err = raised(lambda: client.execute_command("NO-SUCH-COMMAND"))
    assert error_text(err).startswith("Redis answered: unknown command")
    client.close()


def test_other_errors_say_what_they_say():
    assert error_text(ValueError("the items are gone")) == "the items are gone"
