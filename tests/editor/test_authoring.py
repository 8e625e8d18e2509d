"""Building chat workflows in the editor, in a real headless Chromium against a real deployment:
only through the page, from an empty workflow, with the node creator, the Agent's slots, the
parameter forms, save, activation, export/import, undo and two tabs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import pytest

from tests.e2e.deployment import Deployment
from tests.editor.conftest import API_KEY
from tests.waiting import wait_until

expect = pytest.importorskip("playwright.sync_api").expect

AUTH = {"X-N8N-API-KEY": API_KEY}
TRIGGER = "When chat message received"
AGENT = "@n8n/n8n-nodes-langchain.agent"
CHAT_TRIGGER = "@n8n/n8n-nodes-langchain.chatTrigger"
MOCK = "mini-n8n.lmChatMock"
SIMPLE_MEMORY = "@n8n/n8n-nodes-langchain.memoryBufferWindow"
REDIS_MEMORY = "@n8n/n8n-nodes-langchain.memoryRedisChat"
CALCULATOR = "@n8n/n8n-nodes-langchain.toolCalculator"
ANSWER_87 = "Based on the tools: Calculator returned 87."
ANSWER_84 = "Based on the tools: Calculator returned 84."
TIMEOUT_MS = 20_000


CREDENTIALS = [
    {"id": "cred-ollama", "name": "Local Ollama", "type": "openAiApi", "data": {"apiKey": "sk-1"}},
    {"id": "cred-openai", "name": "OpenAI prod", "type": "openAiApi", "data": {"apiKey": "sk-2"}},
    {"id": "cred-redis", "name": "Cache Redis", "type": "redis", "data": {"password": "pw"}},
]


@pytest.fixture(scope="module", autouse=True)
def patient_expect():
    """The machine is shared with other test runs: a page waits up to 15 s, not 5, for what it
    expects (each wait still ends as soon as the page gets there)."""
    expect.set_options(timeout=15_000)
    yield
    expect.set_options(timeout=5_000)


@pytest.fixture(scope="module")
def deployment(redis_url, tmp_path_factory):
    """The editor suite's deployment, with a credentials file for the credential picker."""
    path = tmp_path_factory.mktemp("credentials") / "credentials.json"
    path.write_text(json.dumps(CREDENTIALS))
    with Deployment.running(
        redis_url,
        MINI_N8N_API_KEY=API_KEY,
        MINI_N8N_GRACEFUL_TIMEOUT="1",
        MINI_N8N_CREDENTIALS_FILE=str(path),
    ) as deploy:
        yield deploy


# --- page helpers -----------------------------------------------------------------------------
def node(page, name: str):
    return page.locator(f".node[data-node-name='{name}']")


def open_new_workflow(new_tab, deployment):
    tab = new_tab()
    page = tab.page
    page.goto(f"{deployment.base}/#key={API_KEY}")
    expect(page.locator("#push-state")).to_have_attribute("data-state", "up")
    page.click("#new-workflow")
    expect(page.locator("#canvas .node")).to_have_count(0)
    return tab


def add_from_creator(page, type_name: str, search: str | None = None) -> None:
    page.click("#add-node")
    if search:
        page.fill("#creator-search", search)
    page.click(f".creator-item[data-type='{type_name}']")
    expect(page.locator("#creator")).to_be_hidden()


def add_to_slot(page, parent: str, slot: str, type_name: str) -> None:
    node(page, parent).locator(f".slot[data-slot='{slot}'] .slot-add").click()
    expect(page.locator("#creator")).to_be_visible()
    page.click(f".creator-item[data-type='{type_name}']")


def connect_main(page, source: str, target: str) -> None:
    node(page, source).locator(".handle.out").drag_to(node(page, target).locator(".handle.in"))
    expect(page.locator(f".edge.main[data-from='{source}'][data-to='{target}']")).to_have_count(1)


def build_chat_workflow(page) -> str:
    """Chat Trigger → AI Agent with a mock model, Simple Memory and a Calculator; saved."""
    add_from_creator(page, CHAT_TRIGGER, search="chat")
    add_from_creator(page, AGENT)
    connect_main(page, TRIGGER, "AI Agent")
    add_to_slot(page, "AI Agent", "ai_languageModel", MOCK)
    add_to_slot(page, "AI Agent", "ai_memory", SIMPLE_MEMORY)
    add_to_slot(page, "AI Agent", "ai_tool", CALCULATOR)
    expect(page.locator(".edge.ai[data-to='AI Agent']")).to_have_count(3)
    return save(page)


def save(page) -> str:
    page.click("#save")
    expect(page.locator("#dirty")).to_be_hidden()
    return page.evaluate("window.editor.state.workflow.id")


def open_node(page, name: str):
    node(page, name).click()
    dialog = page.locator("#ndv")
    expect(dialog.locator("#ndv-title")).to_have_text(name)
    return dialog


def close_node(page) -> None:
    page.click("#ndv-close")
    expect(page.locator("#ndv")).to_be_hidden()


def param(dialog, path: str):
    return dialog.locator(f".param[data-param='{path}']")


def send(page, text: str) -> None:
    page.fill("#chat-input", text)
    page.press("#chat-input", "Enter")


def expect_answer(page, index: int, text: str) -> None:
    bubble = page.locator(".message.bot").nth(index)
    expect(bubble).to_have_attribute("data-state", "done", timeout=TIMEOUT_MS)
    expect(bubble).to_have_text(text)


def record_texts(page, items: str, container: str) -> None:
    """Keep every text the last of `items` shows, in `window.seenTexts`."""
    page.evaluate(
        """([items, container]) => {
        window.seenTexts = [];
        new MutationObserver(() => {
          const last = [...document.querySelectorAll(items)].pop();
          if (last && window.seenTexts.at(-1) !== last.textContent)
            window.seenTexts.push(last.textContent);
        }).observe(document.querySelector(container),
                   {subtree: true, childList: true, characterData: true});
      }""",
        [items, container],
    )


def stored(deployment, workflow_id: str) -> dict:
    response = httpx.get(f"{deployment.base}/rest/workflows/{workflow_id}", headers=AUTH)
    assert response.status_code == 200
    return response.json()


def targets(workflow: dict, source: str, kind: str) -> list[str]:
    outputs = workflow["connections"].get(source, {}).get(kind, [])
    return [t["node"] for out in outputs for t in out if t["type"] == kind]


# --- building ---------------------------------------------------------------------------------
def test_sub_nodes_added_from_the_node_creator_are_connected_to_the_agent_with_ai_connections(
    deployment, new_tab
):
    tab = open_new_workflow(new_tab, deployment)
    page = tab.page
    workflow_id = build_chat_workflow(page)
    workflow = stored(deployment, workflow_id)
    by_type = {n["type"]: n["name"] for n in workflow["nodes"]}
    assert set(by_type) == {CHAT_TRIGGER, AGENT, MOCK, SIMPLE_MEMORY, CALCULATOR}
    assert targets(workflow, TRIGGER, "main") == ["AI Agent"]
    assert targets(workflow, by_type[MOCK], "ai_languageModel") == ["AI Agent"]
    assert targets(workflow, by_type[SIMPLE_MEMORY], "ai_memory") == ["AI Agent"]
    assert targets(workflow, by_type[CALCULATOR], "ai_tool") == ["AI Agent"]
    assert next(n for n in workflow["nodes"] if n["type"] == CHAT_TRIGGER)["webhookId"]
    assert tab.errors == []


def test_a_slot_opens_the_creator_with_only_what_fits_and_a_full_slot_is_refused(
    deployment, new_tab
):
    tab = open_new_workflow(new_tab, deployment)
    page = tab.page
    add_from_creator(page, AGENT)
    node(page, "AI Agent").locator(".slot[data-slot='ai_languageModel'] .slot-add").click()
    offered = page.locator(".creator-item").evaluate_all("els => els.map(e => e.dataset.type)")
    assert sorted(offered) == sorted([MOCK, "@n8n/n8n-nodes-langchain.lmChatOpenAi"])
    expect(page.locator(".creator-group")).to_have_text(["AI: Models"])
    page.click(f".creator-item[data-type='{MOCK}']")
    node(page, "AI Agent").locator(".slot[data-slot='ai_languageModel'] .slot-add").click()
    expect(page.locator("#notice")).to_contain_text('"AI Agent" takes only 1 chat model')
    expect(page.locator("#creator")).to_be_hidden()
    expect(page.locator(".edge.ai[data-to='AI Agent']")).to_have_count(1)
    page.click("#add-node")  # the full creator groups everything
    groups = page.locator(".creator-group").all_text_contents()
    assert groups == ["Triggers", "AI: Agents", "AI: Models", "AI: Memory", "AI: Tools", "Core"]
    assert tab.errors == []


def test_a_saved_workflow_reloads_identical(deployment, new_tab):
    tab = open_new_workflow(new_tab, deployment)
    page = tab.page
    workflow_id = build_chat_workflow(page)
    dialog = open_node(page, "Mock Chat Model")
    param(dialog, "delayPerTokenMs").locator("input").fill("5")
    param(dialog, "delayPerTokenMs").locator("input").press("Tab")
    close_node(page)
    node(page, "Calculator").drag_to(page.locator("#canvas"), target_position={"x": 200, "y": 120})
    before = page.evaluate("window.editor.state.workflow")
    save(page)
    page.reload()
    expect(node(page, "AI Agent")).to_be_visible()
    after = page.evaluate("window.editor.state.workflow")
    for key in ("nodes", "connections", "name", "id"):
        assert after[key] == before[key], key
    saved = stored(deployment, workflow_id)
    assert saved["nodes"] == before["nodes"]
    model = next(n for n in saved["nodes"] if n["type"] == MOCK)
    assert model["parameters"] == {"delayPerTokenMs": 5}
    assert tab.errors == []


# --- running what was built -------------------------------------------------------------------
def test_the_built_workflow_streams_its_answer_in_the_chat_panel_and_shows_its_runs(
    deployment, new_tab
):
    tab = open_new_workflow(new_tab, deployment)
    page = tab.page
    build_chat_workflow(page)
    dialog = open_node(page, "Mock Chat Model")
    param(dialog, "delayPerTokenMs").locator("input").fill("60")
    param(dialog, "delayPerTokenMs").locator("input").press("Tab")
    close_node(page)
    page.click("#open-chat")  # saves the change first
    expect(page.locator("#dirty")).to_be_hidden()
    record_texts(page, ".message.bot .text", "#chat-messages")
    send(page, "What is 3 * 29?")
    expect_answer(page, 0, ANSWER_87)
    texts = [t for t in page.evaluate("window.seenTexts") if t != "…"]
    assert all(ANSWER_87.startswith(t) for t in texts), texts
    assert len([t for t in texts if t != ANSWER_87]) >= 3, texts  # it grew token by token
    for name in (TRIGGER, "AI Agent", "Mock Chat Model", "Simple Memory", "Calculator"):
        expect(node(page, name)).to_have_attribute("data-status", "success")
    expect(node(page, "Mock Chat Model")).to_have_attribute("data-runs", "2")
    dialog = open_node(page, "Calculator")
    expect(dialog.locator(".ndv-input pre")).to_contain_text('"input": "3 * 29"')
    close_node(page)

    send(page, "my name is Ada")
    expect_answer(page, 1, "Nice to meet you, Ada!")
    send(page, "What is my name?")
    expect_answer(page, 2, "Your name is Ada.")
    assert tab.errors == []


def test_memory_switched_through_the_form_and_a_public_streaming_trigger_answer_on_the_chat_page(
    deployment, new_tab
):
    tab = open_new_workflow(new_tab, deployment)
    page = tab.page
    workflow_id = build_chat_workflow(page)

    dialog = open_node(page, "Simple Memory")
    dialog.locator("#ndv-delete").click()
    expect(node(page, "Simple Memory")).to_have_count(0)
    add_to_slot(page, "AI Agent", "ai_memory", REDIS_MEMORY)

    dialog = open_node(page, "Mock Chat Model")
    param(dialog, "delayPerTokenMs").locator("input").fill("60")
    param(dialog, "delayPerTokenMs").locator("input").press("Tab")
    close_node(page)

    dialog = open_node(page, TRIGGER)
    expect(param(dialog, "mode")).to_have_count(0)  # displayOptions: only once public
    param(dialog, "public").locator("input").check()
    expect(param(dialog, "mode").locator("select")).to_have_value("hostedChat")
    dialog.locator(".add-option[data-param='options']").select_option("responseMode")
    param(dialog, "options.responseMode").locator("select").select_option("streaming")
    close_node(page)

    page.click("#toggle-active")
    expect(page.locator("#toggle-active")).to_have_attribute("data-active", "true")
    saved = stored(deployment, workflow_id)
    assert saved["active"] is True
    trigger = next(n for n in saved["nodes"] if n["type"] == CHAT_TRIGGER)
    assert trigger["parameters"]["public"] is True
    assert trigger["parameters"]["options"] == {"responseMode": "streaming"}
    assert targets(saved, "Redis Chat Memory", "ai_memory") == ["AI Agent"]

    chat = new_tab().page
    chat.goto(f"{deployment.base}/webhook/{trigger['webhookId']}/chat")
    chat.wait_for_selector("body[data-ready=true]")
    record_texts(chat, "#chat-messages > li", "#chat-messages")
    before = chat.locator("#chat-messages > li").count()
    chat.fill("#chat-input", "What is 12 * 7?")
    chat.press("#chat-input", "Enter")
    answer = chat.locator("#chat-messages > li").nth(before + 1)
    expect(answer).to_have_attribute("data-state", "done", timeout=TIMEOUT_MS)
    expect(answer).to_have_text(ANSWER_84)
    partial = [t for t in chat.evaluate("window.seenTexts") if ANSWER_84.startswith(t) and t]
    assert len([t for t in partial if t != ANSWER_84]) >= 3, partial  # token by token
    assert tab.errors == []


def test_export_delete_and_reimport_runs_the_same_and_the_file_runs_in_the_cli(
    deployment, new_tab, tmp_path
):
    tab = open_new_workflow(new_tab, deployment)
    page = tab.page
    workflow_id = build_chat_workflow(page)
    with page.expect_download() as download:
        page.click("#export")
    exported = tmp_path / "exported.json"
    download.value.save_as(exported)
    data = json.loads(exported.read_text())
    assert data["id"] == workflow_id and len(data["nodes"]) == 5

    page.once("dialog", lambda d: d.accept())
    page.click("#delete-workflow")
    expect(page.locator(f"#workflow-list [data-workflow-id='{workflow_id}']")).to_have_count(0)
    assert (
        httpx.get(f"{deployment.base}/rest/workflows/{workflow_id}", headers=AUTH).status_code
        == 404
    )

    page.click("#import")
    page.set_input_files("#import-file", str(exported))
    expect(page.locator("#import-text")).not_to_have_value("")
    page.click("#import-submit")
    expect(page.locator("#import-dialog")).to_be_hidden()
    expect(node(page, "AI Agent")).to_be_visible()
    assert page.evaluate("window.editor.state.workflow.id") == workflow_id
    page.click("#open-chat")
    send(page, "What is 3 * 29?")
    expect_answer(page, 0, ANSWER_87)

    message = json.dumps({"sessionId": "cli", "chatInput": "What is 3 * 29?"})
    done = subprocess.run(
        [sys.executable, "-m", "mini_n8n.cli", "run", str(exported), "--input", message],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "REDIS_URL"},
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {"output": ANSWER_87}
    assert tab.errors == []


def test_importing_an_exported_workflow_whose_id_exists_makes_a_copy_with_no_failed_request(
    deployment, new_tab, tmp_path
):
    tab = open_new_workflow(new_tab, deployment)
    page = tab.page
    failed = []
    page.on("response", lambda r: r.status >= 400 and failed.append(f"{r.status} {r.url}"))
    page.fill("#workflow-name", "Ada's chat")
    page.press("#workflow-name", "Enter")
    original_id = build_chat_workflow(page)
    with page.expect_download() as download:
        page.click("#export")
    exported = tmp_path / "exported.json"
    download.value.save_as(exported)

    page.click("#import")
    page.set_input_files("#import-file", str(exported))
    expect(page.locator("#import-text")).not_to_have_value("")
    page.click("#import-submit")
    expect(page.locator("#import-dialog")).to_be_hidden()
    expect(page.locator("#workflow-name")).to_have_value("Ada's chat (copy)")
    copy_id = page.evaluate("window.editor.state.workflow.id")
    assert copy_id and copy_id != original_id
    listed = page.locator("#workflow-list li button").all_text_contents()
    assert listed.count("Ada's chat") == 1 and listed.count("Ada's chat (copy)") == 1
    original, copy = stored(deployment, original_id), stored(deployment, copy_id)
    assert original["name"] == "Ada's chat"
    trigger_of = {
        w["id"]: next(n for n in w["nodes"] if n["type"] == CHAT_TRIGGER) for w in (original, copy)
    }
    assert trigger_of[copy_id]["webhookId"] != trigger_of[original_id]["webhookId"]  # its own URL
    assert failed == [] and tab.errors == []


# --- notices ----------------------------------------------------------------------------------
def refuse_a_second_model(page) -> None:
    node(page, "AI Agent").locator(".slot[data-slot='ai_languageModel'] .slot-add").click()
    expect(page.locator("#notice")).to_be_visible()
    expect(page.locator("#notice-text")).to_have_text(
        '"AI Agent" takes only 1 chat model: remove the connected one first.'
    )
    expect(page.locator("#notice")).to_have_attribute("data-kind", "info")


def set_delay(page, value: str) -> None:
    dialog = open_node(page, "Mock Chat Model")
    param(dialog, "delayPerTokenMs").locator("input").fill(value)
    param(dialog, "delayPerTokenMs").locator("input").press("Tab")
    close_node(page)


def test_an_info_notice_goes_when_the_next_save_succeeds_or_after_a_few_seconds(
    deployment, new_tab
):
    tab = new_tab()
    page = tab.page
    page.clock.install()  # the page's timers run on a clock the test moves
    page.goto(f"{deployment.base}/#key={API_KEY}")
    expect(page.locator("#push-state")).to_have_attribute("data-state", "up")
    page.click("#new-workflow")
    build_chat_workflow(page)
    page.clock.pause_at(page.evaluate("Date.now()") + 1000)  # no timer fires from here on
    refuse_a_second_model(page)
    page.click("#save")  # a successful action
    expect(page.locator("#notice")).to_be_hidden()

    refuse_a_second_model(page)
    page.clock.run_for(4000)
    expect(page.locator("#notice")).to_be_visible()
    page.clock.run_for(1500)  # 5 s after it showed
    expect(page.locator("#notice")).to_be_hidden()
    assert tab.errors == []


def test_an_error_notice_stays_until_dismissed_or_the_next_save_succeeds(deployment, new_tab):
    tab = new_tab()
    page = tab.page
    page.clock.install()
    page.goto(f"{deployment.base}/#key={API_KEY}")
    expect(page.locator("#push-state")).to_have_attribute("data-state", "up")
    page.click("#new-workflow")
    build_chat_workflow(page)
    set_delay(page, "-1")
    page.click("#save")
    notice = page.locator("#notice")
    expect(page.locator("#notice-text")).to_contain_text("must be at least 0")
    expect(notice).to_have_attribute("data-kind", "error")
    page.clock.run_for(60_000)
    expect(notice).to_be_visible()  # a minute later, still there
    page.click("#notice-close")
    expect(notice).to_be_hidden()

    page.click("#save")
    expect(page.locator("#notice-text")).to_contain_text("must be at least 0")
    set_delay(page, "0")
    page.click("#save")
    expect(notice).to_be_hidden()
    expect(page.locator("#dirty")).to_be_hidden()
    assert [e for e in tab.errors if "400" not in e] == []  # the refused saves are logged


# --- editing ----------------------------------------------------------------------------------
def test_undo_restores_a_deleted_node_with_its_connections_and_redo_deletes_it_again(
    deployment, new_tab
):
    tab = open_new_workflow(new_tab, deployment)
    page = tab.page
    build_chat_workflow(page)
    node(page, "AI Agent").click()
    close_node(page)
    page.keyboard.press("Delete")
    expect(node(page, "AI Agent")).to_have_count(0)
    expect(page.locator(".edge")).to_have_count(0)
    page.keyboard.press("Control+z")
    expect(node(page, "AI Agent")).to_have_count(1)
    expect(page.locator(".edge.ai[data-to='AI Agent']")).to_have_count(3)
    expect(page.locator(".edge.main[data-to='AI Agent']")).to_have_count(1)
    page.keyboard.press("Control+Shift+z")
    expect(node(page, "AI Agent")).to_have_count(0)
    assert tab.errors == []


def test_a_connection_can_be_selected_and_deleted_and_a_move_undone(deployment, new_tab):
    tab = open_new_workflow(new_tab, deployment)
    page = tab.page
    build_chat_workflow(page)
    page.locator(".wire-hit[data-from='Calculator']").dispatch_event("click")
    page.keyboard.press("Delete")
    expect(page.locator(".edge[data-from='Calculator']")).to_have_count(0)
    before = page.evaluate(
        "window.editor.state.workflow.nodes.find(n => n.name === 'AI Agent').position"
    )
    node(page, "AI Agent").drag_to(page.locator("#canvas"), target_position={"x": 300, "y": 60})
    moved = page.evaluate(
        "window.editor.state.workflow.nodes.find(n => n.name === 'AI Agent').position"
    )
    assert moved != before
    page.keyboard.press("Control+z")
    wait_until(
        lambda: (
            page.evaluate(
                "window.editor.state.workflow.nodes.find(n => n.name === 'AI Agent').position"
            )
            == before
        ),
        5,
        "the move to be undone",
    )
    page.keyboard.press("Control+z")
    expect(page.locator(".edge[data-from='Calculator']")).to_have_count(1)
    assert tab.errors == []


def test_renaming_a_node_keeps_its_connections_and_updates_references_to_it(deployment, new_tab):
    tab = open_new_workflow(new_tab, deployment)
    page = tab.page
    build_chat_workflow(page)
    dialog = open_node(page, "AI Agent")
    param(dialog, "promptType").locator("select").select_option("define")
    text = param(dialog, "text").locator("textarea")
    text.fill("={{ $('When chat message received').item.json.chatInput }}")
    text.press("Tab")
    close_node(page)
    dialog = open_node(page, TRIGGER)
    dialog.locator("#ndv-name").fill("Chat In")
    dialog.locator("#ndv-name").press("Enter")
    expect(dialog.locator("#ndv-title")).to_have_text("Chat In")
    close_node(page)
    expect(page.locator(".edge.main[data-from='Chat In'][data-to='AI Agent']")).to_have_count(1)
    agent = page.evaluate("window.editor.state.workflow.nodes.find(n => n.name === 'AI Agent')")
    assert agent["parameters"]["text"] == "={{ $('Chat In').item.json.chatInput }}"
    page.keyboard.press("Control+z")
    expect(node(page, TRIGGER)).to_have_count(1)
    assert tab.errors == []


# --- lifecycle --------------------------------------------------------------------------------
def test_two_tabs_editing_one_workflow_the_second_save_gets_the_conflict_and_nothing_is_lost(
    deployment, new_tab
):
    first = open_new_workflow(new_tab, deployment)
    workflow_id = build_chat_workflow(first.page)
    second = new_tab()
    second.page.goto(f"{deployment.base}/#key={API_KEY}&workflow={workflow_id}")
    expect(node(second.page, "AI Agent")).to_be_visible()

    first.page.fill("#workflow-name", "Saved by the first tab")
    first.page.press("#workflow-name", "Enter")
    save(first.page)
    second.page.fill("#workflow-name", "Edited in the second tab")
    second.page.press("#workflow-name", "Enter")
    second.page.click("#save")
    expect(second.page.locator("#conflict")).to_be_visible()
    expect(second.page.locator("#conflict-message")).to_contain_text("changed since")
    assert stored(deployment, workflow_id)["name"] == "Saved by the first tab"
    expect(second.page.locator("#workflow-name")).to_have_value("Edited in the second tab")
    expect(second.page.locator("#dirty")).to_be_visible()  # its edit is still there

    second.page.click("#conflict-reload")
    expect(second.page.locator("#workflow-name")).to_have_value("Saved by the first tab")
    expect(second.page.locator("#conflict")).to_be_hidden()
    assert first.errors == []
    assert [e for e in second.errors if "409" not in e] == []


def test_activation_shows_the_engines_error_next_to_the_node_it_names(deployment, new_tab):
    tab = open_new_workflow(new_tab, deployment)
    page = tab.page
    add_from_creator(page, CHAT_TRIGGER)
    add_from_creator(page, AGENT)
    connect_main(page, TRIGGER, "AI Agent")
    page.click("#save")  # an Agent without a model: the engine refuses it, naming the Agent
    expect(node(page, "AI Agent")).to_have_attribute(
        "data-issue", 'Node "AI Agent": no node connected to required input "Chat Model"'
    )  # the slot as the canvas names it, in n8n's words
    expect(page.locator("#notice")).to_contain_text('required input "Chat Model"')
    add_to_slot(page, "AI Agent", "ai_languageModel", MOCK)
    save(page)
    expect(node(page, "AI Agent").locator(".issue")).to_have_text("")
    page.click("#toggle-active")
    expect(page.locator("#toggle-active")).to_have_attribute("data-active", "true")
    assert [e for e in tab.errors if "400" not in e] == []


def test_the_credential_picker_lists_credentials_of_the_right_type_by_name(deployment, new_tab):
    tab = open_new_workflow(new_tab, deployment)
    page = tab.page
    add_from_creator(page, AGENT)
    add_to_slot(page, "AI Agent", "ai_languageModel", "@n8n/n8n-nodes-langchain.lmChatOpenAi")
    dialog = open_node(page, "OpenAI Chat Model")
    picker = dialog.locator(".param[data-credential='openAiApi'] select")
    expect(picker.locator("option")).to_have_text(
        ["— choose a credential —", "Local Ollama", "OpenAI prod"]
    )
    picker.select_option(label="OpenAI prod")
    close_node(page)
    model = page.evaluate(
        "window.editor.state.workflow.nodes.find(n => n.name === 'OpenAI Chat Model')"
    )
    assert model["credentials"] == {"openAiApi": {"id": "cred-openai", "name": "OpenAI prod"}}
    assert "sk-" not in page.content()
    assert tab.errors == []


def test_an_expression_shows_its_value_from_the_last_run(deployment, new_tab):
    tab = open_new_workflow(new_tab, deployment)
    page = tab.page
    build_chat_workflow(page)
    dialog = open_node(page, "AI Agent")
    param(dialog, "promptType").locator("select").select_option("define")
    preview = param(dialog, "text").locator(".expr-preview")
    expect(preview).to_have_text("Preview: run the workflow to see this value.")
    close_node(page)
    save(page)
    page.click("#open-chat")
    send(page, "What is 3 * 29?")
    expect_answer(page, 0, ANSWER_87)
    dialog = open_node(page, "AI Agent")
    expect(param(dialog, "text").locator(".expr-preview")).to_have_text("Preview: What is 3 * 29?")
    assert tab.errors == []


def test_undo_and_redo_a_parameter_change(deployment, new_tab):
    tab = open_new_workflow(new_tab, deployment)
    page = tab.page
    add_from_creator(page, MOCK)
    dialog = open_node(page, "Mock Chat Model")
    field = param(dialog, "delayPerTokenMs").locator("input")
    field.fill("25")
    field.press("Tab")
    close_node(page)
    delay = "window.editor.state.workflow.nodes[0].parameters.delayPerTokenMs"
    assert page.evaluate(delay) == 25
    page.keyboard.press("Control+z")
    expect(page.locator("#redo")).to_be_enabled()
    assert page.evaluate(delay) is None
    page.keyboard.press("Control+Shift+z")
    assert page.evaluate(delay) == 25
    assert tab.errors == []


def test_leaving_a_workflow_with_unsaved_changes_asks_first(deployment, new_tab):
    tab = open_new_workflow(new_tab, deployment)
    page = tab.page
    workflow_id = build_chat_workflow(page)
    add_from_creator(page, "n8n-nodes-base.noOp")
    expect(page.locator("#dirty")).to_be_visible()
    asked = []

    def dismiss(dialog):
        asked.append(dialog.message)
        dialog.dismiss()

    page.once("dialog", dismiss)
    page.click("#new-workflow")
    assert asked == ["Discard the unsaved changes?"]
    assert page.evaluate("window.editor.state.workflow.id") == workflow_id  # it stayed
    expect(node(page, "No Operation, do nothing")).to_be_visible()
    page.once("dialog", lambda d: d.accept())
    page.click("#new-workflow")
    expect(page.locator("#canvas .node")).to_have_count(0)
    assert tab.errors == []


def test_a_sub_node_dragged_to_a_slot_connects_with_that_slots_type_and_a_wrong_slot_is_refused(
    deployment, new_tab
):
    tab = open_new_workflow(new_tab, deployment)
    page = tab.page
    build_chat_workflow(page)
    page.locator(".wire-hit[data-from='Calculator']").dispatch_event("click")
    page.keyboard.press("Delete")
    expect(page.locator(".edge[data-from='Calculator']")).to_have_count(0)
    handle = node(page, "Calculator").locator(".handle.ai-out")
    handle.drag_to(node(page, "AI Agent").locator(".slot[data-slot='ai_memory'] .slot-add"))
    expect(page.locator("#notice")).to_contain_text(
        '"Calculator" cannot be the memory of "AI Agent"'
    )
    expect(page.locator(".edge[data-from='Calculator']")).to_have_count(0)
    handle.drag_to(node(page, "AI Agent").locator(".slot[data-slot='ai_tool'] .slot-add"))
    expect(page.locator(".edge.ai_tool[data-from='Calculator'][data-to='AI Agent']")).to_have_count(
        1
    )
    assert tab.errors == []


def test_a_field_switches_between_a_fixed_value_and_an_expression(deployment, new_tab):
    tab = open_new_workflow(new_tab, deployment)
    page = tab.page
    add_from_creator(page, MOCK)
    dialog = open_node(page, "Mock Chat Model")
    delay = "window.editor.state.workflow.nodes[0].parameters.delayPerTokenMs"
    param(dialog, "delayPerTokenMs").locator(".expr-toggle").click()
    expect(param(dialog, "delayPerTokenMs").locator("textarea.expression")).to_have_value("=0")
    assert page.evaluate(delay) == "=0"
    expression = param(dialog, "delayPerTokenMs").locator("textarea.expression")
    expression.fill("=12")
    expression.press("Tab")
    param(dialog, "delayPerTokenMs").locator(".expr-toggle").click()
    expect(param(dialog, "delayPerTokenMs").locator("input[type=number]")).to_have_value("12")
    assert page.evaluate(delay) == 12
    assert tab.errors == []


def test_references_in_expressions_follow_a_rename_in_each_form_n8n_writes(deployment, new_tab):
    tab = new_tab()
    page = tab.page
    page.goto(f"{deployment.base}/#key={API_KEY}")
    renamed = page.evaluate(
        """async () => {
        const { renameInExpression } = await import('/static/editor/workflow-doc.js');
        return [
          "={{ $('Old').item.json.x }}",
          '={{ $node["Old"].json.x }}',
          "={{ $node.Old.json.x }} and {{ $items('Old')[0] }}",
          "={{ $('Older').item.json.x }} {{ $node.OldX }}",
        ].map((text) => renameInExpression(text, 'Old', "New 'one'"));
      }"""
    )
    assert renamed == [
        "={{ $('New \\'one\\'').item.json.x }}",
        "={{ $node[\"New 'one'\"].json.x }}",
        "={{ $node[\"New 'one'\"].json.x }} and {{ $items('New \\'one\\'')[0] }}",
        "={{ $('Older').item.json.x }} {{ $node.OldX }}",
    ]
    assert tab.errors == []


def test_connect_is_undone_and_redone(deployment, new_tab):
    tab = open_new_workflow(new_tab, deployment)
    page = tab.page
    add_from_creator(page, CHAT_TRIGGER)
    page.locator("#canvas").click(position={"x": 5, "y": 5})  # nothing selected: not connected
    add_from_creator(page, AGENT)
    expect(page.locator(".edge.main")).to_have_count(0)
    connect_main(page, TRIGGER, "AI Agent")
    page.keyboard.press("Control+z")
    expect(page.locator(".edge.main")).to_have_count(0)
    page.keyboard.press("Control+Shift+z")
    expect(page.locator(f".edge.main[data-from='{TRIGGER}'][data-to='AI Agent']")).to_have_count(1)
    assert tab.errors == []


def test_the_wheel_zooms_and_dragging_the_empty_canvas_pans(deployment, new_tab):
    tab = open_new_workflow(new_tab, deployment)
    page = tab.page
    add_from_creator(page, AGENT)

    def view() -> list[float]:
        return [float(v) for v in page.get_attribute("#canvas", "viewBox").split()]

    before = view()
    box = page.locator("#canvas").bounding_box()
    page.mouse.move(box["x"] + 40, box["y"] + 40)  # empty canvas, away from the node
    page.mouse.wheel(0, -300)
    wait_until(lambda: view()[2] < before[2], 5, "the wheel to zoom in")
    zoomed = view()
    page.mouse.down()
    page.mouse.move(box["x"] + 140, box["y"] + 90, steps=5)
    page.mouse.up()
    panned = view()
    assert panned[2:] == zoomed[2:]  # same zoom
    assert panned[0] < zoomed[0] and panned[1] < zoomed[1]  # the view moved with the pointer
    assert tab.errors == []
