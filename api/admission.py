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
        self._large_body = threading.BoundedSemaphore(1)
        self.wait_seconds = wait_seconds

    @contextlib.contextmanager
    def body_turn(self, large: bool) -> Iterator[None]:
        """For a large body, the one turn of large bodies: while it is read, parsed and enqueued
        it exists several times over (bytes, values, the task), so they go one at a time and
        the api's memory stays bounded whatever clients send at once."""
        if not large:
            yield
            return
        if not self._large_body.acquire(timeout=self.wait_seconds):
            raise _overloaded()
        try:
            yield
        finally:
            self._large_body.release()

    @contextlib.contextmanager
    def turn(self) -> Iterator[Turn]:
        """A turn for the request's start; given back on the way out at the latest."""
        if not self._turns.acquire(timeout=self.wait_seconds):
            raise _overloaded()
        turn = Turn(self._turns)
        try:
            yield turn
        finally:
            turn.release()


def _overloaded() -> ApiError:
    return ApiError(
        503,
        "The server is overloaded; try again shortly",
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )


class Turn:
    def __init__(self, turns: threading.BoundedSemaphore):
        self._turns: threading.BoundedSemaphore | None = turns

    def release(self) -> None:
        """Give the turn back (once): the execution has started, and waiting for its outcome
        (lastNode, responseNode) must not hold up the start of others."""
        turns, self._turns = self._turns, None
        if turns is not None:
            turns.release()
