"""Admission: what one api process lets in at once.

- **Start turns.** Starting a stream takes a few Redis round trips (the webhook lookup, the
  execution record, the subscription, the enqueue) on a small fixed pool. A burst of thousands
  of requests used to queue on that pool, and those that waited longer than the pool's timeout
  failed. They now wait here, in arrival order and holding nothing, for one of `max_starting`
  turns; the open stream that follows needs no turn. A request that cannot get a turn in
  `start_wait_seconds` is answered as overload: 503 JSON with Retry-After, never a 500.
- **Turns are for work, never for waiting on a client.** A request takes its turns only once
  its body is in (api/bodies.py `receive`, before the view runs): a client that sends slowly
  holds a connection and the bytes it sent, never a turn others need.
- **Bytes in flight** (`ByteBudget`). Bodies and chat socket messages are held whole while
  they arrive; the budget bounds how many bytes of them the process holds at once, so that N
  clients sending large bodies together cannot make it hold N of them.
"""

from __future__ import annotations

import contextlib
import threading
import time
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
        """For a large body, the one turn of large bodies: while it is parsed and enqueued it
        exists several times over (bytes, values, the task), so they go one at a time and the
        api's memory stays bounded whatever clients send at once. Taken once the body is in."""
        if not large:
            yield
            return
        if not self._large_body.acquire(timeout=self.wait_seconds):
            raise overloaded()
        try:
            yield
        finally:
            self._large_body.release()

    @contextlib.contextmanager
    def turn(self) -> Iterator[Turn]:
        """A turn for the request's start; given back on the way out at the latest."""
        if not self._turns.acquire(timeout=self.wait_seconds):
            raise overloaded()
        turn = Turn(self._turns)
        try:
            yield turn
        finally:
            turn.release()


def overloaded() -> ApiError:
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


class ByteBudget:
    """Bytes of bodies and socket messages held while they arrive, at most `total` at once
    (MINI_N8N_BODY_BUFFER_BYTES). Taken a read at a time, before the read, so a slow sender
    holds only what it sent; given back once its request started or failed."""

    def __init__(self, total: int):
        self.total = total
        self.held = 0
        self._freed = threading.Condition()

    def take(self, size: int, wait: float | None) -> bool:
        """`size` more bytes. `wait=None`: at once, room or not (a small body: the budget
        counts it, and bounds the others). Else wait up to `wait` seconds for room (for more
        than the whole budget: for it to be empty); False if there was none by then."""
        deadline = time.monotonic() + (wait or 0.0)
        with self._freed:
            while wait is not None and not self._room_for(size):
                left = deadline - time.monotonic()
                if left <= 0 or not self._freed.wait(left):
                    return False
            self.held += size
            return True

    def _room_for(self, size: int) -> bool:
        return self.held == 0 or self.held + size <= self.total

    def give(self, size: int) -> None:
        if size <= 0:
            return
        with self._freed:
            self.held -= size
            self._freed.notify_all()


class Held:
    """What one body or socket message took from the budget, given back once (`release`)."""

    __slots__ = ("budget", "size")

    def __init__(self, budget: ByteBudget):
        self.budget = budget
        self.size = 0

    def take(self, size: int, wait: float | None) -> bool:
        if not self.budget.take(size, wait):
            return False
        self.size += size
        return True

    def give(self, size: int) -> None:
        size = min(size, self.size)
        self.size -= size
        self.budget.give(size)

    def release(self) -> None:
        self.give(self.size)
