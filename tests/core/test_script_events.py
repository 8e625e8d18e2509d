"""Every event a Lua script publishes was encoded by core/events.py: each script runs against a
real Redis, and everything it publishes (or keeps to publish again) decodes with
`core.events.decode` to the event expected. The scripts themselves hold no JSON of their own."""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from core import events, liveness
from core.chat_node_message import ChatNodeMessage
from core.clock import now_ms
from core.events import Kind
from core.execution_record import ExecutionRecord, Status
from core.executions import ExecutionStore
from core.redis_clients import publish_command
from core.replay import PUBLISH_KEPT, REPLAY_SECONDS, kept
from core.results import FinalResult
from core.waiting import WaitingStore

CORE = Path(__file__).resolve().parents[2] / "core"
_END_OF_TEST = "end of the test's events"


@pytest.fixture
def store(redis_client, keys):
    return ExecutionStore(redis_client, keys, queue_timeout_seconds=300, lease_seconds=5)


def published(redis_client, channel: str, act: Callable[[], object]) -> list[events.Event]:
    """What `act` published on `channel`, each decoded: read up to a marker published after it,
    so no wait decides that nothing else came."""
    pubsub = redis_client.pubsub()
    pubsub.subscribe(channel)
    assert pubsub.get_message(timeout=5)["type"] == "subscribe"
    act()
    redis_client.publish(channel, _END_OF_TEST)
    decoded = []
    while True:
        message = pubsub.get_message(timeout=5)
        assert message is not None, "the marker never came"
        if message["data"] == _END_OF_TEST:
            break
        decoded.append(events.decode(message["data"]))
    pubsub.close()
    return decoded


def new(store: ExecutionStore, execution_id: str = "e1") -> ExecutionRecord:
    record = ExecutionRecord(execution_id, "w1", session_id="s1", created_at=1, queued_at=1,
                             response_mode="responseNodes")  # fmt: skip
    store.create(record)
    return record


def running(store: ExecutionStore, record: ExecutionRecord) -> ExecutionRecord:
    claimed = record.next(status=Status.RUNNING, claim="t1")
    assert store.claim(record, claimed)
    return claimed


def done(result: FinalResult, seq: int | None = None, continues: bool = False) -> events.Event:
    body = result.to_json() | ({"continues": True} if continues else {})
    return events.done(body, seq)


def test_the_end_publishes_the_final_event_it_was_given(store, keys, redis_client):
    run = running(store, new(store))
    result = FinalResult(Status.SUCCESS, output={"text": 'odd "}\ud800'})
    event = events.encode(events.done(result.to_json(), 3))
    final = run.next(status=Status.SUCCESS)
    channel = keys.execution_events("e1")
    got = published(redis_client, channel, lambda: store.finish(run, final, event))
    assert got == [done(result, 3)]


def test_an_end_with_replies_left_says_it_continues_and_names_the_next_execution(
    store, keys, redis_client
):
    record = new(store)
    store.reply(record, {"json": {"chatInput": "one"}})
    run = running(store, record)
    result = FinalResult(Status.SUCCESS, output={"text": "hi"})
    event = events.encode(events.done(result.to_json(), 0))
    successor = ExecutionRecord("e2", "w1", session_id="s1", response_mode="responseNodes")
    final = run.next(status=Status.SUCCESS)
    channel = keys.execution_events("e1")
    got = published(redis_client, channel, lambda: store.finish(run, final, event, successor))
    assert got == [done(result, 0, continues=True), events.next_execution("e2")]


def test_a_cancel_with_replies_left_and_no_successor_says_it_continues(store, keys, redis_client):
    record = new(store)
    store.reply(record, {"json": {"chatInput": "one"}})
    got = published(
        redis_client, keys.execution_events("e1"), lambda: store.cancel(record, "stopped")
    )
    assert got == [done(FinalResult(Status.CANCELED, "stopped"), continues=True)]


@pytest.mark.parametrize("step", ["cancel", "fail_start", "reap", "end_wait"])
def test_each_control_end_publishes_its_result(store, keys, redis_client, monkeypatch, step):
    monkeypatch.setattr(liveness, "CONFIRM_MS", 0)
    record = new(store)
    if step == "end_wait":
        run = running(store, record)
        waiting = run.next(status=Status.WAITING, wait_till=now_ms() - 1)
        assert store.pause(run, waiting, "{}", "a1") == ("paused", None)
        redis_client.delete(keys.execution_queued("e1"))
    if step == "reap":
        redis_client.delete(keys.execution_queued("e1"))
        store.reap("e1")  # the first sighting of the loss
    channel = keys.execution_events("e1")
    acts = {
        "cancel": lambda: store.cancel(record, "stopped"),
        "fail_start": lambda: store.fail_start(record, "no broker"),
        "reap": lambda: store.reap("e1"),
        "end_wait": lambda: WaitingStore(store).expire(waiting),
    }
    got = published(redis_client, channel, acts[step])
    assert [e.kind for e in got] == [Kind.DONE]
    assert FinalResult.from_json(got[0].body).status == store.get("e1").status
    assert got[0].body["error"] == store.get("e1").error


def test_a_chat_message_is_published_with_its_index(store, keys, redis_client):
    waits = WaitingStore(store)
    sent = [ChatNodeMessage(text, False, "Chat", 0, 1.5) for text in ("one", 'two \ud800 "}', "")]
    sent.append(ChatNodeMessage("{}", True))

    def send() -> None:
        for message in sent:
            waits.send_message("e1", message)

    got = published(redis_client, keys.execution_events("e1"), send)
    assert got == [events.message(m.numbered(n).to_json()) for n, m in enumerate(sent)]
    assert [ChatNodeMessage.from_json(e.body) for e in got] == waits.messages("e1")


def test_a_kept_event_is_published_and_kept_as_given(keys, redis_client):
    event = events.encode(events.lines('{"type":"item"}\n', items=1, seq=0))
    channel = keys.execution_events("e1")
    args = [event, REPLAY_SECONDS * 1000, publish_command(redis_client)]
    publish_kept = redis_client.register_script(PUBLISH_KEPT)
    keys_ = [channel, keys.execution_sent("e1")]
    got = published(redis_client, channel, lambda: publish_kept(keys=keys_, args=args))
    assert got == [events.decode(event)]
    assert [events.decode(e) for e in kept(redis_client, keys, "e1")] == got


# A Lua string literal that opens or closes a JSON object or member: JSON put together in Lua.
_JSON_IN_LUA = re.compile(r"""'(?:\{"|,")[^']*'|'[^'^]*\}'""")


def lua_scripts() -> dict[str, str]:
    """Every Lua text core/ holds, by module and name (the scripts live there only)."""
    scripts = {}
    for path in sorted(CORE.glob("*.py")):
        module = importlib.import_module(f"core.{path.stem}")
        for name, value in vars(module).items():
            if isinstance(value, str) and "redis.call(" in value:
                scripts[f"{path.stem}.{name}"] = value
    return scripts


def test_no_script_puts_json_together():
    """Patterns read a record's header; nothing a script writes is JSON of its own."""
    scripts = lua_scripts()
    assert {"end_script.END", "waiting._SEND", "replay.PUBLISH_KEPT"} <= scripts.keys()
    found = {name: _JSON_IN_LUA.findall(text) for name, text in scripts.items()}
    assert {name: literals for name, literals in found.items() if literals} == {}
