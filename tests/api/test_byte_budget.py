"""The budget of bytes in flight (api/admission.py `ByteBudget`): room is taken as bytes arrive,
a large body waits for room, a small one never does, and bodies that each hold part of the room
and wait for more never wait on one another for ever."""

from __future__ import annotations

import threading

from api.admission import ByteBudget, Held
from tests.waiting import wait_until


def _taking(holder: Held, size: int, wait: float = 30.0) -> tuple[threading.Thread, list[bool]]:
    """`holder.take(size, wait)` in a thread: the thread, and where its answer goes."""
    answer: list[bool] = []
    thread = threading.Thread(target=lambda: answer.append(holder.take(size, wait)))
    thread.start()
    return thread, answer


def _waits(budget: ByteBudget, *holders: Held) -> None:
    wait_until(lambda: set(holders) <= budget._waiting, 10, "the takes to wait for room")


def test_a_read_waits_for_room_until_another_body_gives_its_room_back():
    budget = ByteBudget(100)
    first, second = Held(budget), Held(budget)
    assert first.take(100, wait=1.0)
    thread, answer = _taking(second, 40)
    _waits(budget, second)
    first.release()
    thread.join(10)
    assert answer == [True]
    assert budget.held == 40


def test_a_read_that_finds_no_room_in_its_wait_is_refused_and_takes_nothing():
    budget = ByteBudget(100)
    first, second = Held(budget), Held(budget)
    assert first.take(100, wait=1.0)
    assert not second.take(1, wait=0.0)
    assert (budget.held, second.size) == (100, 0)


def test_a_small_body_takes_its_bytes_at_once_past_the_total_and_is_counted():
    budget = ByteBudget(100)
    large, small = Held(budget), Held(budget)
    assert large.take(100, wait=1.0)
    assert small.take(50, wait=None)
    assert budget.held == 150
    small.release()
    assert budget.held == 100


def test_bodies_that_each_hold_part_and_wait_for_more_go_on_one_past_the_total_at_a_time():
    budget = ByteBudget(100)
    bodies = [Held(budget) for _ in range(3)]
    for body, size in zip(bodies, (40, 35, 25), strict=True):
        assert body.take(size, wait=1.0)
    # The first to find no room goes on past the total, alone; the others wait for room.
    thread, answer = _taking(bodies[0], 10)
    thread.join(10)
    assert answer == [True]
    assert budget.held == 110
    waiting = [_taking(body, 10) for body in bodies[1:]]
    _waits(budget, *bodies[1:])
    bodies[0].release()  # it started its execution: its room is free, and so is the excess
    for thread, answer in waiting:
        thread.join(10)
        assert answer == [True]
    assert budget.held == 35 + 10 + 25 + 10
