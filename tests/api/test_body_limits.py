"""Every door's body limit at its edge (api/body_limit.py): a body of exactly the limit goes in,
one byte more is refused with 413 and the JSON error, and starts nothing. The api runs with a
small MINI_N8N_MAX_BODY_BYTES and small chat limits, so the bodies stay small; the chat socket's
limit is held by the socket's own reading of a message (api/websocket.py)."""

from __future__ import annotations

import json
import socket
import uuid

import pytest
import redis
from wsproto import ConnectionType
from wsproto.connection import Connection
from wsproto.events import CloseConnection, TextMessage

from api import chat_socket
from api.app import create_app
from api.bodies import Intake, intake
from api.body_limit import Door, body_limit
from api.websocket import ConnectionClosed, Handshake, WebSocket
from core.keys import Keys
from core.settings import Settings
from core.workflow_store import WorkflowStore
from engine.workflow import load_workflow
from tests.workflows import GREETING, REDIS_CHAT, example, node

KEY = "body-limits-key"
SETTINGS = dict(
    executions_mode="regular",
    api_key=KEY,
    max_body_bytes=8 * 1024,
    chat_body_max_bytes=2 * 1024,
    chat_file_max_bytes=1024,
    chat_files_max_bytes=3 * 1024,
)
PROCESS_LIMIT = SETTINGS["max_body_bytes"]
CHAT_LIMIT = SETTINGS["chat_body_max_bytes"]
FRAME_LIMIT = SETTINGS["chat_files_max_bytes"] * 4 // 3 + CHAT_LIMIT
BOUNDARY = "limitboundary"


@pytest.fixture(scope="module")
def api(redis_url):
    keys = Keys(prefix=f"bl{uuid.uuid4().hex[:8]}:")
    settings = Settings(redis_url=redis_url, key_prefix=keys.prefix, **SETTINGS)
    app = create_app(settings=settings)
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    store = WorkflowStore(client, keys, load_workflow)
    chat = example(REDIS_CHAT)
    chat["id"] = "chat"
    node(chat, "When chat message received")["parameters"]["path"] = "chat"
    for workflow in (example(GREETING), chat):
        store.save(workflow)
        store.activate(workflow["id"])
    yield app, client, keys
    app.extensions["mini_n8n"].close()
    client.close()


def _json_of_size(size: int, body: dict, pad: str) -> bytes:
    """`body` as JSON, its string field `pad` lengthened so that it is exactly `size` bytes."""
    short = json.dumps({**body, pad: ""}).encode()
    return json.dumps({**body, pad: "a" * (size - len(short))}).encode()


def _multipart_of_size(size: int, fields: dict[str, str], pad: str) -> bytes:
    def encoded(values: dict[str, str]) -> bytes:
        parts = [
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'
            for name, value in values.items()
        ]
        return ("".join(parts) + f"--{BOUNDARY}--\r\n").encode()

    short = encoded({**fields, pad: ""})
    return encoded({**fields, pad: "a" * (size - len(short))})


def _greeting(size: int) -> bytes:
    return _json_of_size(size, {}, "name")


def _chat_message(size: int) -> bytes:
    return _json_of_size(size, {"action": "loadPreviousSession", "sessionId": "s"}, "chatInput")


def _chat_upload(size: int) -> bytes:
    fields = {"action": "loadPreviousSession", "sessionId": "s"}
    return _multipart_of_size(size, fields, "chatInput")


def _object(size: int) -> bytes:
    return _json_of_size(size, {}, "pad")


JSON = "application/json"
MULTIPART = f"multipart/form-data; boundary={BOUNDARY}"
# door, method, path, body of a given size, its type, the limit, the answer to a body in it
DOORS = [
    ("production webhook", "POST", "/webhook/greet", _greeting, JSON, PROCESS_LIMIT, 200),
    ("unknown webhook", "POST", "/webhook/nowhere", _object, JSON, PROCESS_LIMIT, 404),
    ("chat trigger json", "POST", "/webhook/chat", _chat_message, JSON, CHAT_LIMIT, 200),
    ("chat trigger upload", "POST", "/webhook/chat", _chat_upload, MULTIPART, PROCESS_LIMIT, 200),
    ("rest", "POST", "/rest/workflows", _object, JSON, PROCESS_LIMIT, 400),
    ("chat hub", "POST", "/rest/chat/conversations/send", _object, JSON, PROCESS_LIMIT, 400),
    ("sign-in", "POST", "/rest/login", _object, JSON, PROCESS_LIMIT, 403),
    ("waiting link", "GET", "/webhook-waiting/nothing/node", _object, JSON, PROCESS_LIMIT, 404),
    ("resume URL", "POST", "/webhook-waiting/nothing", _object, JSON, PROCESS_LIMIT, 404),
    ("health", "GET", "/healthz", _object, JSON, PROCESS_LIMIT, 200),
]


def _send(app, method: str, path: str, data: bytes, content_type: str):
    client = app.test_client()
    headers = {"Authorization": f"Bearer {KEY}"}
    return client.open(path, method=method, data=data, content_type=content_type, headers=headers)


WORKFLOW_IDS = (example(GREETING)["id"], "chat")


def _executions(client, keys) -> int:
    """Executions started by any door (an earlier one's keys may still change meanwhile)."""
    return sum(client.zcard(keys.workflow_executions(w)) for w in WORKFLOW_IDS)


@pytest.mark.parametrize(
    ("method", "path", "body", "content_type", "limit", "accepted"),
    [door[1:] for door in DOORS],
    ids=[door[0] for door in DOORS],
)
def test_a_body_of_exactly_the_limit_goes_in_and_one_byte_more_is_413_and_starts_nothing(
    api, method, path, body, content_type, limit, accepted
):
    app, client, keys = api
    data = body(limit)
    assert len(data) == limit
    response = _send(app, method, path, data, content_type)
    assert response.status_code == accepted, response.get_data(as_text=True)[:300]
    if path == "/webhook/greet":  # the whole body reached the workflow
        assert response.get_json()["length"] == limit - len(b'{"name": ""}')
    before = _executions(client, keys)
    response = _send(app, method, path, body(limit + 1), content_type)
    assert response.status_code == 413
    said = {k: v for k, v in response.get_json().items() if k != "code"}  # the hub's: n8n's
    assert said == {"message": f"The request body is larger than {limit:,} bytes"}
    assert _executions(client, keys) == before


def test_each_door_has_its_limit_and_none_takes_more_than_the_process_limit():
    settings = Settings(**SETTINGS)
    assert body_limit(settings, Door.WEBHOOK) == PROCESS_LIMIT
    assert body_limit(settings, Door.REST) == PROCESS_LIMIT
    assert body_limit(settings, Door.OTHER) == PROCESS_LIMIT
    assert body_limit(settings, Door.CHAT, "application/json") == CHAT_LIMIT
    assert body_limit(settings, Door.CHAT, "text/plain") == CHAT_LIMIT
    assert body_limit(settings, Door.CHAT, "multipart/form-data") == PROCESS_LIMIT
    assert body_limit(settings, Door.CHAT_SOCKET) == FRAME_LIMIT
    small = Settings(**{**SETTINGS, "max_body_bytes": 1000})
    assert {body_limit(small, door) for door in Door} == {1000}


def test_the_chat_socket_opens_with_its_doors_limit(api, monkeypatch):
    app, _, _ = api
    sizes = []

    def accept(environ, max_message_size, rules):
        sizes.append(max_message_size)
        raise Handshake("not a WebSocket upgrade")

    monkeypatch.setattr(chat_socket.WebSocket, "accept", accept)
    upgrade = {"Upgrade": "websocket", "Connection": "Upgrade"}
    response = app.test_client().get("/chat?sessionId=s&executionId=e", headers=upgrade)
    assert response.status_code == 400
    assert sizes == [FRAME_LIMIT]


class _Peer:
    """A client's end of a socket pair, speaking the WebSocket protocol to the server's end."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.ws = Connection(ConnectionType.CLIENT)

    def send(self, text: str) -> None:
        self.sock.sendall(self.ws.send(TextMessage(data=text)))

    def close_code(self) -> int | None:
        self.ws.receive_data(self.sock.recv(65536))
        closes = [e for e in self.ws.events() if isinstance(e, CloseConnection)]
        return closes[0].code if closes else None


@pytest.fixture
def socket_pair(api):
    app, _, _ = api
    server, client = socket.socketpair()
    server.setblocking(False)
    client.settimeout(10)  # a failing test ends rather than hangs
    with app.app_context():
        rules: Intake = intake(app)
    ws = WebSocket(server, Connection(ConnectionType.SERVER), FRAME_LIMIT, rules)
    yield ws, _Peer(client)
    ws.release()
    client.close()


def _text_of_size(size: int) -> str:
    """Text of `size` bytes as UTF-8, mostly characters of two bytes each."""
    return "é" * (size // 2) + "a" * (size % 2)


def test_a_chat_socket_message_of_exactly_the_limit_is_read(socket_pair):
    ws, peer = socket_pair
    text = _text_of_size(FRAME_LIMIT)
    assert len(text.encode()) == FRAME_LIMIT
    peer.send(text)
    assert ws.receive_ready() == [text]


def test_a_chat_socket_message_one_byte_past_the_limit_closes_the_socket_with_1009(socket_pair):
    ws, peer = socket_pair
    peer.send(_text_of_size(FRAME_LIMIT + 1))
    with pytest.raises(ConnectionClosed):
        ws.receive_ready()
    assert peer.close_code() == 1009
