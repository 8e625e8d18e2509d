"""The editor's chat panel with Chat nodes (responseNodes), in a real headless Chromium against a
real deployment: each Chat-node message shows as a bubble, and the message typed while a node
waits is its reply, which resumes the same run on a worker."""

from __future__ import annotations

import pytest

from core.waiting import EXPIRED
from tests.chat.conversation import FIRST, ask_name_workflow
from tests.editor.conftest import API_KEY
from tests.waiting import wait_until

expect = pytest.importorskip("playwright.sync_api").expect

TIMEOUT_MS = 20_000


def test_the_chat_panel_shows_chat_node_messages_and_answers_a_waiting_node(deployment, new_tab):
    workflow = ask_name_workflow()
    deployment.workflows.save(workflow)
    page = new_tab().page
    page.goto(f"{deployment.base}/#key={API_KEY}&workflow={workflow['id']}")
    expect(page.locator(".node[data-node-name='Ask name']")).to_be_visible()
    expect(page.locator("#push-state")).to_have_attribute("data-state", "up")
    page.click("#open-chat")
    page.fill("#chat-input", "hello")
    page.press("#chat-input", "Enter")
    question = page.locator(".message.bot").nth(0)
    expect(question).to_have_text(FIRST, timeout=TIMEOUT_MS)
    expect(question).to_have_attribute("data-waiting", "true")
    execution_id = question.get_attribute("data-execution-id")
    wait_until(
        lambda: deployment.execution(execution_id)["status"] == "waiting", 10, "the run to wait"
    )

    # The reply's own answer is held until the resumed run has finished, so its next message
    # reaches the page over push first (the order a busy machine can produce).
    def hold_until_finished(route):
        response = route.fetch()
        wait_until(
            lambda: deployment.execution(execution_id)["status"] == "success",
            10,
            "the resumed run to finish",
        )
        route.fulfill(response=response)

    page.route("**/rest/workflows/*/chat", hold_until_finished)
    page.fill("#chat-input", "Ada")
    page.press("#chat-input", "Enter")
    answer = page.locator(".message.bot").nth(1)
    expect(answer).to_have_text("Nice to meet you, Ada!", timeout=TIMEOUT_MS)
    expect(page.locator("#execution-state")).to_have_attribute(
        "data-state", "success", timeout=TIMEOUT_MS
    )
    expect(page.locator(".message.bot")).to_have_count(2)  # nothing after the last Chat node
    expect(page.locator(".message.user")).to_have_count(2)
    record = deployment.execution(execution_id)
    assert record["status"] == "success"
    assert record["runData"]["Ask name"][0]["data"]["main"][0][0]["json"]["chatInput"] == "Ada"
    assert deployment.redis.zcard(deployment.keys.workflow_executions(workflow["id"])) == 1


def test_a_wait_that_expires_shows_why_under_the_question(deployment, new_tab):
    limit = {"values": {"resumeAmount": 0.02, "resumeUnit": "minutes"}}  # 1.2 s
    workflow = ask_name_workflow(limitWaitTime=limit)
    deployment.workflows.save(workflow)
    page = new_tab().page
    page.goto(f"{deployment.base}/#key={API_KEY}&workflow={workflow['id']}")
    expect(page.locator("#push-state")).to_have_attribute("data-state", "up")
    page.click("#open-chat")
    page.fill("#chat-input", "hello")
    page.press("#chat-input", "Enter")
    expect(page.locator(".message.bot").nth(0)).to_have_text(FIRST, timeout=TIMEOUT_MS)
    outcome = page.locator(".message.bot").nth(1)
    expect(outcome).to_have_attribute("data-state", "error", timeout=TIMEOUT_MS)
    expect(outcome).to_have_text(EXPIRED)

    page.fill("#chat-input", "hello again")  # no wait any more: a new run asks again
    page.press("#chat-input", "Enter")
    expect(page.locator(".message.bot").nth(2)).to_have_text(FIRST, timeout=TIMEOUT_MS)
    assert deployment.redis.zcard(deployment.keys.workflow_executions(workflow["id"])) == 2
