"""A client of the hub's REST api and push channel, as its front end would use them."""

from __future__ import annotations

import base64
import contextlib
import json
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx

from api.rest.cookie import COOKIE
from tests.hub.identity_app import HEADER

MOCK = {"provider": "mock", "model": "mock"}


def agent_model(workflow: dict) -> dict:
    return {"provider": "n8n", "workflowId": workflow["id"]}


def new_id() -> str:
    return str(uuid.uuid4())


def file(name: str, mime: str, data: bytes) -> dict:
    return {"fileName": name, "mimeType": mime, "data": base64.b64encode(data).decode()}


class Push:
    """The user's events as they arrive over `GET /rest/chat/push`, read by a thread."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.opened = threading.Event()
        self.ended = threading.Event()  # the stream closed, or its connection was lost
        self.error: Exception | None = None  # how it was lost (an api process that died)
        self._seen = threading.Condition()

    def add(self, event: dict[str, Any]) -> None:
        with self._seen:
            self.events.append(event)
            self._seen.notify_all()

    def wait_for(self, test: Callable[[dict[str, Any]], bool], what: str,
                 timeout: float = 30.0) -> dict[str, Any]:  # fmt: skip
        """The first event (from the start) that passes `test`."""
        with self._seen:
            found = self._seen.wait_for(lambda: next((e for e in self.events if test(e)), None),
                                        timeout)  # fmt: skip
        if found is None:
            raise AssertionError(f"no {what} within {timeout} s: {self.types()}")
        return found

    def end_of(self, session: str, count: int = 1, timeout: float = 30.0) -> list[dict]:
        """The session's events up to its `count`th chatHubExecutionEnd."""

        def ended(_: dict) -> bool:
            return len(self.of(session, "chatHubExecutionEnd")) >= count

        self.wait_for(ended, f"execution end #{count} of {session}", timeout)
        found, ends = [], 0
        for event in self.of(session):
            found.append(event)
            ends += event["type"] == "chatHubExecutionEnd"
            if ends == count:
                return found
        return found

    def of(self, session: str, kind: str | None = None) -> list[dict]:
        return [e for e in self.events if e["data"].get("sessionId") == session
                and (kind is None or e["type"] == kind)]  # fmt: skip

    def types(self) -> list[str]:
        return [e["type"] for e in self.events]


class HubClient:
    def __init__(self, base: str, user: str | None = None, headers: dict[str, str] | None = None):
        """`user`: the test user of tests/hub/identity_app.py; `headers`: what else every
        request carries (a session cookie: `signed_in`)."""
        self.base = base
        self.headers = {HEADER: user} if user else {}
        self.headers.update(headers or {})
        self.http = httpx.Client(base_url=f"{base}/rest/chat", headers=self.headers, timeout=30)

    def post(self, path: str, body: Any = None) -> httpx.Response:
        return self.http.post(path, json=body if body is not None else {})

    def send(self, session: str, text: str, model: dict, previous: str | None = None,
             files: list[dict] | None = None, message_id: str | None = None) -> str:  # fmt: skip
        """Send; the new message's id (asserts 200 {"status": "streaming"})."""
        message_id = message_id or new_id()
        answer = self.post("/conversations/send", {
            "messageId": message_id, "sessionId": session, "message": text, "model": model,
            "previousMessageId": previous, "credentials": {}, "attachments": files or [],
        })  # fmt: skip
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"data": {"status": "streaming"}}
        return message_id

    def conversation(self, session: str) -> dict:
        answer = self.http.get(f"/conversations/{session}")
        assert answer.status_code == 200, answer.text
        return answer.json()["data"]

    def messages(self, session: str) -> list[dict]:
        """The tree's messages, oldest first."""
        found = self.conversation(session)["conversation"]["messages"].values()
        return sorted(found, key=lambda m: (m["createdAt"], m["id"]))

    @contextlib.contextmanager
    def push(self) -> Iterator[Push]:
        push = Push()
        stop = threading.Event()

        def read() -> None:
            try:
                with httpx.stream("GET", f"{self.base}/rest/chat/push", headers=self.headers,
                                  timeout=httpx.Timeout(30, read=None)) as answer:  # fmt: skip
                    push.opened.set()
                    for line in answer.iter_lines():
                        if stop.is_set():
                            return
                        if line.startswith("data: "):
                            push.add(json.loads(line[6:]))
            except httpx.HTTPError as err:
                push.error = err
            finally:
                push.ended.set()

        thread = threading.Thread(target=read, daemon=True)
        thread.start()
        assert push.opened.wait(10), "the push stream did not open"
        try:
            yield push
        finally:
            stop.set()


def signed_in(base: str, email: str, password: str) -> HubClient:
    """A client signed in as a person, as the hub's page is: `POST /rest/login`, then the
    session cookie on every request with the browser's `Sec-Fetch-Site: same-origin`, without
    which the cookie counts for nothing (api/rest/cookie.py)."""
    same_origin = {"Sec-Fetch-Site": "same-origin"}
    answer = httpx.post(f"{base}/rest/login", headers=same_origin, timeout=30,
                        json={"emailOrLdapLoginId": email, "password": password})  # fmt: skip
    assert answer.status_code == 200, answer.text
    return HubClient(base, headers={**same_origin, "Cookie": f"{COOKIE}={answer.cookies[COOKIE]}"})


def text_of(message: dict) -> str:
    return "".join(c.get("content", "") for c in message["content"])
