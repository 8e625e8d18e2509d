"""The Chat Hub's first chunk beside the plain chat webhook's, for the same agent.

One api (queue mode) and one worker; one workflow agent (Chat Trigger, AI Agent, the mock model
answering at once, Redis Chat Memory), public, so the same workflow answers both doors:

  webhook   POST /webhook/<path> (streaming) -> the first `item` line of the NDJSON answer
  hub       POST /rest/chat/conversations/send -> the first `chatHubStreamChunk` event on the
            user's push stream (GET /rest/chat/push, open beforehand, read by a thread that
            stamps each event as it arrives)

The hub does more before its execution starts (the conversation and the human message stored,
the running reply claimed, two events numbered and published, the memory written from the
branch) and one more hop after (the chunk appended to the message, numbered, published on the
user's channel, handed to the push stream). Each message waits for the previous reply to be over
(the webhook's stream to end; the hub's reply and then its title), so neither door's first chunk
waits behind the work of the one before. Rounds interleave the two doors so the machine's noise
falls on both alike; the goal is the hub's median within 2 ms of the webhook's.

    python bench/hub_first_chunk.py [N]
"""

from __future__ import annotations

import json
import statistics
import sys
import threading
import time
import uuid

import httpx
from _common import pct, redis_server

from tests.e2e.deployment import Deployment, chat_url, fresh_ids
from tests.workflows import REDIS_CHAT, example, node

ROUNDS = 10
MESSAGE = "hello there"


class PushReader:
    """The user's push events, each stamped with its arrival (time.monotonic)."""

    def __init__(self, base: str):
        self.first_chunk: dict[str, float] = {}
        self.arrived: dict[str, threading.Event] = {}
        self.titled: dict[str, threading.Event] = {}
        self.ready = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(base,), daemon=True)
        self._thread.start()
        assert self.ready.wait(10), "the push stream did not open"

    def _read(self, base: str) -> None:
        timeout = httpx.Timeout(30, read=None)
        with httpx.stream("GET", f"{base}/rest/chat/push", timeout=timeout) as answer:
            self.ready.set()
            for line in answer.iter_lines():
                if line.startswith("data: "):
                    at = time.monotonic()
                    event = json.loads(line[6:])
                    session = event["data"].get("sessionId")
                    first = session in self.arrived and session not in self.first_chunk
                    if event["type"] == "chatHubStreamChunk" and first:
                        self.first_chunk[session] = at
                        self.arrived[session].set()
                    if event["type"] == "chatHubTitleUpdated" and session in self.titled:
                        self.titled[session].set()

    def expect(self, session: str) -> tuple[threading.Event, threading.Event]:
        self.arrived[session], self.titled[session] = threading.Event(), threading.Event()
        return self.arrived[session], self.titled[session]


def webhook_first(client: httpx.Client, url: str) -> float:
    body = {"action": "sendMessage", "sessionId": str(uuid.uuid4()), "chatInput": MESSAGE}
    start = time.monotonic()
    first = None
    with client.stream("POST", url, json=body) as response:
        for line in response.iter_lines():
            if line and json.loads(line)["type"] == "item":
                first = first or time.monotonic()
    assert first is not None
    return first - start


def hub_first(client: httpx.Client, base: str, workflow_id: str, push: PushReader) -> float:
    session = str(uuid.uuid4())
    body = {
        "messageId": str(uuid.uuid4()), "sessionId": session, "message": MESSAGE,
        "model": {"provider": "n8n", "workflowId": workflow_id}, "previousMessageId": None,
        "credentials": {}, "attachments": [],
    }  # fmt: skip
    arrived, titled = push.expect(session)
    start = time.monotonic()
    answer = client.post(f"{base}/rest/chat/conversations/send", json=body)
    assert answer.status_code == 200, answer.text
    assert arrived.wait(30), "no first chunk"
    # The whole reply is over before the next message, as the webhook's stream is: its end,
    # then its title (what the hub does after the reply).
    assert titled.wait(30), "no title"
    return push.first_chunk[session] - start


def agent() -> dict:
    workflow = fresh_ids(example(REDIS_CHAT))
    trigger = node(workflow, "When chat message received")
    trigger["typeVersion"] = 1.4
    trigger["parameters"].update(public=True, availableInChat=True, agentName="Bench bot")
    trigger["parameters"]["options"]["responseMode"] = "streaming"
    return workflow


def main(n: int) -> None:
    with redis_server() as redis_url:
        deploy = Deployment(redis_url, HOST="127.0.0.1")
        try:
            base = deploy.start_api()
            deploy.start_worker()
            workflow = deploy.activate(agent())
            url = chat_url(base, workflow)
            push = PushReader(base)
            times: dict[str, list[float]] = {"webhook": [], "hub": []}
            ratios = []
            with httpx.Client(timeout=30) as client:
                for _ in range(20):  # warm both doors
                    webhook_first(client, url)
                    hub_first(client, base, workflow["id"], push)
                for round_ in range(ROUNDS):
                    firsts = {}
                    for door in ("webhook", "hub")[:: 1 if round_ % 2 == 0 else -1]:
                        done = [
                            webhook_first(client, url)
                            if door == "webhook"
                            else hub_first(client, base, workflow["id"], push)
                            for _ in range(n // ROUNDS)
                        ]
                        times[door] += done
                        firsts[door] = statistics.median(done)
                    ratios.append(firsts["hub"] - firsts["webhook"])
            report(times, ratios)
        finally:
            deploy.stop()


def report(times: dict[str, list[float]], differences: list[float]) -> None:
    print(f"first chunk, one message at a time, {len(times['hub'])} per door; ms")
    for door, values in times.items():
        ms = [v * 1000 for v in values]
        print(f"{door:10} p50 {pct(ms, 50):7.2f}   p90 {pct(ms, 90):7.2f}   p99 {pct(ms, 99):7.2f}")
    gap = (pct(times["hub"], 50) - pct(times["webhook"], 50)) * 1000
    print(f"hub - webhook at p50: {gap:+.2f} ms (goal: within 2 ms)")
    per_round = " ".join(f"{d * 1000:+.2f}" for d in differences)
    print(f"round by round (median of each): {per_round}; "
          f"median {statistics.median(differences) * 1000:+.2f} ms")  # fmt: skip


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
