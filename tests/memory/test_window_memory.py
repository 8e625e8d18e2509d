"""InProcessMemory forgets idle sessions the way n8n's Simple Memory does (cleanupStaleBuffers)."""

from __future__ import annotations

import pytest

from memory.messages import ai, human
from memory.window import InProcessMemory

MINUTE = 60.0
TURN = [human("Hi"), ai("Hello!")]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, minutes: float) -> None:
        self.now += minutes * MINUTE


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def memory(clock):
    return InProcessMemory(clock=clock)


def test_a_session_idle_for_59_minutes_is_kept(memory, clock):
    memory.add_turn("s1", TURN)
    clock.advance(59)

    assert memory.messages("s1") == TURN


def test_a_session_idle_for_61_minutes_is_dropped(memory, clock):
    memory.add_turn("s1", TURN)
    clock.advance(61)

    assert memory.messages("s1") == []
    assert memory.sessions() == []


def test_a_session_idle_for_exactly_an_hour_is_kept(memory, clock):
    # n8n drops buffers idle for *more than* one hour.
    memory.add_turn("s1", TURN)
    clock.advance(60)

    assert memory.sessions() == ["s1"]


def test_reading_a_session_refreshes_its_last_access(memory, clock):
    memory.add_turn("s1", TURN)
    clock.advance(50)
    assert memory.load("s1", 5) == TURN
    clock.advance(50)  # 100 min since the write, 50 since the read

    assert memory.messages("s1") == TURN
    clock.advance(61)
    assert memory.messages("s1") == []


def test_writing_a_session_refreshes_its_last_access(memory, clock):
    memory.add_turn("s1", TURN)
    clock.advance(50)
    memory.add_turn("s1", TURN)
    clock.advance(50)

    assert memory.messages("s1") == TURN + TURN


def test_stale_sessions_are_dropped_when_another_session_is_accessed(memory, clock):
    memory.add_turn("old", TURN)
    clock.advance(61)
    memory.add_turn("new", TURN)

    assert memory.sessions() == ["new"]


def test_listing_sessions_does_not_refresh_them(memory, clock):
    memory.add_turn("s1", TURN)
    clock.advance(50)
    assert memory.sessions() == ["s1"]
    clock.advance(11)

    assert memory.sessions() == []


def test_a_dropped_session_starts_again_empty(memory, clock):
    memory.add_turn("s1", TURN)
    clock.advance(61)
    memory.add_turn("s1", [human("Back"), ai("Welcome")])

    assert memory.messages("s1") == [human("Back"), ai("Welcome")]


def test_the_idle_limit_is_configurable(clock):
    memory = InProcessMemory(idle_seconds=5 * MINUTE, clock=clock)
    memory.add_turn("s1", TURN)
    clock.advance(6)

    assert memory.messages("s1") == []
