"""What the Chat-node tests share: the ask-my-name workflow with fresh ids, and a small client
of n8n's chat protocol (a POST, then the /chat WebSocket) on a real WebSocket library."""

from __future__ import annotations

import contextlib
import json

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


def start(base: str, workflow: dict, session_id: str, text: str = "hello") -> str:
    """POST a message; responseNodes answers at once with the execution id."""
    answer = httpx.post(
        chat_url(base, workflow),
        json={"action": "sendMessage", "sessionId": session_id, "chatInput": text},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body == {"executionStarted": True, "executionId": body["executionId"]}
    return body["executionId"]


def open_chat(base: str, session_id: str, execution_id: str) -> ClientConnection:
    url = base.replace("http://", "ws://")
    return connect(
        f"{url}/chat?sessionId={session_id}&executionId={execution_id}&isPublic=true",
        open_timeout=10,
    )


def next_frame(ws: ClientConnection, timeout: float = FRAME_TIMEOUT) -> str:
    """The next frame that is not a heartbeat (heartbeats are acknowledged, as the widget does)."""
    while True:
        frame = ws.recv(timeout=timeout)
        assert isinstance(frame, str)
        if frame != HEARTBEAT:
            return frame
        # The server may have closed meanwhile, with frames still to read: read them first.
        with contextlib.suppress(ConnectionClosed):
            ws.send("n8n|heartbeat-ack")


def reply(ws: ClientConnection, session_id: str, text: str) -> None:
    message = {"sessionId": session_id, "action": "sendMessage", "chatInput": text, "files": []}
    ws.send(json.dumps(message))


def error_message(frame: str) -> str:
    body = json.loads(frame)
    assert body["type"] == "error", frame
    return body["message"]
