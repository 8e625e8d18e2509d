"""Every door against a real api and worker (keyless, on loopback): no cross-site writes to REST,
bodies refused early by per-route limits and parsed without holding the api, REST ids and
versions, no Redis address in public errors."""

from __future__ import annotations

import socket
import uuid

import httpx
import pytest

from tests.e2e.deployment import chat_url, fresh_ids
from tests.e2e.test_hostile_input import _double_workflow, _hook_url
from tests.workflows import REDIS_CHAT, example

MIB = 1024 * 1024


def _workflow_body() -> dict:
    workflow = fresh_ids(example(REDIS_CHAT))
    workflow["name"] = f"csrf-{uuid.uuid4().hex[:6]}"
    return workflow


def _names(base: str) -> set[str]:
    return {w["name"] for w in httpx.get(f"{base}/rest/workflows").json()["data"]}


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://evil.example", "Content-Type": "text/plain"},
        {"Origin": "http://evil.example", "Content-Type": "application/json"},
        {"Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain"},
        {"Content-Type": "text/plain"},
        {"Content-Type": "application/x-www-form-urlencoded"},
    ],
)
def test_keyless_rest_refuses_a_cross_site_or_non_json_write_and_stores_nothing(
    deployment, headers
):
    body = _workflow_body()
    response = httpx.post(
        f"{deployment.base}/rest/workflows",
        content=httpx.Request("POST", "/", json=body).content,
        headers=headers,
        timeout=10,
    )
    assert response.status_code in (403, 415)
    assert response.json()["message"]
    assert body["name"] not in _names(deployment.base)
    assert deployment.redis.get(deployment.keys.workflow(body["id"])) is None


def test_keyless_rest_takes_json_from_its_own_page_and_from_curl(deployment):
    base = deployment.base
    own_page = {"Origin": base, "Sec-Fetch-Site": "same-origin"}
    first, second = _workflow_body(), _workflow_body()
    assert httpx.post(f"{base}/rest/workflows", json=first, headers=own_page).status_code == 201
    assert httpx.post(f"{base}/rest/workflows", json=second).status_code == 201
    assert {first["name"], second["name"]} <= _names(base)
    activated = httpx.post(f"{base}/rest/workflows/{first['id']}/activate", headers=own_page)
    assert activated.status_code == 200


def test_a_body_past_the_chat_limit_is_refused_from_its_content_length_before_it_is_sent(
    deployment,
):
    workflow = deployment.activate(fresh_ids(example(REDIS_CHAT)))
    path = chat_url(deployment.base, workflow).split("/", 3)[3]
    host, port = deployment.base.rsplit("/", 1)[1].split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        head = (
            f"POST /{path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {2 * MIB}\r\n\r\n"
        )
        sock.sendall(head.encode())  # and not one byte of the body
        answer = sock.recv(65536).decode()
    assert answer.startswith("HTTP/1.1 413")
    assert deployment.redis.zcard(deployment.keys.workflow_executions(workflow["id"])) == 0


def test_bodies_past_the_value_budget_get_413_and_start_nothing(deployment):
    received = _double_workflow()
    received["nodes"][0]["parameters"]["responseMode"] = "onReceived"
    hook = _hook_url(deployment.base, deployment.activate(received))
    chat_workflow = deployment.activate(fresh_ids(example(REDIS_CHAT)))
    chat = chat_url(deployment.base, chat_workflow)
    bodies = [
        (hook, b"[" + b"1," * 200_000 + b"1]", "application/json", "too many values"),
        (hook, b"a=" + b"%41" * 30_000, "application/x-www-form-urlencoded", "too many fields"),
        (chat, b'{"sessionId":"b","chatInput":"' + b"[]," * 60_000 + b'"}', "application/json",
         "too many values"),
    ]  # fmt: skip
    for url, data, mime, message in bodies:
        response = httpx.post(url, content=data, headers={"content-type": mime}, timeout=30)
        assert response.status_code == 413, url
        assert message in response.json()["message"]
    for workflow in (received, chat_workflow):
        assert deployment.redis.zcard(deployment.keys.workflow_executions(workflow["id"])) == 0


def test_rest_ids_are_checked_and_a_stale_patch_is_a_conflict(deployment):
    base = deployment.base
    assert httpx.get(f"{base}/rest/workflows/a%2Fb").status_code == 404  # no route has a slash
    for bad in ("%ED%A0%80", "x" * 129, ".hidden", "%5Cud800"):
        response = httpx.get(f"{base}/rest/workflows/{bad}")
        assert response.status_code == 400, bad
        assert "id is 1-128 letters" in response.json()["message"], bad
    long = httpx.post(f"{base}/rest/workflows", json={**_workflow_body(), "id": "x" * 100_000})
    assert long.status_code == 400
    created = httpx.post(f"{base}/rest/workflows", json=_workflow_body()).json()
    url = f"{base}/rest/workflows/{created['id']}"
    saved = httpx.patch(url, json={"name": "first", "versionId": created["versionId"]})
    assert saved.status_code == 200
    stale = httpx.patch(url, json={"name": "second", "versionId": created["versionId"]})
    assert stale.status_code == 409
    assert httpx.get(url).json()["name"] == "first"


def test_readyz_and_push_never_name_the_redis_address_when_it_is_down(deployment):
    port = deployment.redis_url.rsplit(":", 1)[1].split("/")[0]
    api = deployment.start_api(REDIS_URL="redis://127.0.0.1:1/0")
    ready = httpx.get(f"{api}/readyz", timeout=30)
    assert ready.status_code == 503
    assert ":1" not in ready.text and "127.0.0.1" not in ready.text and port not in ready.text
