"""Redis's and the broker's errors in words fit for execution records and clients.

redis-py names the server it could not reach ("Error 111 connecting to localhost:6379.
Connection refused."), and kombu repeats that text when Redis is Celery's broker. A record is
read by the editor and REST, an error line by a chat's public client: where Redis listens is no
business of theirs, so `error_text` says what went wrong with Redis and drops the address. The
process's own log lines keep redis-py's text: they are for operators.
"""

from __future__ import annotations

from redis import exceptions

# Most specific first: BusyLoadingError is a ConnectionError, AuthenticationError too.
_SAID: tuple[tuple[type[Exception], str], ...] = (
    (exceptions.BusyLoadingError, "Redis is still loading its data"),
    (exceptions.AuthenticationError, "Redis refused the password"),
    (exceptions.AuthorizationError, "Redis refused the command to this user"),
    (exceptions.MaxConnectionsError, "no Redis connection was free"),
    (exceptions.TimeoutError, "Redis did not answer in time"),
    (exceptions.ConnectionError, "Redis is unreachable"),
    (exceptions.RedisClusterException, "the Redis Cluster is unreachable"),
)


def error_text(err: BaseException) -> str:
    """`str(err)`, unless it is (or was raised because of) a Redis error: then what happened to
    Redis, without its host and port."""
    cause = _redis_cause(err)
    if cause is None:
        return str(err)
    for kind, said in _SAID:
        if isinstance(cause, kind):
            return said
    if isinstance(cause, exceptions.ResponseError):
        return f"Redis answered: {cause}"  # the server's own words, which name no address
    return f"Redis failed ({type(cause).__name__})"


def _redis_cause(err: BaseException) -> Exception | None:
    """The Redis error in `err`'s chain (kombu and Celery raise their own types from it)."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        if isinstance(current, exceptions.RedisError | exceptions.RedisClusterException):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None
