"""The Chat Hub in the compose deployment (issue 37): a conversation over two api containers
behind the proxy, signed in as a person (docs/users.md: a user added in the api's container,
the session cookie). The api container relaying a reply is killed mid-reply; a reconnect through
the proxy lands on the other, which takes the reply over, and nothing is lost.

tests/hub/test_reconnect.py holds the same on plain processes; this is it for real, with nginx
between the browser and the apis and a container killed whole. The module has a deployment of
its own (conftest.py builds one for each module).
"""

from __future__ import annotations

import json
import os
import uuid

import pytest

from tests.compose.containers import containers_of, logs_of, up_and_ready, wait_until
from tests.hub.client import HubClient, Push, agent_model, signed_in, text_of
from tests.hub.workflows import support_bot

pytestmark = pytest.mark.compose

EMAIL, PASSWORD = "ada@example.com", "Sunny-Day-42"
# "You said: word0 … word39": 42 tokens, 300 ms apart (about 12 s), so the kill comes mid-reply
# however slowly podman answers on a busy machine.
WORDS = " ".join(f"word{n}" for n in range(40))
DELAY_MS = 300


def add_user(d, email: str, password: str, role: str) -> None:
    """As docs/users.md says for compose: `exec -T api mini-n8n users add`, the password on
    standard input."""
    read, write = os.pipe()
    os.write(write, f"{password}\n".encode())
    os.close(write)
    try:
        done = d.compose(
            "exec", "-T", "api", "mini-n8n", "users", "add", email, "--role", role,
            stdin=read, timeout=60,
        )  # fmt: skip
    finally:
        os.close(read)
    assert done.stdout == f"added {email} ({role})\n", done.stdout + done.stderr


def relaying_api(d, execution_id: str) -> str | None:
    """The api container that started the reply, and so relays it: its access log line of the
    send names the execution (`X-Execution-Id`)."""
    found = [c for c in containers_of(d, "api") if execution_id in logs_of(d, c)]
    return found[0] if len(found) == 1 else None


def chunks_text(events: list[dict]) -> str:
    return "".join(e["data"]["content"] for e in events if e["type"] == "chatHubStreamChunk")


def caught_up(client: HubClient, session: str, last_seen: int) -> dict | None:
    """The reconnect's answer once the reply has ended and its title come (the last event)."""
    answer = client.post(f"/conversations/{session}/reconnect?lastSequence={last_seen}")
    assert answer.status_code == 200, answer.text
    found = answer.json()["data"]
    events = found["pendingEvents"]
    return found if events and events[-1]["type"] == "chatHubTitleUpdated" else None


def stream_end(push: Push, message_id: str) -> dict:
    """The end of an AI message, as `push` got it."""
    return push.wait_for(
        lambda e: e["type"] == "chatHubStreamEnd" and e["data"]["messageId"] == message_id,
        f"the end of {message_id}", timeout=60,
    )  # fmt: skip


def answer_to(push: Push, human_id: str) -> str:
    """The id of the AI message that answers `human_id`, from its begin on `push`."""
    begin = push.wait_for(
        lambda e: e["type"] == "chatHubStreamBegin" and e["data"]["previousMessageId"] == human_id,
        f"the answer to {human_id}", timeout=60,
    )  # fmt: skip
    return begin["data"]["messageId"]


@pytest.mark.timeout(360)  # the deployment's start (two apis, two workers) and a 12 s reply
def test_killing_the_api_container_relaying_a_reply_loses_nothing_for_a_reconnect_through_the_proxy(
    deployment,
):
    d = deployment
    bot = support_bot(delay_ms=DELAY_MS)
    (d.workflows / "support-bot.json").write_text(json.dumps(bot))
    up_and_ready(d, "--scale", "api=2", "--scale", "worker=2")
    assert len(containers_of(d, "api", healthy=True)) == 2
    add_user(d, EMAIL, PASSWORD, "member")
    client = signed_in(d.url, EMAIL, PASSWORD)
    session = str(uuid.uuid4())

    with client.push() as first:
        client.send(session, WORDS, agent_model(bot))
        first.wait_for(lambda e: len(first.of(session, "chatHubStreamChunk")) >= 2, "two chunks",
                       timeout=60)  # fmt: skip
        begin = first.of(session, "chatHubStreamBegin")[0]["data"]
        relaying = wait_until(d, lambda: relaying_api(d, begin["executionId"]), 30,
                              "the api container whose log names the reply")  # fmt: skip
        d.podman("kill", relaying)
        seen = list(first.of(session))  # the tab loses its connection here (or its api did)
    assert "chatHubStreamEnd" not in [e["type"] for e in seen], "the reply ended before the kill"
    last_seen = seen[-1]["data"]["sequenceNumber"]

    # A new push stream and the reconnect, through the proxy: both on the api left.
    with client.push() as second:
        caught = wait_until(d, lambda: caught_up(client, session, last_seen), 90,
                            "the reply taken over, ended and titled")  # fmt: skip
        pending = caught["pendingEvents"]
        numbers = [e["data"]["sequenceNumber"] for e in seen + pending]
        assert numbers == list(range(1, caught["lastSequenceNumber"] + 1))  # none lost, none twice
        assert chunks_text(pending), "nothing of the reply came after the kill"
        assert chunks_text(seen) + chunks_text(pending) == f"You said: {WORDS}"
        assert [e["type"] for e in pending[-3:]] == [
            "chatHubStreamEnd", "chatHubExecutionEnd", "chatHubTitleUpdated",
        ]  # fmt: skip
        assert caught["hasActiveStream"] is False
        done = client.conversation(session)["conversation"]["messages"][begin["messageId"]]
        assert done["status"] == "success" and text_of(done) == f"You said: {WORDS}"
        # What the new push stream got of it is the reconnect's tail, as it was numbered.
        assert stream_end(second, begin["messageId"])["data"]["status"] == "success"
        tail = {e["data"]["sequenceNumber"]: e for e in pending}
        assert all(tail.get(e["data"]["sequenceNumber"]) == e for e in second.of(session))

        # The conversation goes on: the next message is answered, on the push stream too.
        again = client.send(session, "thanks", agent_model(bot), previous=begin["messageId"])
        assert stream_end(second, answer_to(second, again))["data"]["status"] == "success"
    answer = client.messages(session)[-1]
    assert answer["previousMessageId"] == again and answer["status"] == "success"
    assert text_of(answer) == "You said: thanks"
    # Either way round: the tab's push stream was on the killed api (lost) or on the other.
    where = "was lost with it" if first.error else "was on the other api"
    print(f"\nkilled {relaying} after {len(seen)} events; the first push stream {where}")
