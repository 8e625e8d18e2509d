"""Helpers for the HTTP Request nodes' engine tests: workflows around the node, and a client that
records each request and answers what the test says, with no network (the engine does no I/O:
what the real client does is tests/models/test_http_request.py's)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from core.credentials import CredentialStore
from engine.executor import run_workflow
from engine.http_client import IncomingResponse, OutgoingRequest
from engine.services import Services
from engine.workflow import load_workflow

Answer = Callable[[OutgoingRequest], IncomingResponse]
NODE = "HTTP Request"


def answer(status: int = 200, body: Any = None, content_type: str = "application/json",
           headers: tuple = (), reason: str = "OK") -> IncomingResponse:  # fmt: skip
    data = body if isinstance(body, bytes) else json.dumps(body or {}).encode()
    return IncomingResponse(status, reason, (("content-type", content_type), *headers), data, "")


class RecordingClient:
    def __init__(self, respond: Answer | None = None):
        self.requests: list[OutgoingRequest] = []
        self.respond = respond or (lambda request: answer(200, {"ok": True}))

    def send(self, request: OutgoingRequest, cancel: Any = None) -> IncomingResponse:
        self.requests.append(request)
        response = self.respond(request)
        return IncomingResponse(response.status, response.reason, response.headers,
                                response.body, request.url)  # fmt: skip

    def header(self, name: str, index: int = -1) -> str | None:
        wanted = name.lower()
        headers = self.requests[index].headers
        return next((v for k, v in headers if k.lower() == wanted), None)


def http_workflow(parameters: dict, version: float = 4.2, credentials: dict | None = None,
                  node_type: str = "n8n-nodes-base.httpRequest") -> dict:  # fmt: skip
    node: dict[str, Any] = {
        "id": "http-1",
        "name": NODE,
        "type": node_type,
        "typeVersion": version,
        "position": [200, 0],
        "parameters": parameters,
    }
    if credentials:
        node["credentials"] = credentials
    return {
        "nodes": [
            {
                "id": "hook",
                "name": "Webhook",
                "type": "n8n-nodes-base.webhook",
                "typeVersion": 2,
                "position": [0, 0],
                "parameters": {"path": "x"},
            },  # fmt: skip
            node,
        ],
        "connections": {"Webhook": {"main": [[{"node": NODE, "type": "main", "index": 0}]]}},
    }


def run_http(parameters: dict, client: RecordingClient, items: list[dict] | None = None,
             version: float = 4.2, credentials: list[dict] | None = None,
             refs: dict | None = None):  # fmt: skip
    """Run Webhook -> HTTP Request on `items` (one empty item by default)."""
    workflow = load_workflow(http_workflow(parameters, version, refs))
    services = Services(http=client, credentials=CredentialStore(credentials or []))
    return run_workflow(workflow, items or [{"json": {}}], services=services)


def output(run) -> list[dict]:
    assert run.status == "success", run.error
    return [item["json"] for item in run.run_data[NODE][0]["data"]["main"][0]]


def error(run) -> dict:
    assert run.status == "error"
    return run.run_data[NODE][0]["error"]
