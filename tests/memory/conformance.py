"""The behaviour every ChatMemory backend must have.

A backend's test class inherits `MemoryConformance` and provides a `memory` fixture returning a
fresh, empty backend (see test_conformance.py).
"""

from __future__ import annotations

import threading

from memory.base import ChatMemory, SessionMemory
from memory.journal import Journal
from memory.messages import ChatMessage, ToolCall, ai, human, system, tool


def turn(n: int, session: str = "") -> list[ChatMessage]:
    return [human(f"{session}question {n}"), ai(f"{session}answer {n}")]


def add_turns(memory: ChatMemory, session_key: str, count: int) -> list[ChatMessage]:
    added: list[ChatMessage] = []
    for n in range(1, count + 1):
        memory.add_turn(session_key, turn(n))
        added += turn(n)
    return added


class MemoryConformance:
    def test_an_unknown_session_is_empty(self, memory: ChatMemory):
        assert memory.messages("nobody") == []
        assert memory.load("nobody", 5) == []
        assert memory.load("nobody", None) == []
        assert memory.sessions() == []

    def test_add_turn_appends_messages_oldest_first(self, memory: ChatMemory):
        memory.add_turn("s1", [human("Hi"), ai("Hello!")])
        memory.add_turn("s1", [human("How are you?"), ai("Fine.")])

        assert memory.messages("s1") == [
            human("Hi"),
            ai("Hello!"),
            human("How are you?"),
            ai("Fine."),
        ]

    def test_a_window_of_k_turns_loads_the_last_2k_messages(self, memory: ChatMemory):
        everything = add_turns(memory, "s1", 3)

        assert memory.load("s1", 1) == turn(3)
        assert memory.load("s1", 2) == turn(2) + turn(3)
        assert memory.load("s1", 3) == everything
        assert memory.load("s1", 50) == everything

    def test_no_window_loads_everything(self, memory: ChatMemory):
        everything = add_turns(memory, "s1", 7)

        assert memory.load("s1", None) == everything

    def test_a_window_of_zero_or_less_loads_nothing(self, memory: ChatMemory):
        add_turns(memory, "s1", 3)

        assert memory.load("s1", 0) == []
        assert memory.load("s1", -1) == []

    def test_the_window_limits_what_is_read_not_what_is_stored(self, memory: ChatMemory):
        add_turns(memory, "s1", 3)
        assert memory.load("s1", 1) == turn(3)

        memory.add_turn("s1", turn(4))

        assert memory.messages("s1") == turn(1) + turn(2) + turn(3) + turn(4)
        assert memory.load("s1", 1) == turn(4)

    def test_sessions_are_isolated(self, memory: ChatMemory):
        memory.add_turn("alice", turn(1, "alice "))
        memory.add_turn("bob", turn(1, "bob "))
        memory.add_turn("alice", turn(2, "alice "))

        assert memory.messages("alice") == turn(1, "alice ") + turn(2, "alice ")
        assert memory.messages("bob") == turn(1, "bob ")

    def test_clear_empties_only_that_session(self, memory: ChatMemory):
        add_turns(memory, "s1", 2)
        kept = add_turns(memory, "s2", 1)

        memory.clear("s1")
        memory.clear("never-existed")

        assert memory.messages("s1") == []
        assert memory.messages("s2") == kept
        memory.add_turn("s1", turn(9))
        assert memory.messages("s1") == turn(9)

    def test_sessions_lists_the_keys_holding_messages(self, memory: ChatMemory):
        # Keys with separators and non-ASCII text must come back unchanged.
        for key in ("plain", "workflow-1__user:42", "ünïcödé 🙂"):
            memory.add_turn(key, turn(1))
        memory.messages("read-only")

        assert sorted(memory.sessions()) == sorted(["plain", "workflow-1__user:42", "ünïcödé 🙂"])

        memory.clear("plain")
        assert sorted(memory.sessions()) == sorted(["workflow-1__user:42", "ünïcödé 🙂"])

    def test_an_empty_turn_stores_nothing(self, memory: ChatMemory):
        memory.add_turn("s1", [])

        assert memory.messages("s1") == []
        assert memory.sessions() == []

    def test_tool_calls_round_trip(self, memory: ChatMemory):
        call = ToolCall(
            name="calculator", args={"input": "2 + 2", "nested": {"x": [1, 2]}}, id="c1"
        )
        exchange = [
            system("You are a helpful assistant"),
            human("What is 2 + 2?"),
            ai("", tool_calls=[call]),
            tool("4", tool_call_id="c1", name="calculator"),
            ai("2 + 2 = 4"),
        ]
        memory.add_turn("s1", exchange)

        got = memory.messages("s1")

        assert got == exchange
        assert got[2].tool_calls == [call]
        assert (got[3].tool_call_id, got[3].name) == ("c1", "calculator")

    def test_a_window_counts_two_messages_a_turn_whatever_their_type(self, memory: ChatMemory):
        """n8n's BufferWindowMemory slices the last k*2 messages: a turn with a tool call (four
        messages) fills two "turns" of the window; the Agent then drops orphans
        (memory/history.py)."""
        call = ToolCall(name="calculator", args={"input": "2 + 2"}, id="c1")
        tool_turn = [human("2 + 2?"), ai("", tool_calls=[call]), tool("4", "c1", "calculator")]
        memory.add_turn("s1", [*turn(1), *tool_turn, ai("4")])

        assert memory.load("s1", 1) == [tool("4", "c1", "calculator"), ai("4")]
        assert memory.load("s1", 2) == [*tool_turn, ai("4")]

    def test_content_with_quotes_newlines_and_emoji_round_trips(self, memory: ChatMemory):
        exchange = [human('say "hi"\nand \\ then 👋'), ai("<b>hé</b> {{ $json }} \u0000 end")]
        memory.add_turn("s1", exchange)

        assert memory.messages("s1") == exchange

    def test_changing_returned_messages_does_not_change_the_history(self, memory: ChatMemory):
        memory.add_turn("s1", turn(1))
        got = memory.messages("s1")
        got[0].content = "tampered"
        got.append(human("extra"))

        assert memory.messages("s1") == turn(1)

    def test_a_session_memory_binds_one_session_and_window(self, memory: ChatMemory):
        bound = SessionMemory(memory, "s1", window=1)
        bound.add_turn(turn(1))
        bound.add_turn(turn(2))

        assert bound.load() == turn(2)
        assert bound.messages() == turn(1) + turn(2)
        bound.clear()
        assert memory.messages("s1") == []

    def test_a_runs_own_turns_wait_in_its_journal_and_are_read_within_the_window(
        self, memory: ChatMemory
    ):
        """A worker's run: its turns are written when it ends (memory/journal.py), and what it
        reads meanwhile is the stored history and its own turns, newest last, cut to the window."""
        add_turns(memory, "s1", 2)
        bound = SessionMemory(memory, "s1", window=2, journal=Journal())
        bound.add_turn(turn(3))

        assert memory.messages("s1") == turn(1) + turn(2)
        assert bound.load() == turn(2) + turn(3)
        assert bound.messages() == turn(1) + turn(2) + turn(3)
        bound.add_turn(turn(4))
        assert bound.load() == turn(3) + turn(4)
        assert SessionMemory(memory, "s1", window=0, journal=bound.journal).load() == []

    def test_a_concurrent_reader_never_sees_half_a_turn(self, memory: ChatMemory):
        writers, turns_each = 4, 25
        done = threading.Event()
        problems: list[str] = []
        snapshots = 0

        def write(w: int) -> None:
            for n in range(turns_each):
                memory.add_turn("s1", [human(f"q {w}.{n}"), ai(f"a {w}.{n}")])

        def read() -> None:
            nonlocal snapshots
            while not done.is_set() or snapshots == 0:
                history = memory.messages("s1")
                snapshots += 1
                problems.extend(half_turns(history))

        reader = threading.Thread(target=read)
        threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
        reader.start()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        done.set()
        reader.join()

        assert problems == []
        assert snapshots > 0
        final = memory.messages("s1")
        assert len(final) == 2 * writers * turns_each
        assert half_turns(final) == []


def half_turns(history: list[ChatMessage]) -> list[str]:
    """Problems in a history made of (human "q X", ai "a X") pairs; empty when it is whole."""
    if len(history) % 2:
        return [f"odd length {len(history)}"]
    problems = []
    for question, answer in zip(history[::2], history[1::2], strict=True):
        if question.role != "human" or answer.role != "ai":
            problems.append(f"roles {question.role}/{answer.role}")
        elif question.content[2:] != answer.content[2:]:
            problems.append(f"{question.content!r} answered by {answer.content!r}")
    return problems
