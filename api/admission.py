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
    (MINI_N8N_BODY_BUFFER_BYTES), counted as they arrive: a read takes room for what it asks
    before it reads, so a slow sender holds only what it sent (room is never reserved for what
    a client merely announced: that would let a few trickling clients hold all of it). Given
    back once its request started or failed.

    Bodies that each hold part of the room and wait for more would wait on one another for
    ever. So one body at a time may go on past `total` (`_borrower`): of those that wait and
    hold room, the one holding the most, until it gives its room back. The budget is exceeded
    by at most the rest of that one body, and some body always finishes."""

    def __init__(self, total: int):
        self.total = total
        self.held = 0
        self._waiting: set[Held] = set()
        self._borrower: Held | None = None
        self._freed = threading.Condition()

    def take(self, holder: Held, size: int, wait: float | None) -> bool:
        """`size` more bytes for `holder`. `wait=None`: at once, room or not (a small body: the
        budget counts it, and bounds the others). Else wait up to `wait` seconds for room;
        False if there was none by then."""
        deadline = time.monotonic() + (wait or 0.0)
        with self._freed:
            if wait is not None:
                self._waiting.add(holder)
                try:
                    while not self._may_take(holder, size):
                        left = deadline - time.monotonic()
                        if left <= 0 or not self._freed.wait(left):
                            return False
                finally:
                    self._waiting.discard(holder)
            self.held += size
            return True

    def _may_take(self, holder: Held, size: int) -> bool:
        if self.held + size <= self.total or not self.held:
            return True
        if self._borrower is None and holder.size > 0:
            holding = [h for h in self._waiting if h.size > 0]
            if holder is max(holding, key=lambda h: (h.size, id(h))):
                self._borrower = holder
        return self._borrower is holder

    def give(self, holder: Held, size: int) -> None:
        with self._freed:
            self.held -= size
            if holder is self._borrower and not holder.size:
                self._borrower = None
            self._freed.notify_all()


class Held:
    """What one body or socket message took from the budget, given back once (`release`)."""

    __slots__ = ("budget", "size")

    def __init__(self, budget: ByteBudget):
        self.budget = budget
        self.size = 0

    def take(self, size: int, wait: float | None) -> bool:
        if not self.budget.take(self, size, wait):
            return False
        self.size += size
        return True

    def give(self, size: int) -> None:
        size = min(size, self.size)
        self.size -= size
        if size > 0:
            self.budget.give(self, size)

    def release(self) -> None:
        self.give(self.size)
