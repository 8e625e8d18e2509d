"""Where a trigger listens, shown where n8n shows it: the Chat Trigger's panel has its chat URL
(and the chat page when public) and the Webhook node's its production URL, each with a copy
button and a word on whether it answers; the URL shown is the one that answers (real headless
Chromium, real deployment)."""

from __future__ import annotations

import httpx
import pytest

from tests.e2e.client import stream_chat
from tests.e2e.deployment import fresh_ids
from tests.editor.conftest import API_KEY
from tests.workflows import GREETING, REDIS_CHAT, example, node

expect = pytest.importorskip("playwright.sync_api").expect

TRIGGER = "When chat message received"
NOT_ACTIVE = "Chat will be live at the URL above once you activate this workflow."
NOT_PUBLIC = "This chat is not public: its URL answers 404 to everyone."


def open_panel(new_tab, deployment, workflow: dict, name: str):
    tab = new_tab()
    page = tab.page
    page.goto(f"{deployment.base}/#key={API_KEY}&workflow={workflow['id']}")
    page.locator(f".node[data-node-name='{name}']").click()
    panel = page.locator("#ndv")
    expect(panel.locator("#ndv-title")).to_have_text(name)
    return tab, panel


def test_the_chat_trigger_panel_shows_the_chat_url_that_answers_its_page_and_copies_it(
    deployment, new_tab, editor_context
):
    workflow = deployment.activate(fresh_ids(example(REDIS_CHAT)))
    webhook_id = node(workflow, TRIGGER)["webhookId"]
    url = f"{deployment.base}/webhook/{webhook_id}/chat"
    editor_context.grant_permissions(["clipboard-read", "clipboard-write"], origin=deployment.base)
    tab, panel = open_panel(new_tab, deployment, workflow, TRIGGER)
    urls = panel.locator(".webhook-urls[data-kind='chat']")
    expect(urls.locator("h3")).to_have_text("Chat URL")
    expect(urls.locator(".url")).to_have_text(url)
    expect(urls.locator("a.chat-page")).to_have_attribute("href", url)
    expect(urls.locator(".url-note").first).to_have_text(
        "Live: open the chat page, or POST messages to this URL."
    )
    urls.locator(".copy-url").click()
    expect(urls.locator(".copy-url")).to_have_text("Copied")
    assert tab.page.evaluate("navigator.clipboard.readText()") == url

    reply = stream_chat(url, "What is 19 * 23?", "panel-url")  # the URL shown is the live one
    assert reply.text() == "Based on the tools: Calculator returned 437."
    page = httpx.get(url, timeout=10)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert tab.errors == []


def test_an_inactive_chat_says_when_it_will_be_live_and_a_private_one_that_it_answers_404(
    deployment, new_tab
):
    workflow = fresh_ids(example(REDIS_CHAT))
    deployment.workflows.save(workflow)  # stored, not active
    tab, panel = open_panel(new_tab, deployment, workflow, TRIGGER)
    urls = panel.locator(".webhook-urls[data-kind='chat']")
    expect(urls.locator(".url-note").first).to_have_text(NOT_ACTIVE)
    expect(urls.locator("a.chat-page")).to_have_count(1)

    panel.locator("[data-param='public'] input[type='checkbox']").uncheck()
    expect(urls.locator(".url-note").first).to_contain_text(NOT_PUBLIC)
    expect(urls.locator("a.chat-page")).to_have_count(0)  # a private chat has no page
    expect(urls.locator(".url")).to_have_text(
        f"{deployment.base}/webhook/{node(workflow, TRIGGER)['webhookId']}/chat"
    )
    assert tab.errors == []


def test_a_chat_trigger_with_its_own_path_shows_that_path(deployment, new_tab):
    workflow = fresh_ids(example(REDIS_CHAT))
    node(workflow, TRIGGER)["parameters"]["path"] = "/support/chat/"
    deployment.activate(workflow)
    tab, panel = open_panel(new_tab, deployment, workflow, TRIGGER)
    url = f"{deployment.base}/webhook/support/chat"
    expect(panel.locator(".webhook-urls .url")).to_have_text(url)
    reply = stream_chat(url, "What is 6 * 7?", "own-path")
    assert reply.text() == "Based on the tools: Calculator returned 42."
    assert tab.errors == []


def test_the_webhook_panel_shows_its_production_url_with_its_method_and_why_no_test_url(
    deployment, new_tab
):
    workflow = deployment.activate(fresh_ids(example(GREETING)))
    hook = next(n for n in workflow["nodes"] if n["type"] == "n8n-nodes-base.webhook")
    url = f"{deployment.base}/webhook/{hook['parameters']['path']}"
    tab, panel = open_panel(new_tab, deployment, workflow, hook["name"])
    row = panel.locator(".webhook-urls[data-kind='webhook'] .url-row[data-url='production']")
    expect(panel.locator(".webhook-urls h3")).to_have_text("Webhook URLs")
    expect(row.locator(".url-label")).to_have_text("Production URL")
    expect(row.locator(".url-method")).to_have_text("POST")
    expect(row.locator(".url")).to_have_text(url)
    notes = panel.locator(".webhook-urls .url-note")
    expect(notes.nth(0)).to_contain_text("Live: the production URL answers now")
    expect(notes.nth(1)).to_contain_text("No test URL")
    answer = httpx.post(url, json={"name": "Ada"}, timeout=10)  # the URL shown answers
    assert answer.status_code == 200, answer.text
    assert tab.errors == []
