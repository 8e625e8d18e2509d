"""Stopping a slow generation: by REST, and when the streaming client goes away if the workflow
asks for it (`settings.stopOnClientDisconnect`). The in-flight model call is aborted, the stream
ends, the execution is `canceled`, and memory keeps only complete turns."""

from __future__ import annotations

import json
import time

import httpx

from tests.e2e.client import stream_chat
from tests.e2e.deployment import chat_url
from tests.models.conftest import openai_chat, stop_via_rest
from tests.waiting import wait_until

SLOW = 0.3  # seconds per token
LONG = "please tell me a long story about the ships and the sea"  # answered in 13 tokens
FULL_ANSWER = f"You said: {LONG}"


class OpenStream:
    """A chat stream read line by line, so a test can act in the middle of it."""

    def __init__(self, url: str, message: str, session: str):
        body = {"action": "sendMessage", "sessionId": session, "chatInput": message}
        self._cm = httpx.stream("POST", url, json=body, timeout=30)
        self.response = self._cm.__enter__()
        self.execution_id = self.response.headers["x-execution-id"]
        self._lines = self.response.iter_lines()
        self.chunks: list[dict] = []

    def read_items(self, count: int) -> None:
        while sum(c["type"] == "item" for c in self.chunks) < count:
            self._next()

    def read_to_end(self) -> None:
        for line in self._lines:
            if line.strip():
                self.chunks.append(json.loads(line))
        self.close()

    def _next(self) -> None:
        line = ""
        while not line.strip():
            line = next(self._lines)
        self.chunks.append(json.loads(line))

    def close(self) -> None:
        self._cm.__exit__(None, None, None)


def wait_for_status(deploy, execution_id: str, timeout: float = 10.0) -> tuple[dict, float]:
    """The finished record and when it was first seen finished (monotonic)."""

    def finished() -> dict | None:
        record = deploy.execution(execution_id)
        return record if record and record["status"] not in ("new", "running") else None

    record = wait_until(finished, timeout, f"execution {execution_id} to finish", every=0.02)
    return record, time.monotonic()


def remembered(deploy, session: str) -> list[tuple[str, str]]:
    return [(m["type"], m["data"]["content"]) for m in reversed(deploy.chat_list(session))]


def test_a_rest_stop_ends_a_slow_stream_before_its_answer_and_saves_no_half_turn(deploy, fake):
    workflow = deploy.activate(openai_chat())
    url = chat_url(deploy.base, workflow)
    assert stream_chat(url, "my name is Ada", "stop-1").text() == "Nice to meet you, Ada!"
    fake.delay_per_token = SLOW
    stream = OpenStream(url, LONG, "stop-1")
    stream.read_items(2)

    asked = time.monotonic()
    response = stop_via_rest(deploy, stream.execution_id)
    assert response.status_code == 200
    stream.read_to_end()
    latency = time.monotonic() - asked
    print(f"\nREST stop -> stream end: {latency * 1000:.0f} ms")

    assert stream.chunks[-1]["type"] == "error"
    assert stream.chunks[-1]["content"] == "The execution was stopped"
    record, _ = wait_for_status(deploy, stream.execution_id)
    assert record["status"] == "canceled"
    assert remembered(deploy, "stop-1") == [  # the earlier turn only, no half answer
        ("human", "my name is Ada"),
        ("ai", "Nice to meet you, Ada!"),
    ]
    assert fake.client_gone.wait(3)  # the model call was aborted: its connection was closed
    assert len([s for s in fake.sent if s[1] == "content"]) < 13


def test_by_default_an_execution_outlives_its_streaming_client(deploy, fake):
    fake.delay_per_token = 0.1
    workflow = deploy.activate(openai_chat())
    stream = OpenStream(chat_url(deploy.base, workflow), LONG, "gone-keep")
    stream.read_items(2)
    stream.close()  # the client goes away mid-answer

    record, _ = wait_for_status(deploy, stream.execution_id)
    assert record["status"] == "success"
    assert remembered(deploy, "gone-keep") == [("human", LONG), ("ai", FULL_ANSWER)]
    assert not fake.client_gone.is_set()


def test_a_workflow_can_ask_to_be_stopped_when_its_streaming_client_disconnects(deploy, fake):
    fake.delay_per_token = SLOW
    workflow = deploy.activate(openai_chat(settings={"stopOnClientDisconnect": True}))
    stream = OpenStream(chat_url(deploy.base, workflow), LONG, "gone-stop")
    stream.read_items(2)
    left = time.monotonic()
    stream.close()

    record, seen = wait_for_status(deploy, stream.execution_id)
    print(f"\nclient disconnect -> execution canceled: {(seen - left) * 1000:.0f} ms")
    assert record["status"] == "canceled"
    # Noticed on the api's next writes, then stopped: the model's answer was cut short.
    assert remembered(deploy, "gone-stop") == []
    assert fake.client_gone.wait(3)
    assert len([s for s in fake.sent if s[1] == "content"]) < 13
