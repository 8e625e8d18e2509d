"""The conditions of an If node in the editor (n8n's "filter" parameter), in a real headless
Chromium against a real deployment: an n8n export's conditions show as rows, and an edit is
saved in n8n's shape with the options n8n's editor writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.deployment import fresh_ids
from tests.editor.conftest import API_KEY

expect = pytest.importorskip("playwright.sync_api").expect

EXPORT = Path(__file__).resolve().parents[2] / "examples" / "n8n-exports" / "chat-approval-if.json"


def test_an_if_node_s_conditions_show_as_rows_and_an_edit_is_saved_in_n8n_s_shape(
    deployment, new_tab
):
    workflow = fresh_ids(json.loads(EXPORT.read_text())[0])
    deployment.workflows.save(workflow)
    page = new_tab().page
    page.goto(f"{deployment.base}/#key={API_KEY}&workflow={workflow['id']}")
    page.locator(".node[data-node-name='Approved?']").click()
    dialog = page.locator("#ndv")
    expect(dialog.locator("#ndv-title")).to_have_text("Approved?")
    conditions = dialog.locator(".param[data-param='conditions'] .condition")
    expect(conditions).to_have_count(1)
    expect(conditions.locator("input.left")).to_have_value("={{ $json.data.approved }}")
    expect(conditions.locator("select.operator")).to_have_value("boolean:true")
    expect(conditions.locator("input.right")).to_have_count(0)  # "is true" takes one value

    dialog.locator(".param[data-param='conditions'] .add-row").click()
    expect(conditions).to_have_count(2)
    second = conditions.nth(1)
    second.locator("input.left").fill("={{ $json.data.respondedAt }}")
    second.locator("input.left").dispatch_event("change")
    second.locator("select.operator").select_option("number:gt")
    second.locator("input.right").fill("5")
    second.locator("input.right").dispatch_event("change")
    dialog.locator(".param[data-param='conditions'] select.combinator").select_option("or")
    page.click("#ndv-close")
    page.click("#save")
    expect(page.locator("#dirty")).to_be_hidden()

    saved = deployment.workflows.get_json(workflow["id"])
    node = next(n for n in saved["nodes"] if n["name"] == "Approved?")
    value = node["parameters"]["conditions"]
    assert value["combinator"] == "or"
    assert value["options"] == {
        "caseSensitive": True,
        "leftValue": "",
        "typeValidation": "strict",
        "version": 3,
    }
    assert value["conditions"][0]["operator"] == {
        "type": "boolean",
        "operation": "true",
        "singleValue": True,
    }
    added = value["conditions"][1]
    assert (added["leftValue"], added["rightValue"]) == ("={{ $json.data.respondedAt }}", 5)
    assert added["operator"] == {"type": "number", "operation": "gt"}


def _node(page, name: str):
    return page.locator(f".node[data-node-name='{name}']")


def test_an_if_has_a_true_and_a_false_port_and_a_merge_two_inputs_each_wired_by_index(
    deployment, new_tab
):
    workflow = fresh_ids(json.loads(EXPORT.read_text())[0])
    workflow["nodes"].append(
        {
            "parameters": {},
            "type": "n8n-nodes-base.merge",
            "typeVersion": 3.2,
            "position": [900, 0],
            "id": "merge-under-test",
            "name": "Merge",
        }
    )
    workflow["connections"]["Approved?"] = {"main": [[], []]}
    deployment.workflows.save(workflow)
    page = new_tab().page
    page.goto(f"{deployment.base}/#key={API_KEY}&workflow={workflow['id']}")
    outputs = _node(page, "Approved?").locator(".handle.out")
    expect(outputs).to_have_count(2)
    expect(_node(page, "Approved?").locator(".port-label.out")).to_have_text(["true", "false"])
    inputs = _node(page, "Merge").locator(".handle.in")
    expect(inputs).to_have_count(2)

    outputs.nth(1).drag_to(_node(page, "Declined").locator(".handle.in"))
    outputs.nth(0).drag_to(inputs.nth(1))
    expect(page.locator(".edge.main[data-from='Approved?']")).to_have_count(2)
    page.click("#save")
    expect(page.locator("#dirty")).to_be_hidden()

    saved = deployment.workflows.get_json(workflow["id"])["connections"]["Approved?"]["main"]
    assert saved[0] == [{"node": "Merge", "type": "main", "index": 1}]
    assert saved[1] == [{"node": "Declined", "type": "main", "index": 0}]
