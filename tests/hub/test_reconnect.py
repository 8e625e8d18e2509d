"""Any api process serves any user: push events travel on Redis, a reconnect to another process
catches up on every event (begin and end included, where n8n keeps only chunks, on the main that
ran the reply), and a reply whose relaying process died is taken over and ends whole."""

from __future__ import annotations

import signal
import uuid

from tests.hub.client import HubClient, agent_model, text_of
from tests.hub.workflows import support_bot
from tests.waiting import wait_until

WORDS = "one two three four five six seven eight"


def _finished(client: HubClient, session: str) -> bool:
    messages = client.messages(session)
    return messages[-1]["type"] == "ai" and messages[-1]["status"] != "running"


def test_a_push_stream_on_another_api_process_gets_the_users_events(hub_deployment):
    bot = hub_deployment.activate(support_bot())
    on_a, on_b = HubClient(hub_deployment.base), HubClient(hub_deployment.other)
    session = str(uuid.uuid4())
    with on_b.push() as push:
        on_a.send(session, "hello", agent_model(bot))
        events = push.end_of(session)
    assert [e["type"] for e in events][0] == "chatHubHumanMessageCreated"
    assert events[-1]["type"] == "chatHubExecutionEnd"


def test_reconnect_to_another_api_process_catches_up_every_event_begin_and_end_included(
    hub_deployment,
):
    slow = hub_deployment.activate(support_bot(delay_ms=150))
    on_a, on_b = HubClient(hub_deployment.base), HubClient(hub_deployment.other)
    session = str(uuid.uuid4())
    with on_a.push() as push:
        on_a.send(session, WORDS, agent_model(slow))
        push.wait_for(lambda e: len(push.of(session, "chatHubStreamChunk")) >= 2, "two chunks")
        seen = list(push.of(session))  # the tab loses its connection here
    last_seen = seen[-1]["data"]["sequenceNumber"]
    midway = on_b.post(f"/conversations/{session}/reconnect?lastSequence={last_seen}").json()
    assert midway["data"]["hasActiveStream"] is True
    assert midway["data"]["currentMessageId"] == seen[-1]["data"]["messageId"]

    def caught_up() -> dict | None:
        found = on_b.post(f"/conversations/{session}/reconnect?lastSequence={last_seen}").json()
        events = found["data"]["pendingEvents"]
        titled = bool(events) and events[-1]["type"] == "chatHubTitleUpdated"
        return found if titled else None

    caught = wait_until(caught_up, 30, "the reply and its title")
    pending = caught["data"]["pendingEvents"]
    numbers = [e["data"]["sequenceNumber"] for e in seen + pending]
    assert numbers == list(range(1, caught["data"]["lastSequenceNumber"] + 1))
    assert [e["type"] for e in pending[-3:]] == [
        "chatHubStreamEnd", "chatHubExecutionEnd", "chatHubTitleUpdated",
    ]  # fmt: skip
    every = seen + pending
    text = "".join(e["data"]["content"] for e in every if e["type"] == "chatHubStreamChunk")
    assert text == f"You said: {WORDS}"
    chunks = [c["content"] for c in caught["data"]["pendingChunks"]]
    assert "".join(chunks) == "".join(
        e["data"]["content"] for e in pending if e["type"] == "chatHubStreamChunk"
    )
    assert caught["data"]["hasActiveStream"] is False
    from_start = on_b.post(f"/conversations/{session}/reconnect").json()["data"]["pendingEvents"]
    assert [e["type"] for e in from_start][:3] == [
        "chatHubHumanMessageCreated", "chatHubExecutionBegin", "chatHubStreamBegin",
    ]  # fmt: skip


def test_a_reply_whose_relaying_api_died_is_taken_over_and_ends_whole(hub_deployment):
    deploy = hub_deployment
    slow = deploy.activate(support_bot(delay_ms=300))
    doomed = deploy.start_api()
    on_doomed, on_b = HubClient(doomed), HubClient(deploy.other)
    session = str(uuid.uuid4())
    with on_b.push() as push:
        on_doomed.send(session, WORDS, agent_model(slow))
        push.wait_for(lambda e: len(push.of(session, "chatHubStreamChunk")) >= 2, "two chunks")
        shown = "".join(e["data"]["content"] for e in push.of(session, "chatHubStreamChunk"))
        process = next(p for p, base in deploy.apis if base == doomed)
        process.proc.send_signal(signal.SIGKILL)
        process.proc.wait(10)
        message_id = push.of(session, "chatHubStreamBegin")[0]["data"]["messageId"]
        kept = on_b.conversation(session)["conversation"]["messages"][message_id]
        assert text_of(kept).startswith(shown)  # what was shown survived its api
        wait_until(lambda: _finished(on_b, session), 60, "another process to end the reply")
        push.wait_for(lambda e: e["type"] == "chatHubExecutionEnd", "the end, relayed anew")
    done = on_b.conversation(session)["conversation"]["messages"][message_id]
    assert done["status"] == "success" and text_of(done) == f"You said: {WORDS}"
