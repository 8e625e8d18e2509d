"""The editor's chat panel with Chat nodes (responseNodes), in a real headless Chromium against a
real deployment: each Chat-node message shows as a bubble, and the message typed while a node
waits is its reply, which resumes the same run on a worker; an approval's buttons; the Chat
node's form by version; the AI Agent's tool-step lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.chat.conversation import FIRST, ask_name_workflow
from tests.chat.support import ANSWER_84, chat_workflow
from tests.e2e.deployment import fresh_ids
from tests.editor.conftest import API_KEY
from tests.waiting import wait_until

expect = pytest.importorskip("playwright.sync_api").expect

TIMEOUT_MS = 20_000
EXPORT_13 = Path(__file__).resolve().parents[2] / "examples" / "n8n-exports" / "chat-nodes-1-3.json"


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

    page.route("**/rest/workflows/*/chat", _held_until_finished(deployment, execution_id))
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


def _held_until_finished(deployment, execution_id: str):
    """A route handler: the reply's (or click's) own answer is held until the resumed run has
    finished, so its next message reaches the page over push first (the order a busy machine
    can produce)."""

    def hold(route):
        response = route.fetch()
        wait_until(
            lambda: deployment.execution(execution_id)["status"] == "success",
            10,
            "the resumed run to finish",
        )
        route.fulfill(response=response)

    return hold


def test_a_wait_that_expires_goes_on_without_a_reply_in_the_panel(deployment, new_tab):
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
    # As n8n: the wait ends without a reply and the Chat node passes its input on.
    greeting = page.locator(".message.bot").nth(1)
    expect(greeting).to_have_text("Nice to meet you, hello!", timeout=TIMEOUT_MS)

    page.fill("#chat-input", "hello again")  # the run is over: a new run asks again
    page.press("#chat-input", "Enter")
    expect(page.locator(".message.bot").nth(2)).to_have_text(FIRST, timeout=TIMEOUT_MS)
    assert deployment.redis.zcard(deployment.keys.workflow_executions(workflow["id"])) == 2


def test_the_chat_panel_shows_an_approval_s_buttons_and_a_click_resumes_the_run(
    deployment, new_tab
):
    """The n8n 2.41.1 export with 1.3 Chat nodes, from the editor: its approval's buttons."""
    workflow = fresh_ids(json.loads(EXPORT_13.read_text())[0])
    deployment.workflows.save(workflow)
    page = new_tab().page
    page.goto(f"{deployment.base}/#key={API_KEY}&workflow={workflow['id']}")
    expect(page.locator("#push-state")).to_have_attribute("data-state", "up")
    page.click("#open-chat")
    page.fill("#chat-input", "hello")
    page.press("#chat-input", "Enter")
    bots = page.locator(".message.bot")
    expect(bots.nth(0)).to_have_text("Welcome! This one does not wait.", timeout=TIMEOUT_MS)
    expect(bots.nth(1)).to_have_text("What is your name?", timeout=TIMEOUT_MS)
    page.fill("#chat-input", "Ada")
    page.press("#chat-input", "Enter")
    question = bots.nth(2)
    expect(question.locator(".text")).to_have_text("Shall I remember Ada?", timeout=TIMEOUT_MS)
    expect(question.locator("button")).to_have_text(["Yes", "No"])
    execution_id = str(bots.nth(0).get_attribute("data-execution-id"))
    page.route("**/webhook-waiting/**", _held_until_finished(deployment, execution_id))
    question.locator("button", has_text="Yes").click()
    expect(bots.nth(3)).to_have_text("Remembered Ada.", timeout=TIMEOUT_MS)
    expect(question.locator("button")).to_have_text(["Yes"])  # the click's answer came
    expect(page.locator("#execution-state")).to_have_attribute(
        "data-state", "success", timeout=TIMEOUT_MS
    )
    expect(bots).to_have_count(4)  # no empty bubble left by the late answer
    confirm = deployment.execution(execution_id)["runData"]["Confirm"][0]["data"]["main"][0][0]
    assert confirm["json"]["data"]["approved"] is True


def test_the_chat_node_form_follows_its_version_and_its_operation(deployment, new_tab):
    workflow = ask_name_workflow()
    new = next(n for n in workflow["nodes"] if n["name"] == "Greet")
    new.update(typeVersion=1.3, parameters={"message": "Hi", "options": {}})
    deployment.workflows.save(workflow)
    page = new_tab().page
    page.goto(f"{deployment.base}/#key={API_KEY}&workflow={workflow['id']}")
    dialog = open_node(page, "Ask name")  # typeVersion 1
    expect(param(dialog, "waitUserReply")).to_have_count(1)
    expect(param(dialog, "operation")).to_have_count(0)
    page.click("#ndv-close")

    dialog = open_node(page, "Greet")  # 1.3: operation, send by default
    expect(param(dialog, "waitUserReply")).to_have_count(0)
    expect(param(dialog, "operation").locator("select")).to_have_value("send")
    expect(param(dialog, "responseType")).to_have_count(0)
    expect(option_names(dialog)).to_have_text(["Add Option", "Add Memory Input Connection"])
    param(dialog, "operation").locator("select").select_option("sendAndWait")
    expect(param(dialog, "responseType").locator("select")).to_have_value("freeTextChat")
    expect(option_names(dialog)).to_have_text(
        ["Add Option", "Add Memory Input Connection", "Limit Wait Time"]
    )
    param(dialog, "responseType").locator("select").select_option("approval")
    expect(param(dialog, "blockUserInput")).to_have_count(1)
    expect(param(dialog, "approvalOptions")).to_have_count(1)
    expect(option_names(dialog)).to_have_text(["Add Option", "Limit Wait Time"])


def open_node(page, name: str):
    page.locator(f".node[data-node-name='{name}']").click()
    dialog = page.locator("#ndv")
    expect(dialog.locator("#ndv-title")).to_have_text(name)
    return dialog


def param(dialog, path: str):
    return dialog.locator(f".param[data-param='{path}']")


def option_names(dialog):
    return dialog.locator(".add-option[data-param='options'] option")


def test_the_chat_panel_shows_a_compact_line_per_tool_call_above_the_answer(deployment, new_tab):
    workflow = chat_workflow()
    agent = next(n for n in workflow["nodes"] if n["name"] == "AI Agent")
    agent["parameters"]["options"]["streamToolCalls"] = True
    deployment.workflows.save(workflow)
    page = new_tab().page
    page.goto(f"{deployment.base}/#key={API_KEY}&workflow={workflow['id']}")
    expect(page.locator("#push-state")).to_have_attribute("data-state", "up")
    page.click("#open-chat")
    page.fill("#chat-input", "What is 40 + 44?")
    page.press("#chat-input", "Enter")
    answer = page.locator(".message.bot").nth(0)
    expect(answer).to_have_attribute("data-state", "done", timeout=TIMEOUT_MS)
    expect(answer.locator(".text")).to_have_text(ANSWER_84)
    expect(answer.locator(".tool-step")).to_have_text(["Calculator · 40 + 44 → 84"])
