"""The hub's doors keep the api's rules (Flask test client, a real Redis, executions in this
process): a sign-in, JSON bodies only (a refused one changes nothing), no cross-site request,
n8n's error shape; and whatever a body holds, a clear answer, never a 5xx."""

from __future__ import annotations

import logging
import uuid

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.app import create_app
from api.rest.cookie import COOKIE, session_value
from core.keys import Keys
from core.settings import Settings
from tests.api.test_fuzz_bodies import ANY_TEXT, SCALARS, VALUES, _encode

KEY = "hub-rules-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
FUZZ = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def hub_app(redis_url):
    keys = Keys(prefix=f"hr{uuid.uuid4().hex[:8]}:")
    settings_ = Settings(redis_url=redis_url, key_prefix=keys.prefix, api_key=KEY,
                         executions_mode="regular", keepalive_seconds=0.5)  # fmt: skip
    app = create_app(settings=settings_)
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield app, client, keys
    app.extensions["mini_n8n"].close()
    client.close()


def _hub_keys(client, keys) -> int:
    return sum(1 for _ in client.scan_iter(match=f"{keys.prefix}hub:*", count=1000))


def test_the_hub_needs_a_sign_in_and_answers_errors_in_n8ns_shape(hub_app):
    app, _, _ = hub_app
    answer = app.test_client().get("/rest/chat/conversations?limit=5")
    assert answer.status_code == 401
    assert answer.get_json()["code"] == 401 and answer.get_json()["message"]
    listed = app.test_client().get("/rest/chat/conversations?limit=5", headers=AUTH)
    assert listed.get_json() == {"data": {"data": [], "nextCursor": None, "hasMore": False}}


def test_a_hub_body_that_is_not_json_is_refused_and_changes_nothing(hub_app):
    app, client, keys = hub_app
    before = _hub_keys(client, keys)
    form = app.test_client().post("/rest/chat/agents", data={"name": "x"}, headers=AUTH)
    assert form.status_code == 415 and form.get_json()["code"] == 415
    assert _hub_keys(client, keys) == before


def test_the_editors_session_signs_in_to_the_hub_from_its_own_origin_only(hub_app):
    app, _, _ = hub_app
    client = app.test_client()
    client.set_cookie(COOKIE, session_value(KEY))
    same = client.get("/rest/chat/agents", headers={"Sec-Fetch-Site": "same-origin"})
    assert same.status_code == 200
    other = client.post("/rest/chat/agents", json={"name": "x"},
                        headers={"Sec-Fetch-Site": "cross-site"})  # fmt: skip
    assert other.status_code == 401


def test_without_a_key_a_cross_site_request_to_the_hub_is_refused(redis_url, monkeypatch):
    monkeypatch.setenv("HOST", "127.0.0.1")
    keys = Keys(prefix=f"hr{uuid.uuid4().hex[:8]}:")
    app = create_app(settings=Settings(redis_url=redis_url, key_prefix=keys.prefix,
                                       executions_mode="regular"))  # fmt: skip
    try:
        local = app.test_client().get("/rest/chat/agents", base_url="http://localhost:5678")
        assert local.status_code == 200
        cross = app.test_client().post("/rest/chat/agents", json={"name": "x"},
                                       base_url="http://localhost:5678",
                                       headers={"Sec-Fetch-Site": "cross-site"})  # fmt: skip
        assert cross.status_code == 403 and cross.get_json()["code"] == 403
    finally:
        app.extensions["mini_n8n"].close()


UUIDS = st.one_of(st.uuids().map(str), SCALARS)
MODELS = st.one_of(
    st.just({"provider": "mock"}),
    st.fixed_dictionaries({"provider": st.sampled_from(["n8n", "custom-agent", "openai", "x"])},
                          optional={"model": SCALARS, "workflowId": SCALARS, "agentId": SCALARS}),
    VALUES,
)  # fmt: skip
SENDS = st.fixed_dictionaries(
    {},
    optional={
        "messageId": UUIDS, "sessionId": UUIDS, "message": ANY_TEXT, "model": MODELS,
        "previousMessageId": UUIDS, "credentials": VALUES, "timeZone": SCALARS,
        "attachments": st.lists(st.fixed_dictionaries({}, optional={
            "data": SCALARS, "mimeType": SCALARS, "fileName": SCALARS}), max_size=3) | VALUES,
    },
).map(_encode)  # fmt: skip
AGENTS = st.fixed_dictionaries(
    {},
    optional={
        "name": SCALARS, "icon": VALUES, "systemPrompt": SCALARS, "provider": SCALARS,
        "model": SCALARS, "credentialId": SCALARS, "toolIds": VALUES,
        "suggestedPrompts": VALUES, "description": SCALARS,
    },
).map(_encode)  # fmt: skip


@FUZZ
@given(body=st.one_of(SENDS, VALUES.map(_encode)), path=st.sampled_from([
    "/rest/chat/conversations/send", "/rest/chat/models",
    f"/rest/chat/conversations/{uuid.UUID(int=1)}/messages/{uuid.UUID(int=2)}/edit",
    f"/rest/chat/conversations/{uuid.UUID(int=1)}/messages/{uuid.UUID(int=2)}/regenerate",
]))  # fmt: skip
def test_any_message_body_gets_a_clear_answer_and_never_a_5xx(hub_app, caplog, body, path):
    _check(hub_app, caplog, "POST", path, body)


@FUZZ
@given(body=st.one_of(AGENTS, VALUES.map(_encode)), method=st.sampled_from(["POST", "PATCH"]))
def test_any_agent_body_gets_a_clear_answer_and_never_a_5xx(hub_app, caplog, body, method):
    path = "/rest/chat/agents" if method == "POST" else f"/rest/chat/agents/{uuid.UUID(int=3)}"
    _check(hub_app, caplog, method, path, body)


def _check(hub_app, caplog, method: str, path: str, body: str) -> None:
    app, client, keys = hub_app
    caplog.clear()
    with caplog.at_level(logging.ERROR):
        answer = app.test_client().open(path, method=method, headers=AUTH,
                                        data=body.encode("utf-8", "surrogatepass"),
                                        content_type="application/json")  # fmt: skip
    assert answer.status_code < 500, (body[:200], answer.data[:300])
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], body[:200]
    if answer.status_code >= 400:
        said = answer.get_json()
        assert said["code"] == answer.status_code and said["message"]
