"""basicAuth refusals answered as n8n answers them: the message as plain text, a challenge naming
the realm `Webhook <webhookId>`, for a missing or wrong login and for a missing credential."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from flask import Flask, request

from api.auth import check_webhook_auth
from api.errors import ApiError, register_error_handlers
from core.credentials import CredentialError
from engine.workflow import Node

LOGIN = {"user": "ada", "password": "correct horse"}


class Credentials:
    def __init__(self, data: dict | None):
        self.data = data

    def resolve(self, type_name, ref):
        if self.data is None:
            raise CredentialError("no httpBasicAuth credential named 'Chat login'")
        return self.data


def trigger(webhook_id: str | None) -> Node:
    return Node.from_json(
        {
            "name": "When chat message received",
            "type": "@n8n/n8n-nodes-langchain.chatTrigger",
            "typeVersion": 1.4,
            "parameters": {"authentication": "basicAuth"},
            "credentials": {"httpBasicAuth": {"id": "1", "name": "Chat login"}},
            **({"webhookId": webhook_id} if webhook_id is not None else {}),
        },
        0,
    )


def refusal(data: dict | None, webhook_id: str | None, headers: dict | None = None):
    app = Flask(__name__)
    register_error_handlers(app)
    rt = SimpleNamespace(credentials=Credentials(data))
    with app.test_request_context("/", headers=headers or {}):
        with pytest.raises(ApiError) as caught:
            check_webhook_auth(rt, trigger(webhook_id), "basicAuth", request)
        response = app.handle_user_exception(caught.value)
    return response.status_code, response.mimetype, response.get_data(as_text=True), response


@pytest.mark.parametrize(
    ("data", "headers", "status", "text"),
    [
        (LOGIN, None, 401, "Authorization is required!"),
        (LOGIN, {"Authorization": "Basic YWRhOndyb25n"}, 403, "Authorization data is wrong!"),
        (None, None, 500, "No authentication data defined on node!"),
        ({"user": "ada"}, None, 500, "No authentication data defined on node!"),
    ],
)
def test_each_refusal_is_text_with_n8n_s_challenge(data, headers, status, text):
    webhook_id = "5f1c3b9e-7d2a-4c8e-9b1f-2a6d8e4c0a01"
    got_status, mimetype, body, response = refusal(data, webhook_id, headers)
    assert (got_status, mimetype, body) == (status, "text/plain", text)
    assert response.headers["WWW-Authenticate"] == f'Basic realm="Webhook {webhook_id}"'


@pytest.mark.parametrize(
    ("webhook_id", "realm"),
    [
        (None, "Webhook"),  # a node with our own `path` and no webhookId: n8n's "Webhook"
        ('a"b\\c', 'Webhook a\\"b\\\\c'),  # a quoted-string: the realm cannot end early
        ("id\r\nSet-Cookie: x=1", "Webhook idSet-Cookie: x=1"),  # no line break reaches it
        ("ünï", "Webhook n"),
    ],
)
def test_the_realm_names_the_webhook_id_as_a_quoted_string(webhook_id, realm):
    response = refusal(LOGIN, webhook_id)[3]
    assert response.headers["WWW-Authenticate"] == f'Basic realm="{realm}"'
