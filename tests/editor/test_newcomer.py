"""What a person new to the editor ran into while building the seed's chat workflow, in a real
headless Chromium against a real deployment: notices that outlived their workflow or named a
connection type, a second import of one file, nodes added from the creator left unconnected,
the canvas refitted after every sub-node."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from tests.e2e.deployment import fresh_ids
from tests.editor.test_authoring import (
    AGENT,
    CALCULATOR,
    CHAT_TRIGGER,
    MOCK,
    SIMPLE_MEMORY,
    TRIGGER,
    add_from_creator,
    add_to_slot,
    close_node,
    node,
    open_new_workflow,
    stored,
)
from tests.workflows import GREETING, example

expect = pytest.importorskip("playwright.sync_api").expect

IF = "n8n-nodes-base.if"
NO_OP = "n8n-nodes-base.noOp"


@pytest.fixture(scope="module", autouse=True)
def patient_expect():
    """A shared machine: a page waits up to 15 s for what it expects (no longer than needed)."""
    expect.set_options(timeout=15_000)
    yield
    expect.set_options(timeout=5_000)


def edge(page, source: str, target: str, kind: str = "main"):
    return page.locator(f".edge.{kind}[data-from='{source}'][data-to='{target}']")


def screen_box(page, name: str) -> dict:
    return node(page, name).locator(".body").bounding_box()


def view(page) -> list[float]:
    return [float(v) for v in page.get_attribute("#canvas", "viewBox").split()]


# --- notices ----------------------------------------------------------------------------------
def test_an_error_notice_names_the_slot_as_the_canvas_does_and_goes_with_its_workflow(
    deployment, new_tab
):
    other = fresh_ids(example(GREETING))
    other["name"] = f"Greeting {uuid.uuid4().hex[:6]}"
    deployment.workflows.save(other)
    tab = open_new_workflow(new_tab, deployment)
    page = tab.page
    page.on("dialog", lambda dialog: dialog.accept())  # leave the refused workflow unsaved
    add_from_creator(page, CHAT_TRIGGER)
    add_from_creator(page, AGENT)  # connected to the trigger, no model yet
    page.click("#save")
    expect(page.locator("#notice-text")).to_have_text(
        'Node "AI Agent": no node connected to required input "Chat Model"'
    )
    expect(page.locator("#notice")).to_have_attribute("data-kind", "error")
    expect(node(page, "AI Agent").locator(".slot[data-slot='ai_languageModel']")).to_contain_text(
        "Chat Model"
    )
    page.click(f"#workflow-list li[data-workflow-id='{other['id']}'] button")
    expect(page.locator("#workflow-name")).to_have_value(other["name"])
    expect(page.locator("#notice")).to_be_hidden()
    assert [e for e in tab.errors if "400" not in e] == []  # the refused save is logged


# --- import -----------------------------------------------------------------------------------
def import_text(page, text: str) -> None:
    page.click("#import")
    page.fill("#import-text", text)
    page.click("#import-submit")
    expect(page.locator("#import-dialog")).to_be_hidden()


def test_importing_one_file_twice_gives_each_copy_a_name_of_its_own_and_says_so(
    deployment, new_tab
):
    name = f"Ada's chat {uuid.uuid4().hex[:6]}"
    original = fresh_ids(example(GREETING))
    original["name"] = name
    deployment.workflows.save(original)
    text = json.dumps(original)
    tab = open_new_workflow(new_tab, deployment)
    page = tab.page

    import_text(page, text)
    expect(page.locator("#workflow-name")).to_have_value(f"{name} (copy)")
    expect(page.locator("#notice-text")).to_have_text(
        f'Imported as a copy, "{name} (copy)": this workflow is stored already as "{name}" '
        "(same id). The copy has its own id and its own chat and webhook URLs."
    )
    import_text(page, text)
    expect(page.locator("#workflow-name")).to_have_value(f"{name} (copy 2)")
    expect(page.locator("#notice-text")).to_contain_text(f'Imported as a copy, "{name} (copy 2)"')

    del original["id"]  # another workflow that happens to have the same name
    import_text(page, json.dumps(original))
    expect(page.locator("#workflow-name")).to_have_value(f"{name} (2)")
    expect(page.locator("#notice-text")).to_have_text(
        f'Imported as "{name} (2)": a workflow called "{name}" exists already.'
    )
    listed = page.locator("#workflow-list li button").all_text_contents()
    mine = sorted(n for n in listed if n.startswith(name))
    assert mine == sorted([name, f"{name} (2)", f"{name} (copy)", f"{name} (copy 2)"])
    assert tab.errors == []


# --- adding nodes -----------------------------------------------------------------------------
def test_a_node_added_while_another_is_selected_is_connected_to_it_as_in_n8n(deployment, new_tab):
    tab = open_new_workflow(new_tab, deployment)
    page = tab.page
    add_from_creator(page, CHAT_TRIGGER)
    page.click("#add-node")
    expect(page.locator("#creator-title")).to_have_text(f"Add a node, connected to “{TRIGGER}”")
    page.click(f".creator-item[data-type='{AGENT}']")
    expect(edge(page, TRIGGER, "AI Agent")).to_have_count(1)
    add_from_creator(page, MOCK)  # the Agent stays selected: a sub-node goes into its slot
    add_from_creator(page, SIMPLE_MEMORY)
    add_from_creator(page, CALCULATOR)
    expect(edge(page, "Mock Chat Model", "AI Agent", "ai_languageModel")).to_have_count(1)
    expect(edge(page, "Simple Memory", "AI Agent", "ai_memory")).to_have_count(1)
    expect(edge(page, "Calculator", "AI Agent", "ai_tool")).to_have_count(1)
    page.click("#save")
    expect(page.locator("#dirty")).to_be_hidden()
    saved = stored(deployment, page.evaluate("window.editor.state.workflow.id"))
    assert saved["connections"][TRIGGER] == {
        "main": [[{"node": "AI Agent", "type": "main", "index": 0}]]
    }
    trigger, agent = (
        next(n for n in saved["nodes"] if n["type"] == t) for t in (CHAT_TRIGGER, AGENT)
    )
    assert agent["position"][0] > trigger["position"][0]  # placed after it, as n8n does
    assert agent["position"][1] == trigger["position"][1]
    assert tab.errors == []


def test_after_an_if_a_new_node_takes_its_first_free_output(deployment, new_tab):
    tab = open_new_workflow(new_tab, deployment)
    page = tab.page
    add_from_creator(page, CHAT_TRIGGER)
    add_from_creator(page, IF)
    add_from_creator(page, NO_OP)  # the If's "true"
    node(page, "If").click()
    close_node(page)  # the If is selected again
    add_from_creator(page, NO_OP)  # its "false", the first output still free
    connections = page.evaluate("window.editor.state.workflow.connections")
    assert connections["If"]["main"] == [
        [{"node": "No Operation, do nothing", "type": "main", "index": 0}],
        [{"node": "No Operation, do nothing1", "type": "main", "index": 0}],
    ]
    assert connections[TRIGGER]["main"] == [[{"node": "If", "type": "main", "index": 0}]]
    true_box, false_box = (
        screen_box(page, n) for n in ("No Operation, do nothing", "No Operation, do nothing1")
    )
    assert false_box["y"] > true_box["y"]  # level with its output, under the "true" one
    assert tab.errors == []


def test_adding_sub_nodes_keeps_the_view_still_and_an_out_of_view_one_pans_it_into_view(
    deployment, new_tab
):
    tab = open_new_workflow(new_tab, deployment)
    page = tab.page
    add_from_creator(page, CHAT_TRIGGER)
    add_from_creator(page, AGENT)
    before = screen_box(page, "AI Agent")
    viewed = view(page)
    for slot, type_name in [
        ("ai_languageModel", MOCK),
        ("ai_memory", SIMPLE_MEMORY),
        ("ai_tool", CALCULATOR),
    ]:
        add_to_slot(page, "AI Agent", slot, type_name)
        assert view(page) == viewed  # not refitted: nothing moves on the screen
        assert screen_box(page, "AI Agent") == before
    add_to_slot(page, "AI Agent", "ai_tool", CALCULATOR)  # a second tool, right of the view
    expect(edge(page, "Calculator1", "AI Agent", "ai_tool")).to_have_count(1)
    x, y, w, h = view(page)
    assert [w, h] == viewed[2:]  # panned, not zoomed
    box = page.evaluate("window.editor.state.workflow.nodes.find(n => n.name === 'Calculator1')")
    assert x <= box["position"][0] and box["position"][0] + 80 <= x + w
    assert tab.errors == []


# --- streaming --------------------------------------------------------------------------------
NOT_STREAMED = (
    "“When chat message received” has Response Mode “When Last Node Finishes”: its chat gets "
    "this answer whole, not streamed. Click to open the trigger."
)


def build_trigger_agent_and_model(page) -> None:
    add_from_creator(page, CHAT_TRIGGER)
    add_from_creator(page, AGENT)
    add_from_creator(page, MOCK)
    expect(edge(page, "Mock Chat Model", "AI Agent", "ai_languageModel")).to_have_count(1)


def test_a_chat_trigger_answering_when_the_last_node_finishes_says_so_beside_the_agent_and_in_its_panel(
    deployment, new_tab
):
    tab = open_new_workflow(new_tab, deployment)
    page = tab.page
    build_trigger_agent_and_model(page)
    agent = node(page, "AI Agent")
    expect(agent).to_have_attribute("data-hint", NOT_STREAMED)
    expect(agent.locator(".hint-mark text")).to_have_text("⚠ answer not streamed")
    agent.locator(".hint-mark text").click()  # opens the trigger
    dialog = page.locator("#ndv")
    expect(dialog.locator("#ndv-title")).to_have_text(TRIGGER)
    expect(dialog.locator(".node-hint p")).to_have_text(
        "Response Mode is “When Last Node Finishes” (the default, in n8n too): the chat page and "
        "the chat URL get “AI Agent”'s answer whole once the workflow ends, not word by word; the "
        "editor's chat streams either way. To stream it, set Options → Response Mode to "
        "“Streaming”."
    )
    dialog.locator(".node-hint button").click()
    expect(dialog.locator(".node-hint")).to_have_count(0)
    mode = dialog.locator(".param[data-param='options.responseMode'] select")
    expect(mode).to_have_value("streaming")
    close_node(page)
    expect(agent).not_to_have_attribute("data-hint", NOT_STREAMED)
    expect(agent.locator(".hint-mark text")).to_have_text("")
    trigger = page.evaluate(f"window.editor.state.doc.node({TRIGGER!r})")
    assert trigger["parameters"] == {"options": {"responseMode": "streaming"}}
    assert tab.errors == []


def test_the_agents_panel_sets_its_trigger_to_streaming_and_the_public_chat_url_then_streams(
    deployment, new_tab
):
    tab = open_new_workflow(new_tab, deployment)
    page = tab.page
    build_trigger_agent_and_model(page)
    node(page, "AI Agent").click()
    dialog = page.locator("#ndv")
    expect(dialog.locator(".node-hint p")).to_contain_text(
        "You are using streaming responses (Options → Enable Streaming), but the connected trigger "
        "“When chat message received” has Response Mode “When Last Node Finishes”"
    )
    button = dialog.locator(".node-hint button")
    expect(button).to_have_text("Set “When chat message received” to Streaming")
    button.click()
    expect(dialog.locator(".node-hint")).to_have_count(0)
    close_node(page)
    node(page, TRIGGER).click()
    dialog.locator(".param[data-param='public'] input[type='checkbox']").check()
    close_node(page)
    page.click("#save")
    expect(page.locator("#dirty")).to_be_hidden()
    page.click("#toggle-active")
    expect(page.locator("#toggle-active")).to_have_attribute("data-active", "true")
    webhook_id = page.evaluate(f"window.editor.state.doc.node({TRIGGER!r}).webhookId")
    body = {"action": "sendMessage", "sessionId": "streamed", "chatInput": "hello"}
    url = f"{deployment.base}/webhook/{webhook_id}/chat"
    with httpx.stream("POST", url, json=body, timeout=30) as response:
        chunks = [json.loads(line) for line in response.iter_lines() if line.strip()]
    types = [chunk["type"] for chunk in chunks]
    assert types[0] == "begin" and types[-1] == "end" and types.count("item") > 1
    assert tab.errors == []
