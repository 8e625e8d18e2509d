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
