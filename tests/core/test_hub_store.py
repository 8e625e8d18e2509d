"""The hub's conversation store and push events on a real Redis: ownership, cursor pages, the
one running reply, numbered events with the reply's text appended first, and the bounds."""

from __future__ import annotations

import json

import pytest

from core.hub_records import AI, HUMAN, HubMessage, HubSession, MessageStatus, branch
from core.hub_runs import RunStore
from core.hub_settings import HubSettings
from core.hub_store import ConversationStore, HubLimit, IdTaken, MemoryWrite
from core.hub_stream import HubEvents, TooLong


def _session(sid: str, owner: str = "u1", at: int = 1000) -> HubSession:
    return HubSession(sid, owner, "New Chat", at, at, at)


def _message(mid: str, sid: str, previous: str | None = None, kind: str = HUMAN,
             at: int = 2000) -> HubMessage:  # fmt: skip
    return HubMessage(mid, sid, kind, "Ada", f"text {mid}", MessageStatus.SUCCESS, at, at,
                      previous_message_id=previous)  # fmt: skip


@pytest.fixture
def store(redis_client, keys):
    return ConversationStore(redis_client, keys, HubSettings(max_conversations=3, max_messages=3))


def test_a_conversation_is_its_owners_only(store):
    assert store.create(_session("s1", "u1"))
    assert store.get("s1", "u1") is not None and store.get("s1", "u2") is None
    assert not store.create(_session("s1", "u2"))  # the id is taken, whoever asks
    assert store.page("u2", 10) == ([], False)


def test_pages_follow_the_last_message_newest_first(store):
    for index, sid in enumerate(["a", "b", "c"]):
        store.create(_session(sid, at=1000 + index))
    store.add(store.get("a", "u1"), _message("m1", "a", at=5000))  # "a" moves to the top
    first, more = store.page("u1", 2)
    assert [s.id for s in first] == ["a", "c"] and more
    rest, more = store.page("u1", 2, cursor="c")
    assert [s.id for s in rest] == ["b"] and not more


def test_the_running_reply_is_claimed_once_and_handed_to_its_execution(store):
    token, held = store.claim("s1")
    assert token and held == ""
    assert store.claim("s1") == (None, token)
    assert store.hand_over("s1", token, "exec1") and store.active("s1") == "exec1"
    assert store.claim("s1") == (None, "exec1")
    taken, _ = store.claim("s1", seen="exec1")  # the caller found exec1 finished
    assert taken and store.active("s1") == taken
    assert not store.release("s1", "exec1") and store.release("s1", taken)
    assert store.active("s1") == ""


def test_a_claim_writes_the_memory_it_was_given_and_a_refused_one_writes_nothing(
    store, redis_client, keys
):
    a, b = keys.chat("a"), keys.chat("b")
    redis_client.rpush(b, "stale")
    token, _ = store.claim("s1", memory=[MemoryWrite(a, 60, ['"old"', '"new"']),
                                         MemoryWrite(b, 0, [])])  # fmt: skip
    assert token and redis_client.lrange(a, 0, -1) == ['"new"', '"old"']  # newest first
    assert 0 < redis_client.ttl(a) <= 60 and not redis_client.exists(b)
    assert store.claim("s1", memory=[MemoryWrite(a, 0, ['"other"'])])[0] is None
    assert redis_client.lrange(a, 0, -1) == ['"new"', '"old"']


def test_the_bounds_refuse_and_write_nothing(store):
    for sid in ("a", "b", "c"):
        store.create(_session(sid))
    with pytest.raises(HubLimit):
        store.create(_session("d"))
    assert store.get("d", "u1") is None
    session = store.get("a", "u1")
    for mid in ("m1", "m2", "m3"):
        store.add(session, _message(mid, "a"))
    with pytest.raises(HubLimit):
        store.add(session, _message("m4", "a"))
    assert set(store.messages("a")) == {"m1", "m2", "m3"}


def test_a_message_id_in_use_is_refused_and_its_files_kept(store):
    session = _session("a")
    store.create(session)
    store.add(session, _message("m1", "a"), files=["b25l"])
    with pytest.raises(IdTaken):
        store.add(session, _message("m1", "a"), files=["dHdv"])
    assert store.file("a", "m1", 0) == "b25l"


def test_delete_removes_every_key_of_the_conversation(store, redis_client, keys):
    session = _session("s1")
    store.create(session)
    store.add(session, _message("m1", "s1"), files=["aGVsbG8="])
    store.remember_memory("s1", keys.chat("s1", "wf"))
    redis_client.rpush(keys.chat("s1", "wf"), "x")
    store.delete(store.get("s1", "u1"))
    assert list(redis_client.scan_iter(f"{keys.prefix}*")) == []
    assert not store.save(session)  # a late write does not bring it back


def test_a_streaming_message_reads_with_its_text_so_far_and_ends_with_it(store, redis_client,
                                                                         keys):  # fmt: skip
    session = _session("s1")
    store.create(session)
    reply = _message("a1", "s1", kind=AI)
    reply.content, reply.status = "", MessageStatus.RUNNING
    store.add(session, reply)
    redis_client.append(keys.hub_text("s1", "a1"), "Hello ")
    assert store.messages("s1")["a1"].content == "Hello "
    store.update("s1", "a1", lambda m: setattr(m, "status", MessageStatus.CANCELLED) or True)
    ended = store.finish("s1", "a1", MessageStatus.SUCCESS)
    assert ended.content == "Hello " and ended.status == MessageStatus.CANCELLED  # a stop won
    assert not redis_client.exists(keys.hub_text("s1", "a1"))


def test_events_are_numbered_kept_and_published_with_the_text_appended_first(redis_client, keys):
    events = HubEvents(redis_client, keys, HubSettings(events_kept=3), text_ttl=60)
    redis_client.set(keys.hub_conversation("s1"), "{}")
    listener = redis_client.pubsub()
    listener.subscribe(keys.hub_push("u1"))
    listener.get_message(timeout=5)  # the subscription's confirmation
    for word in ("one ", "two ", "three ", "four "):
        events.emit("u1", "s1", "chatHubStreamChunk", {"messageId": "a1", "content": word},
                    append=("a1", word))  # fmt: skip
    assert redis_client.get(keys.hub_text("s1", "a1")) == "one two three four "
    kept = events.since("s1", 0)
    assert [e["data"]["sequenceNumber"] for e in kept] == [2, 3, 4]  # the last three kept
    assert events.since("s1", 3) == kept[-1:] and events.last("s1") == 4
    first = json.loads(listener.get_message(timeout=5)["data"])["push"]
    assert first["type"] == "chatHubStreamChunk"
    assert first["data"] == {**first["data"], "sequenceNumber": 1, "sessionId": "s1",
                             "content": "one "}  # fmt: skip
    listener.close()


def test_a_reply_past_its_bound_is_refused_and_writes_nothing(redis_client, keys):
    events = HubEvents(redis_client, keys, HubSettings(max_reply_bytes=8), text_ttl=60)
    redis_client.set(keys.hub_conversation("s1"), "{}")
    events.emit("u1", "s1", "chatHubStreamChunk", {}, append=("a1", "12345"))
    with pytest.raises(TooLong):
        events.emit("u1", "s1", "chatHubStreamChunk", {}, append=("a1", "6789"))
    assert redis_client.get(keys.hub_text("s1", "a1")) == "12345" and events.last("s1") == 1


def test_an_event_of_a_deleted_conversation_writes_nothing(redis_client, keys):
    events = HubEvents(redis_client, keys, HubSettings(), text_ttl=60)
    assert events.emit("u1", "gone", "chatHubTitleUpdated", {"title": "late"}) == 0
    assert list(redis_client.scan_iter(f"{keys.prefix}*")) == []


def test_branch_walks_from_a_message_to_the_root():
    tree = {m.id: m for m in (_message("h1", "s"), _message("a1", "s", "h1", AI),
                              _message("h2", "s", "a1"), _message("h2b", "s", "a1"))}  # fmt: skip
    assert [m.id for m in branch(tree, "h2b")] == ["h1", "a1", "h2b"]
    assert branch(tree, None) == [] and branch(tree, "gone") == []


def test_a_relays_lease_that_ran_out_unclaimed_is_taken_again_by_its_holder_never_from_another(
    redis_client, keys
):
    """Redis paused or restarted past the lease while the relay went on: it keeps relaying (no
    other process takes a reply over unless asked). One another process took stays that one's."""
    runs = RunStore(redis_client, keys, ttl_seconds=60, lease_ms=3000)
    mine = runs.take("e1")
    assert mine and runs.take("e1") is None and runs.renew("e1", mine)
    redis_client.delete(keys.hub_relay("e1"))  # ran out
    assert runs.renew("e1", mine) and runs.take("e1") is None
    redis_client.delete(keys.hub_relay("e1"))
    theirs = runs.take("e1")
    assert theirs and not runs.renew("e1", mine) and runs.renew("e1", theirs)
    runs.release("e1", theirs)
    assert not runs.renew("e1", "")  # no lease at all never takes one
