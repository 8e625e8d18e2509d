"""What a hub client was told, and the check that it is what the conversation and memory hold:
the hub's form of tests/e2e/checker.py's rule for a chat webhook (docs/architecture.md, "The
stream tells the truth").

`Tab` keeps up with the user's events as the hub's page does (api/static/hub/conversation.js,
main.js): its push channel open, opened again whenever it ends (a `pushError`, a cut
connection, a 503 while Redis is away), each conversation it follows caught up with
`reconnect?lastSequence=…` after a reopen or a gap, each event applied once and in order by its
number. A conversation the server no longer has (Redis restarted empty) is noted `gone` with
the server's words.

`check_truth` then holds, for one conversation whose replies are over:

- every stream ended: each chatHubStreamBegin has its chatHubStreamEnd, each
  chatHubExecutionBegin its chatHubExecutionEnd;
- told = record: each AI message's stored status is the status its end told, and its stored
  text is the text its chunks showed (a failure that showed nothing: the error it told);
- record = memory: the workflow's Redis Chat Memory holds exactly the answered turns of the
  branch (a human message and its successful answer; a failed one leaves no turn).
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from tests.e2e.deployment import Deployment
from tests.hub.client import HubClient, text_of

RETRY_SECONDS = 1.0  # EventSource's retry (api/hub/push.py RETRY_MS), and the page's catch-up's


class Tab:
    def __init__(self, client: HubClient):
        self.client = client
        self._http = httpx.Client(
            base_url=client.http.base_url, headers=client.headers, timeout=30
        )  # its own: catch-ups run in its reader thread
        self.opens = 0  # how many times its push channel opened
        self.gone: dict[str, str] = {}  # conversation -> what the server said of it
        self._events: dict[str, list[dict[str, Any]]] = {}  # applied, in order, per conversation
        self._last: dict[str, int] = {}
        self._seen = threading.Condition()
        self._closed = threading.Event()
        self._opened = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        assert self._opened.wait(10), "the push channel did not open"

    # --- what the test does -----------------------------------------------------------------
    def send(self, session: str, text: str, model: dict, previous: str | None = None) -> str:
        self.follow(session)
        return self.client.send(session, text, model, previous)

    def follow(self, session: str) -> None:
        with self._seen:
            self._events.setdefault(session, [])
            self._last.setdefault(session, 0)

    def events(self, session: str, kind: str | None = None) -> list[dict[str, Any]]:
        with self._seen:
            return [e for e in self._events.get(session, []) if kind in (None, e["type"])]

    def wait_for(self, test: Callable[[], bool], what: str, timeout: float) -> None:
        with self._seen:
            if not self._seen.wait_for(test, timeout):
                raise AssertionError(f"no {what} within {timeout:g} s: {self._events}")

    def end_of(self, session: str, count: int, timeout: float) -> None:
        """Until the conversation's `count`th chatHubExecutionEnd, or the server said it is
        gone."""
        self.wait_for(lambda: session in self.gone or
                      len(self.events(session, "chatHubExecutionEnd")) >= count,
                      f"execution end #{count} of {session}", timeout)  # fmt: skip

    def chunks(self, session: str, message_id: str) -> int:
        """How many chunks of that AI message it was shown."""
        found = self.events(session, "chatHubStreamChunk")
        return sum(e["data"]["messageId"] == message_id for e in found)

    def close(self) -> None:
        self._closed.set()
        self._http.close()

    # --- keeping up ---------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._closed.is_set():
            with contextlib.suppress(httpx.HTTPError):  # cut: open it again, as EventSource
                self._read()
            self._closed.wait(RETRY_SECONDS)

    def _read(self) -> None:
        url = f"{self.client.base}/rest/chat/push"
        timeout = httpx.Timeout(10, read=None)
        with httpx.stream("GET", url, headers=self.client.headers, timeout=timeout) as answer:
            if answer.status_code != 200:
                return
            self.opens += 1
            self._opened.set()
            if self.opens > 1:
                for session in list(self._last):
                    self._catch_up(session)
            for line in answer.iter_lines():
                if self._closed.is_set():
                    return
                if not line.startswith("data: "):
                    continue
                event = json.loads(line[6:])
                if event["type"] == "pushError":
                    return  # events may have been missed: open again and catch up
                self._receive(event)

    def _receive(self, event: dict[str, Any]) -> None:
        session = event["data"].get("sessionId")
        with self._seen:
            last = self._last.get(session)
        if last is None:
            return  # not a conversation of this tab's
        number = event["data"]["sequenceNumber"]
        if number > last + 1:
            self._catch_up(session)
        self._apply(session, [event])

    def _catch_up(self, session: str) -> None:
        """Every event after the last one applied, from the server's kept events; asked again
        until the server answers (or says the conversation is gone)."""
        while not self._closed.is_set():
            with self._seen:
                last = self._last[session]
            try:
                answer = self._http.post(f"/conversations/{session}/reconnect?lastSequence={last}")
            except httpx.HTTPError:
                answer = None
            if answer is not None and answer.status_code == 200:
                self._apply(session, answer.json()["data"]["pendingEvents"])
                return
            if answer is not None and answer.status_code == 404:
                with self._seen:
                    self.gone[session] = answer.json()["message"]
                    self._seen.notify_all()
                return
            self._closed.wait(RETRY_SECONDS)

    def _apply(self, session: str, events: list[dict[str, Any]]) -> None:
        with self._seen:
            for event in sorted(events, key=lambda e: e["data"]["sequenceNumber"]):
                if event["data"]["sequenceNumber"] == self._last[session] + 1:
                    self._events[session].append(event)
                    self._last[session] += 1
            self._seen.notify_all()

    def start_over(self, session: str) -> None:
        """The server lost the conversation: a message sent to it now starts it anew."""
        with self._seen:
            self._events[session], self._last[session] = [], 0
            self.gone.pop(session, None)


@dataclass
class Shown:
    """One AI message as its tab was told it."""

    text: str  # its chunks, joined
    status: str | None  # its chatHubStreamEnd's
    error: str | None  # its chatHubStreamError's


def shown(tab: Tab, session: str) -> dict[str, Shown]:
    found: dict[str, Shown] = {}
    for event in tab.events(session):
        data = event["data"]
        if event["type"] == "chatHubStreamBegin":
            found[data["messageId"]] = Shown("", None, None)
        elif event["type"] == "chatHubStreamChunk":
            found[data["messageId"]].text += data["content"]
        elif event["type"] == "chatHubStreamError":
            found[data["messageId"]].error = data["error"]
        elif event["type"] == "chatHubStreamEnd":
            found[data["messageId"]].status = data["status"]
    return found


def check_truth(deploy: Deployment, tab: Tab, session: str, workflow: dict) -> dict[str, Shown]:
    """The module docstring's rule for one conversation whose replies are over; what its tab
    was shown of each AI message."""
    told = shown(tab, session)
    kinds = [e["type"] for e in tab.events(session)]
    unended = {mid: s for mid, s in told.items() if s.status is None}
    assert unended == {}, f"streams never ended: {unended}"
    begun, ended = kinds.count("chatHubExecutionBegin"), kinds.count("chatHubExecutionEnd")
    assert begun == ended, f"{begun} executions began, {ended} ended: {kinds}"
    stored = {m["id"]: m for m in tab.client.messages(session)}
    for message_id, s in told.items():
        record = stored[message_id]
        assert record["status"] == s.status, (message_id, s, record)
        expected = s.text if s.text or s.error is None else s.error
        assert text_of(record) == expected, (message_id, s, record)
    assert _memory(deploy, session, workflow) == _turns(stored), "memory is not the branch"
    return told


def _memory(deploy: Deployment, session: str, workflow: dict) -> list[tuple[str, str]]:
    key = deploy.keys.chat(session, workflow["id"])
    return [(m["type"], str(m["data"]["content"]))
            for m in map(json.loads, reversed(deploy.redis.lrange(key, 0, -1)))]  # fmt: skip


def _turns(messages: dict[str, dict]) -> list[tuple[str, str]]:
    """The answered turns of the branch that ends at the newest message, oldest first (what
    api/hub/branch_memory.py writes and a run's end adds)."""
    newest = max(messages.values(), key=lambda m: (m["createdAt"], m["id"]))
    branch = [newest]
    while branch[-1]["previousMessageId"]:
        branch.append(messages[branch[-1]["previousMessageId"]])
    turns: list[tuple[str, str]] = []
    for message in reversed(branch):
        if message["type"] == "human":
            question = text_of(message)
        elif message["status"] == "success" and text_of(message):
            turns += [("human", question), ("ai", text_of(message))]
    return turns
