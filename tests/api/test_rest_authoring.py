"""The REST the editor authors workflows with: node types from the engine's declarations, the
credential list without secrets, saves guarded by versionId, and validation errors naming the
node (Flask test client, real Redis)."""

from __future__ import annotations

import json

import pytest

from api.app import create_app
from core.settings import Settings
from engine.registry import node_types
from tests.e2e.deployment import fresh_ids
from tests.workflows import REDIS_CHAT, example, node

API_KEY = "authoring-test-key"
AGENT = "@n8n/n8n-nodes-langchain.agent"


@pytest.fixture
def client(redis_url, keys, tmp_path, monkeypatch):
    creds = tmp_path / "credentials.json"
    creds.write_text(
        json.dumps(
            [
                {
                    "id": "c1",
                    "name": "Local Ollama",
                    "type": "openAiApi",
                    "data": {"apiKey": "sk-x"},
                },
                {"id": "c2", "name": "Cache", "type": "redis", "data": {"password": "pw"}},
            ]
        )
    )
    monkeypatch.setenv("MINI_N8N_CREDENTIALS_FILE", str(creds))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    settings = Settings(redis_url=redis_url, api_key=API_KEY, key_prefix=keys.prefix)
    test_client = create_app(settings=settings).test_client()
    test_client.environ_base["HTTP_X_N8N_API_KEY"] = API_KEY
    return test_client


def test_node_types_lists_every_registered_type_with_its_declaration(client):
    response = client.get("/rest/node-types")
    assert response.status_code == 200
    data = {t["name"]: t for t in response.json["data"]}
    assert set(data) == set(node_types())
    agent = data[AGENT]
    assert agent["displayName"] == "AI Agent" and agent["group"] == "agent"
    assert agent["inputs"] == [
        {"type": "main", "required": False},
        {
            "type": "ai_languageModel",
            "required": True,
            "maxConnections": 1,
            "displayName": "Chat Model",
        },
        {"type": "ai_memory", "required": False, "maxConnections": 1, "displayName": "Memory"},
        {"type": "ai_tool", "required": False, "displayName": "Tool"},
    ]
    text = next(p for p in agent["properties"] if p["name"] == "text")
    assert text["displayOptions"] == {"show": {"promptType": ["define"]}}
    assert text["required"] is True
    openai = data["@n8n/n8n-nodes-langchain.lmChatOpenAi"]
    assert openai["outputs"] == ["ai_languageModel"]
    assert openai["credentials"] == [{"name": "openAiApi", "required": True}]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/rest/node-types"),
        ("GET", "/rest/credentials"),
        ("POST", "/rest/expressions/preview"),
    ],
)
def test_the_authoring_routes_need_the_api_key(client, method, path):
    wrong = client.open(path, method=method, headers={"X-N8N-API-KEY": "wrong"}, json={})
    assert wrong.status_code == 401
    missing = client.open(path, method=method, environ_base={"HTTP_X_N8N_API_KEY": ""}, json={})
    assert missing.status_code == 401


def test_credentials_list_ids_names_and_types_never_the_data(client):
    response = client.get("/rest/credentials")
    assert response.json == {
        "data": [
            {"id": "c1", "name": "Local Ollama", "type": "openAiApi"},
            {"id": "c2", "name": "Cache", "type": "redis"},
        ]
    }
    assert "sk-x" not in response.get_data(as_text=True)


def test_a_save_with_a_stale_version_id_is_refused_and_changes_nothing(client):
    created = client.post("/rest/workflows", json=fresh_ids(example(REDIS_CHAT))).json
    first = dict(created, name="First tab")
    second = dict(created, name="Second tab")
    saved = client.put(f"/rest/workflows/{created['id']}", json=first)
    assert saved.status_code == 200
    assert saved.json["versionId"] != created["versionId"]
    stale = client.put(f"/rest/workflows/{created['id']}", json=second)
    assert stale.status_code == 409
    assert stale.json["code"] == "versionConflict"
    assert client.get(f"/rest/workflows/{created['id']}").json["name"] == "First tab"
    again = client.put(f"/rest/workflows/{created['id']}", json=dict(saved.json, name="Second"))
    assert again.status_code == 200


@pytest.mark.parametrize("method", ["put", "patch"])
def test_a_save_without_a_version_id_overwrites_as_n8ns_does(client, method):
    created = client.post("/rest/workflows", json=fresh_ids(example(REDIS_CHAT))).json
    client.put(f"/rest/workflows/{created['id']}", json=dict(created, name="Another tab"))
    body = {k: v for k, v in created.items() if k != "versionId"} | {"name": "A script"}
    saved = getattr(client, method)(f"/rest/workflows/{created['id']}", json=body)
    assert saved.status_code == 200 and saved.json["name"] == "A script"
    assert saved.json["versionId"] not in (created["versionId"], None)


def test_a_bad_parameter_is_refused_at_save_naming_the_node_from_the_declaration(client):
    workflow = fresh_ids(example(REDIS_CHAT))
    node(workflow, "Mock Chat Model")["parameters"]["delayPerTokenMs"] = "slow"
    response = client.post("/rest/workflows", json=workflow)
    assert response.status_code == 400
    assert response.json == {
        "message": 'Node "Mock Chat Model": Delay per Token (ms) must be a number (delayPerTokenMs)',
        "node": "Mock Chat Model",
    }
