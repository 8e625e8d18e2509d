"""What the Chat-node tests share: the ask-my-name workflow with fresh ids, and a small client
of n8n's chat protocol (a POST, then the /chat WebSocket) on a real WebSocket library."""

from __future__ import annotations

import contextlib
import json
import time

import httpx
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from tests.e2e.deployment import chat_url, fresh_ids
from tests.workflows import example, node

ASK_NAME = "chat-ask-name-response-nodes.json"
FIRST = "Hi! What is your name?"
HEARTBEAT, CONTINUE = "n8n|heartbeat", "n8n|continue"
FRAME_TIMEOUT = 20.0


def ask_name_workflow(**ask_options) -> dict:
    workflow = fresh_ids(example(ASK_NAME))
    node(workflow, "Ask name")["parameters"]["options"].update(ask_options)
    return workflow


TOKENS: dict[str, str] = {}  # execution id -> the resumeToken its POST answered with


def start(base: str, workflow: dict, session_id: str, text: str = "hello") -> str:
    """POST a message; responseNodes answers at once with the execution id and its resumeToken
    (kept for open_chat)."""
    answer = httpx.post(
        chat_url(base, workflow),
        json={"action": "sendMessage", "sessionId": session_id, "chatInput": text},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body == {
        "executionStarted": True,
        "executionId": body["executionId"],
        "resumeToken": body["resumeToken"],
    }
    TOKENS[body["executionId"]] = body["resumeToken"]
    return body["executionId"]


def chat_query(session_id: str, execution_id: str, token: str | None = None) -> str:
    """The socket's query, with the token `start` was answered with unless one is given."""
    token = TOKENS.get(execution_id, "") if token is None else token
    return f"sessionId={session_id}&executionId={execution_id}&isPublic=true&token={token}"


def open_chat(
    base: str, session_id: str, execution_id: str, token: str | None = None, **kwargs
) -> ClientConnection:
    url = base.replace("http://", "ws://")
    query = chat_query(session_id, execution_id, token)
    return connect(f"{url}/chat?{query}", open_timeout=10, **kwargs)


def next_frame(ws: ClientConnection, timeout: float = FRAME_TIMEOUT) -> str:
    """The next frame that is not a heartbeat (heartbeats are acknowledged, as the widget does),
    within `timeout` seconds: heartbeats do not extend it."""
    deadline = time.monotonic() + timeout
    while True:
        frame = ws.recv(timeout=max(deadline - time.monotonic(), 0))
        assert isinstance(frame, str)
        if frame != HEARTBEAT:
            return frame
        # The server may have closed meanwhile, with frames still to read: read them first.
        with contextlib.suppress(ConnectionClosed):
            ws.send("n8n|heartbeat-ack")


def reply(ws: ClientConnection, session_id: str, text: str, files: list | None = None) -> None:
    """The frame @n8n/chat sends (`files`: [{name, type, data: a data URL}])."""
    message = {"sessionId": session_id, "action": "sendMessage", "chatInput": text}
    ws.send(json.dumps({**message, "files": files or []}))


def error_message(frame: str) -> str:
    body = json.loads(frame)
    assert body["type"] == "error", frame
    return body["message"]
