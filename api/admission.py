"""Admission: how many webhook requests one api process starts at once.

Starting a stream takes a few Redis round trips (the webhook lookup, the execution record, the
subscription, the enqueue) on a small fixed pool. A burst of thousands of requests used to queue
on that pool, and those that waited longer than the pool's timeout failed. They now wait here,
in arrival order and holding nothing, for one of `max_starting` turns; the open stream that
follows needs no turn. A request that cannot get a turn in `start_wait_seconds` is answered as
overload: 503 JSON with Retry-After, never a 500.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from api.errors import ApiError

RETRY_AFTER_SECONDS = 5


class Admission:
    def __init__(self, max_starting: int, wait_seconds: float):
        self._turns = threading.BoundedSemaphore(max_starting)
        self.wait_seconds = wait_seconds

    @contextlib.contextmanager
    def turn(self) -> Iterator[Turn]:
        """A turn for the request's start; given back on the way out at the latest."""
        if not self._turns.acquire(timeout=self.wait_seconds):
            raise ApiError(
                503,
                "The server is overloaded; try again shortly",
                headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
            )
        turn = Turn(self._turns)
        try:
            yield turn
        finally:
            turn.release()


class Turn:
    def __init__(self, turns: threading.BoundedSemaphore):
        self._turns: threading.BoundedSemaphore | None = turns

    def release(self) -> None:
        """Give the turn back (once): the execution has started, and waiting for its outcome
        (lastNode, responseNode) must not hold up the start of others."""
        turns, self._turns = self._turns, None
        if turns is not None:
            turns.release()
