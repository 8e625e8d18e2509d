"""The editor page in a real headless Chromium against a real deployment: the chat panel runs
the workflow manually on the workers and follows it over push (SSE)."""

from __future__ import annotations

import re

import pytest

from tests.e2e.deployment import fresh_ids
from tests.editor.conftest import API_KEY
from tests.workflows import REDIS_CHAT, example, with_model_delay

expect = pytest.importorskip("playwright.sync_api").expect

ANSWER = "Based on the tools: Calculator returned 87."
CALLED_NODES = ["When chat message received", "AI Agent", "Mock Chat Model", "Redis Chat Memory"]
EXECUTED = [*CALLED_NODES, "Calculator"]
TIMEOUT_MS = 20_000


def store(deployment, workflow: dict) -> dict:
    workflow = fresh_ids(workflow)
    deployment.workflows.save(workflow)
    return workflow


def open_editor(new_tab, deployment, workflow: dict):
    tab = new_tab()
    page = tab.page
    page.goto(f"{deployment.base}/#key={API_KEY}&workflow={workflow['id']}")
    expect(page.locator(".node[data-node-name='AI Agent']")).to_be_visible()
    expect(page.locator("#push-state")).to_have_attribute("data-state", "up")
    page.click("#open-chat")
    return tab


def send(page, text: str) -> None:
    page.fill("#chat-input", text)
    page.press("#chat-input", "Enter")


def bot(page, index: int):
    return page.locator(".message.bot").nth(index)


def node(page, name: str):
    return page.locator(f".node[data-node-name='{name}']")


def expect_answer(page, index: int, text: str) -> None:
    expect(bot(page, index)).to_have_attribute("data-state", "done", timeout=TIMEOUT_MS)
    expect(bot(page, index)).to_have_text(text)


def expect_idle(page) -> None:
    state = page.locator("#execution-state")
    expect(state).not_to_have_text("Executing…", timeout=TIMEOUT_MS)
    expect(state).to_have_attribute("data-state", "success")


# --- the chat panel ---------------------------------------------------------------------------
def test_chat_answer_streams_into_the_panel(deployment, new_tab):
    workflow = store(deployment, with_model_delay(example(REDIS_CHAT), 25))
    tab = open_editor(new_tab, deployment, workflow)
    page = tab.page
    assert "key=" not in page.url  # the key signed the browser in and left the address bar
    page.evaluate(
        """() => {
        window.seenTexts = [];
        new MutationObserver(() => {
          const last = [...document.querySelectorAll('.message.bot .text')].pop();
          if (last && window.seenTexts.at(-1) !== last.textContent)
            window.seenTexts.push(last.textContent);
        }).observe(document.querySelector('#chat-messages'),
                   {subtree: true, childList: true, characterData: true});
      }"""
    )
    send(page, "What is 29 * 3?")
    expect_answer(page, 0, ANSWER)
    texts = [t for t in page.evaluate("window.seenTexts") if t != "…"]
    partial = [t for t in texts if t != ANSWER]
    assert len(partial) >= 3, texts  # it grew token by token
    assert all(ANSWER.startswith(t) for t in texts), texts
    expect_idle(page)
    assert tab.errors == []


def test_canvas_marks_the_trigger_the_agent_and_its_three_sub_nodes_as_executed(
    deployment, new_tab
):
    workflow = store(deployment, example(REDIS_CHAT))
    tab = open_editor(new_tab, deployment, workflow)
    page = tab.page
    for name in EXECUTED:
        expect(node(page, name)).to_have_attribute("data-status", "none")
    send(page, "What is 29 * 3?")
    expect_answer(page, 0, ANSWER)
    for name in EXECUTED:
        expect(node(page, name)).to_have_attribute("data-status", "success")
    expect(node(page, "Mock Chat Model")).to_have_attribute("data-runs", "2")
    expect(node(page, "Mock Chat Model").locator(".run-count")).to_have_text("2")
    expect(node(page, "Calculator")).to_have_attribute("data-runs", "1")
    expect(page.locator(".edge.main[data-to='AI Agent']")).to_have_count(1)
    expect(page.locator(".edge.ai[data-to='AI Agent']")).to_have_count(3)
    expect_idle(page)
    assert tab.errors == []


def test_the_third_message_remembers_the_second(deployment, new_tab):
    workflow = store(deployment, example(REDIS_CHAT))
    tab = open_editor(new_tab, deployment, workflow)
    page = tab.page
    send(page, "What is 29 * 3?")
    expect_answer(page, 0, ANSWER)
    send(page, "My name is Ada")
    expect_answer(page, 1, "Nice to meet you, Ada!")
    send(page, "What is my name?")
    expect_answer(page, 2, "Your name is Ada.")
    # No tool this time: the Calculator did not run in the execution on display.
    expect(node(page, "Calculator")).to_have_attribute("data-runs", "0")
    expect(node(page, "Mock Chat Model")).to_have_attribute("data-runs", "1")
    assert tab.errors == []


# --- the node view ----------------------------------------------------------------------------
def test_model_node_shows_two_runs_and_the_calculator_shows_the_models_arguments(
    deployment, new_tab
):
    workflow = store(deployment, example(REDIS_CHAT))
    tab = open_editor(new_tab, deployment, workflow)
    page = tab.page
    send(page, "What is 29 * 3?")
    expect_answer(page, 0, ANSWER)
    expect_idle(page)

    node(page, "Mock Chat Model").click()
    dialog = page.locator("#ndv")
    expect(dialog.locator("#ndv-title")).to_have_text("Mock Chat Model")
    expect(dialog.locator(".run-tab")).to_have_text(["Run 1", "Run 2"])
    expect(dialog.locator(".ndv-output pre")).to_contain_text('"input": "29 * 3"')  # tool call
    dialog.locator(".run-tab").nth(1).click()
    expect(dialog.locator(".ndv-output pre")).to_contain_text(ANSWER)
    expect(dialog.locator(".ndv-input pre")).to_contain_text('"content": "87"')  # tool result
    page.click("#ndv-close")

    node(page, "Calculator").click()
    expect(dialog.locator("#ndv-title")).to_have_text("Calculator")
    expect(dialog.locator(".run-tab")).to_have_count(1)
    expect(dialog.locator(".ndv-input pre")).to_contain_text('"input": "29 * 3"')
    expect(dialog.locator(".ndv-output pre")).to_contain_text('"response": "87"')
    page.click("#ndv-close")

    node(page, "AI Agent").click()
    expect(dialog.locator(".ndv-input pre")).to_contain_text('"chatInput": "What is 29 * 3?"')
    expect(dialog.locator(".ndv-output pre")).to_contain_text(f'"output": "{ANSWER}"')
    assert tab.errors == []


# --- the race: push before the response -------------------------------------------------------
def test_events_that_arrive_before_the_execution_id_are_applied_once_it_is_known(
    deployment, new_tab
):
    """Each POST's response is held until its execution's push events, executionFinished
    included, have reached the page; then the responses are released, the last one first."""
    workflow = store(deployment, example(REDIS_CHAT))
    tab = open_editor(new_tab, deployment, workflow)
    page = tab.page
    held = []

    def hold(route):
        held.append((route, route.fetch()))  # the server started it; the page does not know

    page.route("**/rest/workflows/*/chat", hold)
    questions = {"What is 29 * 3?": ANSWER, "What is 6 * 7?": ANSWER.replace("87", "42")}
    for question in questions:
        send(page, question)
    page.wait_for_function(
        """n => [...window.editor.executions.early.values()]
              .filter(events => events.some(e => e.type === 'executionFinished')).length === n""",
        arg=len(questions),
        timeout=TIMEOUT_MS,
    )
    assert len(held) == len(questions)
    for index, (_, response) in enumerate(held):
        execution_id = response.json()["executionId"]
        early = page.evaluate("id => window.editor.executions.earlyTypes(id)", execution_id)
        assert early[0] == "executionStarted" and early[-1] == "executionFinished"
        assert "chatChunk" in early
        expect(bot(page, index)).to_have_text("…")  # nothing applied while the id is unknown
    expect(page.locator("#execution-state")).to_have_text("Executing…")

    for route, response in reversed(held):
        route.fulfill(response=response)
    for index, answer in enumerate(questions.values()):
        expect_answer(page, index, answer)
    expect_idle(page)
    for name in EXECUTED:
        expect(node(page, name)).to_have_attribute("data-status", "success")
    assert page.evaluate("window.editor.executions.early.size") == 0
    assert tab.errors == []


def test_twenty_messages_sent_quickly_all_complete(deployment, new_tab):
    workflow = store(deployment, example(REDIS_CHAT))
    tab = open_editor(new_tab, deployment, workflow)
    page = tab.page
    for i in range(1, 21):
        send(page, f"What is {i} * 3?")
    done = page.locator(".message.bot[data-state='done']")
    expect(done).to_have_count(20, timeout=30_000)
    for i in range(1, 21):
        expect(bot(page, i - 1)).to_have_text(f"Based on the tools: Calculator returned {3 * i}.")
    expect(page.locator(".message.bot", has_text=re.compile("^…$"))).to_have_count(0)
    expect_idle(page)
    rows = page.locator("#execution-list .execution")
    expect(rows).to_have_count(20)
    expect(page.locator("#execution-list .execution[data-status='success']")).to_have_count(20)
    caught = page.evaluate("window.editor.executions.caughtEarly")
    print(f"{caught} of 20 executions pushed events before their POST answered")
    assert tab.errors == []


# --- executions list --------------------------------------------------------------------------
def test_stop_button_stops_a_running_execution(deployment, new_tab):
    workflow = store(deployment, with_model_delay(example(REDIS_CHAT), 300))
    tab = open_editor(new_tab, deployment, workflow)
    page = tab.page
    send(page, "please repeat all of these words back to me slowly one by one")
    expect(bot(page, 0)).to_have_attribute("data-state", "streaming", timeout=TIMEOUT_MS)
    row = page.locator("#execution-list .execution").first
    expect(row).to_have_attribute("data-status", "running")
    row.locator(".stop").click()
    expect(row).to_have_attribute("data-status", "canceled", timeout=TIMEOUT_MS)
    expect(row.locator(".stop")).to_have_count(0)
    expect(bot(page, 0)).to_have_attribute("data-state", "error")
    expect(bot(page, 0)).to_contain_text("The execution was stopped.")
    expect(page.locator("#execution-state")).to_have_text("Execution stopped")
    execution_id = row.get_attribute("data-execution-id")
    assert deployment.execution(execution_id)["status"] == "canceled"
    assert tab.errors == []
