"""The Chat Hub's user is the signed-in person (api/hub_identity.py over api/rest/auth.py): each
sees their own conversations, a chat user reaches the hub's REST api and push channel, and the
api key stands for the owner (Flask test client, real Redis)."""

from __future__ import annotations

import uuid

import pytest

from api.hub.state import hub
from core.hub_records import HubSession
from tests.api.test_users import KEY, app, browser, people, sign_in, store  # noqa: F401

pytestmark = pytest.mark.usefixtures("people")


def _conversation(app, owner_id: str, title: str) -> str:  # noqa: F811
    with app.test_request_context():
        session = HubSession(str(uuid.uuid4()), owner_id, title, 1, 1, 1)
        assert hub().conversations.create(session)
    return session.id


def _titles(client) -> list[str]:
    page = client.get("/rest/chat/conversations?limit=10")
    assert page.status_code == 200, page.json
    return [s["title"] for s in page.json["data"]["data"]]


def test_each_person_sees_their_own_conversations_and_the_key_the_owners(app, store, people):  # noqa: F811
    chat, member = store.by_email("chat@example.com"), store.by_email("member@example.com")
    _conversation(app, chat.id, "Chat user's")
    _conversation(app, member.id, "Member's")
    _conversation(app, "owner", "The key's")
    assert _titles(people["chat"]) == ["Chat user's"]
    assert _titles(people["member"]) == ["Member's"]
    assert app.test_client().get("/rest/chat/conversations?limit=10").status_code == 401
    keyed = app.test_client()
    assert _titles_with_key(keyed) == ["The key's"]


def _titles_with_key(client) -> list[str]:
    page = client.get("/rest/chat/conversations?limit=10", headers=KEY)
    return [s["title"] for s in page.json["data"]["data"]]


def test_a_chat_user_reaches_the_hubs_rest_api_and_its_push_channel(app, people):  # noqa: F811
    chat = people["chat"]
    models = chat.post("/rest/chat/models", json={"credentials": {}})
    assert models.status_code == 200 and "n8n" in models.json["data"]
    assert chat.get("/rest/chat/agents").status_code == 200
    assert chat.get("/rest/chat/conversations/nope").status_code == 404  # the hub's own answer
    stream = chat.get("/rest/chat/push", buffered=False)
    try:
        assert stream.status_code == 200 and stream.mimetype == "text/event-stream"
        assert next(stream.response).startswith(b"retry: ")
    finally:
        stream.close()


def test_a_signed_out_browser_is_sent_to_sign_in_and_back_to_its_conversation(app):  # noqa: F811
    sid = str(uuid.uuid4())
    page = browser(app).get(f"/home/chat/{sid}", headers={"Sec-Fetch-Site": "none"})
    assert page.status_code == 302
    assert page.headers["Location"] == f"/signin?redirect=/home/chat/{sid}"
    signed_in = browser(app)
    assert sign_in(signed_in, "chat@example.com").status_code == 200
    assert signed_in.get(f"/home/chat/{sid}", headers={"Sec-Fetch-Site": "none"}).status_code == 200
