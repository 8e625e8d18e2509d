"""The Chat Trigger over plain HTTP: CORS, authentication, loadPreviousSession, multipart
messages, the hosted page's headers, and every bad input (which must change nothing)."""

from __future__ import annotations

import json
import re
import uuid
from urllib.parse import quote

import httpx
import pytest

from core.users import UserStore
from tests.chat.support import (
    ANSWER_84,
    BASIC_CREDENTIAL,
    BASIC_PASSWORD,
    BASIC_USER,
    chat_workflow,
    trigger_output,
)
from tests.e2e.client import stream_chat
from tests.e2e.deployment import chat_url

SHOP = "https://shop.example"
BLOG = "https://blog.example"


@pytest.fixture(scope="module")
def restricted(chat_deployment):
    """A streaming chat that allows two origins."""
    workflow = chat_workflow({"allowedOrigins": f"{SHOP}, {BLOG}/"})
    chat_deployment.activate(workflow)
    return workflow, chat_url(chat_deployment.base, workflow)


def executions(deploy, workflow) -> int:
    return deploy.redis.zcard(deploy.keys.workflow_executions(workflow["id"]))


def message(session: str, text: str = "What is 40 + 44?") -> dict:
    return {"action": "sendMessage", "sessionId": session, "chatInput": text}


# --- CORS ------------------------------------------------------------------------------------
def test_preflight_from_an_allowed_origin_echoes_it_and_the_requested_headers(restricted):
    _, url = restricted
    response = httpx.options(
        url,
        headers={
            "Origin": BLOG,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type,x-instance-id",
        },
    )
    assert response.status_code == 204
    assert response.headers["access-control-allow-origin"] == BLOG
    assert response.headers["access-control-allow-headers"] == "content-type,x-instance-id"
    assert set(response.headers["access-control-allow-methods"].split(", ")) == {
        "OPTIONS",
        "GET",
        "POST",
    }
    assert response.headers["access-control-max-age"] == "300"
    assert "Origin" in response.headers["vary"]


def test_preflight_from_an_origin_not_allowed_is_refused_with_403(restricted):
    _, url = restricted
    response = httpx.options(
        url, headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}
    )
    assert response.status_code == 403
    assert "access-control-allow-origin" not in response.headers
    assert response.json()["message"] == "Origin https://evil.example is not allowed"


def test_any_origin_is_echoed_when_allowed_origins_is_the_default_star(chat_deployment):
    workflow = chat_deployment.activate(chat_workflow())
    response = httpx.options(
        chat_url(chat_deployment.base, workflow),
        headers={"Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST"},
    )
    assert response.status_code == 204
    assert response.headers["access-control-allow-origin"] == "http://localhost:3000"


def test_a_streamed_answer_to_an_allowed_origin_carries_cors_and_exposes_ids(
    chat_deployment, restricted
):
    _, url = restricted
    with httpx.stream("POST", url, json=message("cors-1"), headers={"Origin": SHOP}) as response:
        lines = [json.loads(line) for line in response.iter_lines() if line.strip()]
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == SHOP
    exposed = {
        h.strip().lower() for h in response.headers["access-control-expose-headers"].split(",")
    }
    assert exposed == {"x-execution-id", "x-session-id"}
    assert "".join(c.get("content", "") for c in lines if c["type"] == "item") == ANSWER_84


def test_a_request_from_an_origin_not_allowed_is_refused_and_runs_nothing(
    chat_deployment, restricted
):
    workflow, url = restricted
    before = executions(chat_deployment, workflow)
    response = httpx.post(
        url, json=message("cors-evil"), headers={"Origin": "https://evil.example"}
    )
    assert response.status_code == 403
    assert "access-control-allow-origin" not in response.headers
    assert executions(chat_deployment, workflow) == before
    assert chat_deployment.chat_list("cors-evil") == []


def test_the_pages_own_origin_is_always_allowed(chat_deployment, restricted):
    _, url = restricted
    body = {"action": "loadPreviousSession", "sessionId": "cors-self"}
    response = httpx.post(url, json=body, headers={"Origin": chat_deployment.base})
    assert response.status_code == 200
    assert response.json() == {"data": []}


def test_error_answers_carry_cors_headers_so_a_widget_can_read_them(restricted):
    _, url = restricted
    response = httpx.post(url, json={"chatInput": 5}, headers={"Origin": SHOP})
    assert response.status_code == 400
    assert response.headers["access-control-allow-origin"] == SHOP


# --- access ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def guarded(chat_deployment):
    workflow = chat_workflow({"responseMode": "lastNode"}, authentication="basicAuth")
    workflow["nodes"][0]["credentials"] = {"httpBasicAuth": BASIC_CREDENTIAL}
    chat_deployment.activate(workflow)
    return workflow, chat_url(chat_deployment.base, workflow)


def test_basic_auth_without_a_header_is_401_with_a_challenge(chat_deployment, guarded):
    workflow, url = guarded
    for response in (httpx.post(url, json=message("auth-none")), httpx.get(url)):
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == 'Basic realm="Webhook"'
        assert response.json() == {"message": "Authorization is required!"}
    assert executions(chat_deployment, workflow) == 0


def test_basic_auth_with_wrong_credentials_is_403(chat_deployment, guarded):
    workflow, url = guarded
    for auth in ((BASIC_USER, "wrong"), ("eve", BASIC_PASSWORD)):
        response = httpx.post(url, json=message("auth-wrong"), auth=auth)
        assert response.status_code == 403
        assert response.json() == {"message": "Authorization data is wrong!"}
        assert BASIC_PASSWORD not in response.text
    assert executions(chat_deployment, workflow) == 0
    assert chat_deployment.chat_list("auth-wrong", workflow["id"]) == []  # its private memory


def test_basic_auth_with_the_credential_answers(guarded):
    _, url = guarded
    auth = (BASIC_USER, BASIC_PASSWORD)
    response = httpx.post(url, json=message("auth-ok"), auth=auth, timeout=30)
    assert response.status_code == 200
    assert response.json() == {"output": ANSWER_84}
    assert httpx.get(url, auth=auth).status_code == 200


def test_a_preflight_needs_no_credentials(guarded):
    _, url = guarded
    headers = {"Origin": SHOP, "Access-Control-Request-Method": "POST"}
    assert httpx.options(url, headers=headers).status_code == 204


# --- n8nUserAuth: a person signed in to this server --------------------------------------
USER_PASSWORD = "Sunny-Day-42"


@pytest.fixture(scope="module")
def user_chat(chat_deployment):
    """A chat that needs a signed-in user, and a signed-in chat user's client (its requests
    carry this server's Origin, as the hosted page's do)."""
    workflow = chat_deployment.activate(
        chat_workflow(
            {"responseMode": "lastNode", "includeUserInOutput": True}, authentication="n8nUserAuth"
        )
    )
    UserStore(chat_deployment.redis, chat_deployment.keys).add(
        "ada@example.com", USER_PASSWORD, "chat", "Ada", "Lovelace"
    )
    client = httpx.Client(headers={"Origin": chat_deployment.base}, timeout=30)
    body = {"emailOrLdapLoginId": "ada@example.com", "password": USER_PASSWORD}
    assert client.post(f"{chat_deployment.base}/rest/login", json=body).status_code == 200
    yield workflow, client
    client.close()


def test_n8n_user_auth_refuses_a_message_without_a_sign_in_as_n8n_does(chat_deployment, user_chat):
    workflow, _ = user_chat
    url = chat_url(chat_deployment.base, workflow)
    response = httpx.post(url, json=message("n8nuser"))
    assert response.status_code == 401 and response.json() == {"message": "User not authenticated!"}
    stale = httpx.post(url, json=message("n8nuser"), cookies={"mini-n8n-auth": "user.gone"},
                       headers={"Origin": chat_deployment.base})  # fmt: skip
    assert stale.status_code == 401
    assert stale.json() == {"message": "Invalid authentication token"}
    assert executions(chat_deployment, workflow) == 0


def test_n8n_user_auth_answers_a_signed_in_user_and_the_trigger_says_who_it_was(
    chat_deployment, user_chat
):
    """As n8n 2.41: `user` is the server's key in the output (a client's own is dropped), there
    when the trigger includes the user; `metadata.user` is written from the session too."""
    workflow, client = user_chat
    spoof = {
        **message("n8nuser-ok"),
        "user": {"id": "eve"},
        "metadata": {"user": {"id": "eve"}, "page": "help"},
    }
    response = client.post(chat_url(chat_deployment.base, workflow), json=spoof)
    assert response.status_code == 200 and response.json() == {"output": ANSWER_84}
    item = trigger_output(chat_deployment.execution(response.headers["x-execution-id"]))
    user = UserStore(chat_deployment.redis, chat_deployment.keys).by_email("ada@example.com")
    ada = {"id": user.id, "email": "ada@example.com", "firstName": "Ada", "lastName": "Lovelace"}
    assert item["json"]["user"] == ada
    assert item["json"]["metadata"] == {"page": "help", "user": ada}


def test_n8n_user_auth_without_include_user_drops_a_claimed_user(chat_deployment, user_chat):
    _, client = user_chat
    workflow = chat_deployment.activate(
        chat_workflow(
            {"responseMode": "lastNode", "includeUserInOutput": False},
            authentication="n8nUserAuth",
        )
    )
    claimed = {**message("n8nuser-no"), "user": {"id": "eve"}}
    response = client.post(chat_url(chat_deployment.base, workflow), json=claimed)
    assert response.status_code == 200
    item = trigger_output(chat_deployment.execution(response.headers["x-execution-id"]))
    assert "user" not in item["json"] and item["json"]["metadata"]["user"]["id"] != "eve"


def test_n8n_user_auth_page_sends_a_signed_out_browser_to_sign_in_and_back(
    chat_deployment, user_chat
):
    workflow, client = user_chat
    url = chat_url(chat_deployment.base, workflow)
    path = url.removeprefix(chat_deployment.base)
    signed_out = httpx.get(url)
    assert signed_out.status_code == 302
    assert signed_out.headers["location"] == f"/signin?redirect={quote(path, safe='')}"
    page = client.get(url, headers={"Sec-Fetch-Site": "none"})
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")


def test_a_chat_that_is_not_public_answers_404_like_an_unknown_path(chat_deployment):
    workflow = chat_deployment.activate(chat_workflow(public=False))
    url = chat_url(chat_deployment.base, workflow)
    path = url.split("/webhook/")[1]
    headers = {"Origin": SHOP, "Access-Control-Request-Method": "POST"}
    for method, response in (
        ("GET", httpx.get(url)),
        ("POST", httpx.post(url, json=message("private"))),
        ("OPTIONS", httpx.options(url, headers=headers)),
    ):
        assert response.status_code == 404
        assert response.json() == {
            "message": f'The requested webhook "{method} {path}" is not registered.'
        }
    assert executions(chat_deployment, workflow) == 0


# --- loadPreviousSession and sessions --------------------------------------------------------
def test_load_previous_session_returns_memory_in_langchain_form_without_running(chat_deployment):
    workflow = chat_deployment.activate(chat_workflow())
    url = chat_url(chat_deployment.base, workflow)
    session = f"hist-{uuid.uuid4().hex[:6]}"
    assert stream_chat(url, "my name is Ada", session).text() == "Nice to meet you, Ada!"
    assert stream_chat(url, "What is 40 + 44?", session).text() == ANSWER_84
    before = executions(chat_deployment, workflow)
    response = httpx.post(url, json={"action": "loadPreviousSession", "sessionId": session})
    assert response.status_code == 200
    assert executions(chat_deployment, workflow) == before
    data = response.json()["data"]
    assert [(m["id"][-1], m["kwargs"]["content"]) for m in data] == [
        ("HumanMessage", "my name is Ada"),
        ("AIMessage", "Nice to meet you, Ada!"),
        ("HumanMessage", "What is 40 + 44?"),
        ("AIMessage", ANSWER_84),
    ]
    assert data[0] == {
        "lc": 1,
        "type": "constructor",
        "id": ["langchain_core", "messages", "HumanMessage"],
        "kwargs": {"content": "my name is Ada", "additional_kwargs": {}, "response_metadata": {}},
    }


def test_load_previous_session_is_empty_when_the_option_is_off(chat_deployment):
    workflow = chat_deployment.activate(chat_workflow({"loadPreviousSession": "notSupported"}))
    url = chat_url(chat_deployment.base, workflow)
    stream_chat(url, "my name is Ada", "off-1")
    response = httpx.post(url, json={"action": "loadPreviousSession", "sessionId": "off-1"})
    assert response.json() == {"data": []}


def test_a_missing_session_id_gets_a_fresh_one_each_time(chat_deployment):
    workflow = chat_deployment.activate(chat_workflow({"responseMode": "lastNode"}))
    url = chat_url(chat_deployment.base, workflow)
    first = httpx.post(url, json={"chatInput": "my name is Ada"}, timeout=30)
    second = httpx.post(url, json={"chatInput": "What is my name?"}, timeout=30)
    ids = [r.headers["x-session-id"] for r in (first, second)]
    assert all(uuid.UUID(i).version == 4 for i in ids) and ids[0] != ids[1]
    assert second.json() == {"output": "I don't know your name yet."}
    assert [m["data"]["content"] for m in chat_deployment.chat_list(ids[0])][::-1] == [
        "my name is Ada",
        "Nice to meet you, Ada!",
    ]


# --- multipart -------------------------------------------------------------------------------
def multipart(session: str, files: list[tuple[str, bytes, str]], **fields) -> dict:
    data = {"action": "sendMessage", "sessionId": session, "chatInput": "What is 40 + 44?"}
    data.update(fields)
    return {"data": data, "files": [("files", f) for f in files]}


def test_a_multipart_message_puts_file_metadata_on_the_item(chat_deployment):
    workflow = chat_deployment.activate(chat_workflow({"responseMode": "lastNode"}))
    files = [
        ("notes.txt", b"hello world", "text/plain"),
        ("pic.PNG", b"\x89PNG" * 300, "image/png"),
    ]
    response = httpx.post(
        chat_url(chat_deployment.base, workflow),
        **multipart("mp-1", files, metadata=json.dumps({"page": "pricing"})),
        timeout=30,
    )
    assert response.status_code == 200, response.text
    assert response.json() == {"output": ANSWER_84}
    item = trigger_output(chat_deployment.execution(response.headers["x-execution-id"]))
    assert item["json"]["metadata"] == {"page": "pricing"}
    assert item["json"]["chatInput"] == "What is 40 + 44?"
    assert item["json"]["files"] == [
        {
            "mimeType": "text/plain",
            "fileName": "notes.txt",
            "fileExtension": "txt",
            "fileSize": "11 B",
            "fileType": "text",
            "binaryKey": "data0",
        },
        {
            "mimeType": "image/png",
            "fileName": "pic.PNG",
            "fileExtension": "png",
            "fileSize": "1.2 kB",
            "fileType": "image",
            "binaryKey": "data1",
        },
    ]
    assert item["binary"]["data0"]["data"] == "aGVsbG8gd29ybGQ="


def test_a_multipart_message_routed_again_keeps_its_files(chat_deployment):
    """The api remembered the route; the workflow was saved since by another process, so the
    message is routed again (api/webhooks.py) and its files are read a second time."""
    workflow = chat_deployment.activate(chat_workflow({"responseMode": "lastNode"}))
    url = chat_url(chat_deployment.base, workflow)
    assert httpx.post(url, json=message("mp-3"), timeout=30).status_code == 200  # remembered
    chat_deployment.workflows.save({**chat_deployment.workflows.get_json(workflow["id"]),
                                    "name": "saved by someone else"})  # fmt: skip
    response = httpx.post(url, **multipart("mp-3", [("a.txt", b"abc", "text/plain")]), timeout=30)
    assert response.status_code == 200, response.text
    item = trigger_output(chat_deployment.execution(response.headers["x-execution-id"]))
    assert [f["fileSize"] for f in item["json"]["files"]] == ["3 B"]
    assert item["binary"]["data0"]["data"] == "YWJj"
    record = chat_deployment.execution(response.headers["x-execution-id"])
    assert record["workflowName"] == "saved by someone else"


def test_a_multipart_message_streams_too(chat_deployment):
    workflow = chat_deployment.activate(chat_workflow())
    with httpx.stream(
        "POST",
        chat_url(chat_deployment.base, workflow),
        **multipart("mp-2", [("a.txt", b"abc", "text/plain")]),
    ) as response:
        lines = [json.loads(line) for line in response.iter_lines() if line.strip()]
    assert response.status_code == 200
    assert "".join(c.get("content", "") for c in lines if c["type"] == "item") == ANSWER_84


def test_bad_multipart_messages_are_refused_and_change_nothing(chat_deployment):
    workflow = chat_workflow({"allowedFilesMimeTypes": "image/*, .pdf"})
    chat_deployment.activate(workflow)
    url = chat_url(chat_deployment.base, workflow)
    big = b"x" * (64 * 1024 + 1)  # the test deployment allows 64 KiB a file, 100 KiB in all
    cases = [
        (413, multipart("mpbad-1", [("big.png", big, "image/png")])),
        (413, multipart("mpbad-2", [(f"{i}.png", b"x" * 40_000, "image/png") for i in range(3)])),
        (400, multipart("mpbad-3", [("run.sh", b"#!/bin/sh", "text/x-sh")])),
        (400, multipart("mpbad-4", [("a.png", b"x", "image/png")], metadata="{not json")),
        (400, multipart("mpbad-5", [("a.png", b"x", "image/png")], metadata="[1, 2]")),
        (
            400,
            {
                **multipart("mpbad-6", [("a.png", b"x", "image/png")]),
                "data": {"sessionId": "mpbad-6"},
            },
        ),
    ]
    for status, kwargs in cases:
        response = httpx.post(url, **kwargs)
        assert response.status_code == status, (kwargs["data"], response.text)
        assert response.json()["message"]
        assert chat_deployment.chat_list(kwargs["data"]["sessionId"]) == []
    assert executions(chat_deployment, workflow) == 0
    ok = httpx.post(url, **multipart("mpok", [("doc.PDF", b"%PDF", "application/pdf")]))
    assert ok.status_code == 200


# --- bad input -------------------------------------------------------------------------------
def test_every_bad_body_gets_a_json_error_and_changes_nothing(chat_deployment):
    workflow = chat_deployment.activate(chat_workflow())
    url = chat_url(chat_deployment.base, workflow)
    json_type = {"content-type": "application/json"}
    cases = [
        (400, {"content": b"{not json", "headers": json_type}),
        (400, {"content": b"", "headers": json_type}),
        (400, {"json": ["a", "list"]}),
        (400, {"json": "just a string"}),
        (400, {"json": {"sessionId": "bad-1", "chatInput": 42}}),
        (400, {"json": {"sessionId": "bad-2"}}),
        (400, {"json": {"sessionId": 7, "chatInput": "hi"}}),
        (400, {"json": {"sessionId": "", "chatInput": "hi"}}),
        (400, {"json": {"sessionId": "bad\n3", "chatInput": "hi"}}),
        (400, {"json": {"sessionId": "bad\x004", "chatInput": "hi"}}),
        (400, {"json": {"sessionId": "x" * 257, "chatInput": "hi"}}),
        (400, {"json": {"sessionId": "bad-5", "chatInput": "hi", "metadata": "str"}}),
        (400, {"json": {"action": "deleteEverything", "sessionId": "bad-6", "chatInput": "hi"}}),
        (
            400,
            {
                "content": b"chatInput=hi",
                "headers": {"content-type": "application/x-www-form-urlencoded"},
            },
        ),
        (413, {"json": {"sessionId": "bad-7", "chatInput": "x" * (2 * 1024 * 1024)}}),
    ]
    for status, kwargs in cases:
        response = httpx.post(url, **kwargs)
        assert response.status_code == status, (kwargs, response.text)
        assert response.headers["content-type"].startswith("application/json")
        assert response.json()["message"]
    assert executions(chat_deployment, workflow) == 0
    keys = chat_deployment.redis.keys(f"{chat_deployment.keys.prefix}chat:bad*")
    assert keys == []
    # The longest allowed session id is fine.
    assert stream_chat(url, "What is 40 + 44?", "s" * 256).text() == ANSWER_84


# --- the hosted page -------------------------------------------------------------------------
def test_the_hosted_page_is_one_self_contained_document_with_a_strict_policy(chat_deployment):
    title = '</script><script>alert(1)</script> & "quotes" \u2028'
    workflow = chat_deployment.activate(chat_workflow({"title": title}))
    response = httpx.get(chat_url(chat_deployment.base, workflow))
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    csp = response.headers["content-security-policy"]
    nonce = re.search(r"script-src 'nonce-([\w-]+)'", csp).group(1)
    assert "default-src 'none'" in csp and "connect-src 'self'" in csp
    html = response.text
    assert "http://" not in html and "https://" not in html  # nothing from a CDN
    assert html.count("<script") == 2 and html.count("</script>") == 2
    assert html.count(f'nonce="{nonce}"') == 2  # the script and the style
    config = re.search(r'id="chat-config">(.*?)</script>', html, re.S).group(1)
    assert "<" not in config and ">" not in config and "&" not in config
    assert "\u2028" not in config
    assert json.loads(config)["title"] == title


def test_an_embedded_chat_has_no_hosted_page(chat_deployment):
    workflow = chat_deployment.activate(chat_workflow(mode="webhook"))
    assert httpx.get(chat_url(chat_deployment.base, workflow)).status_code == 404
