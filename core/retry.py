"""Retrying a step while Redis is briefly unreachable (a restart, a failover, a pause).

Only errors that say nothing happened for certain are retried: a refused or broken connection,
a timeout, a server still loading. Every step retried here is idempotent (core/executions.py:
a claim or an end recognises its own earlier write), so a retry after a timeout whose command
did run changes nothing twice. Past its bound the last error is raised: every state has its own
way out after that (core/liveness.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from redis import exceptions

T = TypeVar("T")

TRANSIENT = (
    exceptions.ConnectionError,  # refused, reset, no connection free in the pool, still loading
    exceptions.TimeoutError,
    exceptions.ClusterDownError,
    exceptions.TryAgainError,
    exceptions.MasterDownError,
)
FIRST_DELAY, MAX_DELAY = 0.1, 2.0
# How long a step keeps trying by default: beyond a Redis restart or a failover, short beside
# the bounds that end an execution nobody can finish (the lease, the queue timeout).
RETRY_SECONDS = 60.0


def retrying(
    step: Callable[[], T],
    what: str,
    log: logging.Logger,
    bound: float = RETRY_SECONDS,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    delay, deadline = FIRST_DELAY, time.monotonic() + bound
    while True:
        try:
            return step()
        except TRANSIENT as err:
            if time.monotonic() + delay > deadline:
                raise
            log.warning("%s: Redis unreachable, retrying in %.1f s: %s", what, delay, err)
            sleep(delay)
            delay = min(delay * 2, MAX_DELAY)
