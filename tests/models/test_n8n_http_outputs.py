"""The HTTP Request node against n8n 2.41.1: every case under tests/n8n_outputs/http_request/
runs here on the same fixed-answer server (tests/fakes/http_answers.py, on loopback, which the
client is allowed to reach) and must give the items n8n gave, or fail at the same node with the
same message and httpCode (recorded by scripts/record-n8n-http-outputs).

Compared: each node's first run, the JSON of its items in order. Not compared: `pairedItem` and
`binary` (n8n keeps a file's bytes in its binary store; only its description is comparable, and
is checked in tests/models/test_http_request.py). The echoed requests show what each side sent:
query and form encoding, headers, body bytes.
"""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path
from typing import Any

import pytest

from engine.executor import run_workflow
from engine.services import Services
from engine.workflow import load_workflow
from models.egress import EgressPolicy
from models.http_requests import HttpRequests
from tests.fakes.http_answers import HttpAnswers, start_http_answers

CASES = Path(__file__).resolve().parents[1] / "n8n_outputs" / "http_request"
PLACEHOLDER = "http://SERVER"
LOOPBACK = EgressPolicy(allowed_ranges=(ipaddress.ip_network("127.0.0.0/8"),))


@pytest.fixture(scope="module")
def server():
    answers = start_http_answers()
    yield answers
    answers.stop()


def _json_only(outputs: list[list[dict]]) -> list[list[Any]]:
    return [[item.get("json") for item in items or []] for items in outputs]


def _run(case: dict, server: HttpAnswers):
    text = json.dumps(case["workflow"]).replace(PLACEHOLDER, server.url)
    services = Services(http=HttpRequests(LOOPBACK, 1024 * 1024))
    items = [{"json": item.get("json", {})} for item in case["input"]]
    return run_workflow(load_workflow(json.loads(text)), items, services=services)


@pytest.mark.parametrize("path", sorted(CASES.glob("*.json")), ids=lambda p: p.stem)
def test_the_http_request_node_gives_what_n8n_gave(path: Path, server: HttpAnswers):
    case = json.loads(path.read_text())
    run = _run(case, server)
    trigger = case["workflow"]["nodes"][0]["name"]
    ran = {
        name: json.loads(
            json.dumps(_json_only(runs[0]["data"]["main"])).replace(server.url, PLACEHOLDER)
        )
        for name, runs in run.run_data.items()
        if name != trigger and runs and runs[0].get("executionStatus") == "success"
    }
    assert ran == {name: _json_only(outputs) for name, outputs in case["outputs"].items()}
    if "error" not in case:
        assert run.status == "success", run.error
        return
    expected = case["error"]
    assert (run.status, run.error_node) == ("error", expected["node"])
    error = run.run_data[expected["node"]][0]["error"]
    assert (error["message"], error["httpCode"]) == (expected["message"], expected["httpCode"])
    assert error["description"] == expected["description"]


def test_every_http_case_was_recorded_on_n8n_2_41_1():
    paths = sorted(CASES.glob("*.json"))
    assert len(paths) >= 3
    for path in paths:
        case = json.loads(path.read_text())
        assert case["n8n"] == "2.41.1", path
        assert case["outputs"] or "error" in case, f"{path}: run scripts/record-n8n-http-outputs"
