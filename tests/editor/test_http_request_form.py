"""The HTTP Request Tool's form in the editor (a real headless Chromium against a real
deployment): built from the node's declaration, it shows each content type's body fields and the
credential picker its authentication names, as n8n's form does."""

from __future__ import annotations

import json

import pytest

from tests.e2e.deployment import Deployment
from tests.editor.conftest import API_KEY
from tests.editor.test_authoring import (
    AGENT,
    add_from_creator,
    add_to_slot,
    close_node,
    open_new_workflow,
    open_node,
    param,
)

expect = pytest.importorskip("playwright.sync_api").expect
HTTP_TOOL = "n8n-nodes-base.httpRequestTool"
CREDENTIALS = [{"id": "cred-key", "name": "Weather key", "type": "httpHeaderAuth",
                "data": {"name": "X-Api-Key", "value": "hdr-secret-value"}}]  # fmt: skip


@pytest.fixture(scope="module")
def deployment(redis_url, tmp_path_factory):
    path = tmp_path_factory.mktemp("credentials") / "credentials.json"
    path.write_text(json.dumps(CREDENTIALS))
    with Deployment.running(
        redis_url, MINI_N8N_API_KEY=API_KEY, MINI_N8N_CREDENTIALS_FILE=str(path)
    ) as deploy:
        yield deploy


def test_the_body_fields_follow_the_content_type_and_the_picker_the_auth_type(deployment, new_tab):
    tab = open_new_workflow(new_tab, deployment)
    page = tab.page
    add_from_creator(page, AGENT)
    add_to_slot(page, "AI Agent", "ai_tool", HTTP_TOOL)
    dialog = open_node(page, "HTTP Request Tool")
    expect(param(dialog, "toolDescription")).to_be_visible()
    expect(param(dialog, "contentType")).to_have_count(0)
    param(dialog, "sendBody").locator("input").check()
    expect(param(dialog, "bodyParameters")).to_be_visible()  # JSON, using fields: n8n's default
    param(dialog, "contentType").locator("select").select_option("raw")
    expect(param(dialog, "rawContentType")).to_be_visible()
    expect(param(dialog, "body")).to_be_visible()
    expect(param(dialog, "bodyParameters")).to_have_count(0)
    param(dialog, "contentType").locator("select").select_option("form-urlencoded")
    param(dialog, "specifyBody").locator("select").select_option("string")
    expect(param(dialog, "body")).to_be_visible()
    expect(param(dialog, "rawContentType")).to_have_count(0)
    param(dialog, "authentication").locator("select").select_option("genericCredentialType")
    param(dialog, "genericAuthType").locator("select").select_option("httpHeaderAuth")
    picker = dialog.locator(".param[data-credential='httpHeaderAuth'] select")
    expect(picker.locator("option")).to_have_text(["— choose a credential —", "Weather key"])
    picker.select_option(label="Weather key")
    close_node(page)
    tool = page.evaluate(
        "window.editor.state.workflow.nodes.find(n => n.type === 'n8n-nodes-base.httpRequestTool')"
    )
    assert tool["credentials"] == {"httpHeaderAuth": {"id": "cred-key", "name": "Weather key"}}
    assert tool["parameters"]["contentType"] == "form-urlencoded"
    assert "hdr-secret-value" not in page.content()
    assert tab.errors == []
