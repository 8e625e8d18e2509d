"""The Chat node in the engine alone: it sends its message through the sendMessage hook, pauses
the run (status "waiting", plain-JSON state) and continues from that state with the reply."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from core.chat_node_message import ChatNodeMessage
from engine.description import displayed, shown_values
from engine.errors import WorkflowValidationError
from engine.executor import run_workflow
from engine.hooks import Hooks
from engine.nodes.memory_buffer_window import buffer_key
from engine.registry import node_types
from engine.services import Services
from engine.workflow import load_workflow
from memory.window import InProcessMemory
from tests.workflows import example, node

ASK_NAME = "chat-ask-name-response-nodes.json"
TRIGGER = "When chat message received"
START = [{"json": {"action": "sendMessage", "sessionId": "s1", "chatInput": "hello"}}]


def _run(workflow, messages, **kw):
    hooks = Hooks().add_handler("sendMessage", messages.append)
    return run_workflow(load_workflow(workflow), START, hooks=hooks, **kw)


def test_a_waiting_chat_node_pauses_and_the_reply_resumes_it_from_plain_json_state():
    messages: list[ChatNodeMessage] = []
    first = _run(example(ASK_NAME), messages)
    assert first.status == "waiting"
    assert [m.text for m in messages] == ["Hi! What is your name?"]
    assert messages[0].wait is True
    assert first.run_data["Ask name"][0]["executionStatus"] == "waiting"
    state = json.loads(json.dumps(first.waiting))  # what Redis keeps

    reply = {"json": {"action": "sendMessage", "sessionId": "s1", "chatInput": "Ada", "files": []}}
    second = _run(example(ASK_NAME), messages, resume={"state": state, "reply": reply})
    assert second.status == "success"
    assert [m.text for m in messages] == ["Hi! What is your name?", "Nice to meet you, Ada!"]
    assert messages[1].wait is False
    assert second.run_data["Ask name"][0]["executionStatus"] == "success"
    assert second.run_data["Ask name"][0]["data"]["main"] == [[reply]]
    assert second.first_json() == reply["json"]  # Greet passes its input on: the reply
    assert list(second.run_data) == [TRIGGER, "Ask name", "Greet"]


def test_a_chat_node_without_a_chat_trigger_in_response_nodes_mode_is_refused():
    workflow = copy.deepcopy(example(ASK_NAME))
    node(workflow, TRIGGER)["parameters"]["options"]["responseMode"] = "lastNode"
    with pytest.raises(WorkflowValidationError, match="Using Response Nodes") as err:
        load_workflow(workflow)
    assert err.value.node == "Ask name"


def test_a_public_chat_in_embedded_mode_cannot_use_chat_nodes():
    workflow = copy.deepcopy(example(ASK_NAME))
    node(workflow, TRIGGER)["parameters"]["mode"] = "webhook"
    with pytest.raises(WorkflowValidationError, match="Hosted Chat"):
        load_workflow(workflow)


def test_a_chat_node_with_a_memory_connection_appends_its_message_and_the_reply_in_order():
    workflow = copy.deepcopy(example(ASK_NAME))
    workflow["nodes"].append(
        {
            "parameters": {"sessionIdType": "customKey", "sessionKey": "={{ 'mem-' + 's1' }}"},
            "id": "m1",
            "name": "Memory",
            "type": "@n8n/n8n-nodes-langchain.memoryBufferWindow",
            "typeVersion": 1.3,
            "position": [0, 200],
        }
    )
    for name in ("Ask name", "Greet"):
        node(workflow, name)["parameters"]["options"]["memoryConnection"] = True
    workflow["connections"]["Memory"] = {
        "ai_memory": [
            [
                {"node": "Ask name", "type": "ai_memory", "index": 0},
                {"node": "Greet", "type": "ai_memory", "index": 0},
            ]
        ]
    }
    memory = InProcessMemory()
    services = Services(simple_memory=memory)
    messages: list[ChatNodeMessage] = []
    first = _run(workflow, messages, services=services)
    reply = {"json": {"action": "sendMessage", "sessionId": "s1", "chatInput": "Ada"}}
    state = json.loads(json.dumps(first.waiting))
    second = _run(workflow, messages, services=services, resume={"state": state, "reply": reply})
    assert second.status == "success"
    key = buffer_key(workflow["id"], "mem-s1")  # Simple Memory keys by workflow and session
    stored = [(m.role, m.content) for m in memory.messages(key)]
    assert stored == [
        ("ai", "Hi! What is your name?"),
        ("human", "Ada"),
        ("ai", "Nice to meet you, Ada!"),
    ]


def test_limit_wait_time_sets_the_deadline_of_the_wait():
    workflow = copy.deepcopy(example(ASK_NAME))
    node(workflow, "Ask name")["parameters"]["options"]["limitWaitTime"] = {
        "values": {"limitType": "afterTimeInterval", "resumeAmount": 2, "resumeUnit": "minutes"}
    }
    services = Services(clock=lambda: 1000.0)
    run = _run(workflow, [], services=services)
    assert run.waiting is not None
    assert run.waiting["waitTill"] == (1000 + 120) * 1000


# --- n8n 2.41.1's Chat node 1.0-1.3 --------------------------------------------------------------
# An export from n8n 2.41.1 (`n8n export:workflow`): Welcome (1.3 send) -> Ask name (sendAndWait,
# free text) -> Confirm (sendAndWait, approval with two buttons) -> Done (send).
EXPORT_13 = Path(__file__).resolve().parents[2] / "examples" / "n8n-exports" / "chat-nodes-1-3.json"
SESSION = "3f0c9a52-6a51-4f5e-9d52-8a0b7c1d2e3f"
HELLO = {"json": {"action": "sendMessage", "sessionId": SESSION, "chatInput": "hello"}}


def n8n_reply(text: str) -> dict:
    """The item n8n's chat service resumes a wait with (chat-execution-manager runNode)."""
    return {"json": {"sessionId": SESSION, "action": "sendMessage", "chatInput": text}}


def clicked(approved: bool) -> dict:
    """The item n8n's send-and-wait webhook resumes a wait with when a button is clicked."""
    return {"json": {"data": {"approved": approved, "respondedAt": "2026-12-01T14:22:36.381Z"}}}


class Conversation:
    """Runs a workflow as a worker would: each wait ends the call, its JSON state goes on."""

    def __init__(self, workflow: dict):
        self.workflow = load_workflow(workflow)
        self.messages: list[ChatNodeMessage] = []
        self.hooks = Hooks().add_handler("sendMessage", self.messages.append)
        self.run = run_workflow(self.workflow, [HELLO], hooks=self.hooks, execution_id="e13")

    def answer(self, reply: dict | None, **resume) -> None:
        state = json.loads(json.dumps(self.run.waiting))  # what Redis keeps
        resume = {"state": state, "reply": reply, **resume}
        self.run = run_workflow(
            self.workflow, [], hooks=self.hooks, resume=resume, execution_id="e13"
        )

    def output(self, name: str, run_index: int = 0) -> list[dict]:
        return self.run.run_data[name][run_index]["data"]["main"][0]

    def texts(self) -> list[str]:
        return [m.text for m in self.messages]


def export_13() -> dict:
    return json.loads(EXPORT_13.read_text())[0]


def test_an_n8n_1_3_export_sends_waits_for_text_then_for_a_button_as_n8n_does():
    chat = Conversation(export_13())
    assert chat.run.status == "waiting"
    assert chat.texts() == ["Welcome! This one does not wait.", "What is your name?"]
    assert [m.wait for m in chat.messages] == [False, True]
    # 1.3 send: n8n's chat service resumes it with the session and the node's own message.
    assert chat.output("Welcome") == [
        {
            "json": {
                "sessionId": SESSION,
                "action": "sendMessage",
                "chatInput": "Welcome! This one does not wait.",
            }
        }
    ]
    chat.answer(n8n_reply("Ada"))
    assert chat.output("Ask name") == [n8n_reply("Ada")]
    assert chat.run.status == "waiting"
    buttons = json.loads(chat.messages[-1].text)
    assert chat.messages[-1].wait is True
    assert buttons["type"] == "with-buttons"
    assert buttons["text"] == "Shall I remember Ada?"
    assert buttons["blockUserInput"] is False
    assert [(b["text"], b["type"]) for b in buttons["buttons"]] == [
        ("Yes", "primary"),
        ("No", "secondary"),
    ]
    node_id = "c1a7f00d-5e1d-4b0a-9c3e-13aa00000660"
    for button, approved in zip(buttons["buttons"], ("true", "false"), strict=True):
        path, _, query = button["link"].partition("?")
        assert path == f"/webhook-waiting/e13/{node_id}"
        assert query.startswith(f"approved={approved}&signature=")
    waiting = chat.run.run_data["Confirm"][0]["data"]["main"][0][0]
    assert waiting == {"json": {}, "sendMessage": buttons}  # n8n's output while it waits
    chat.answer(clicked(True))
    assert chat.run.status == "success"
    assert chat.output("Confirm") == [clicked(True)]
    assert chat.texts()[-1] == "Remembered Ada."


def test_a_declined_approval_goes_on_with_approved_false():
    chat = Conversation(export_13())
    chat.answer(n8n_reply("Bob"))
    chat.answer(clicked(False))
    assert chat.run.status == "success"
    assert chat.texts()[-1] == "Forgot Bob."


def test_the_waiting_state_names_each_button_link_by_its_signature_and_query():
    chat = Conversation(export_13())
    chat.answer(n8n_reply("Ada"))
    links = [b["link"] for b in json.loads(chat.messages[-1].text)["buttons"]]
    signatures = [link.rsplit("signature=", 1)[1] for link in links]
    assert chat.run.waiting["nodeId"] == "c1a7f00d-5e1d-4b0a-9c3e-13aa00000660"
    assert chat.run.waiting["resumeLinks"] == {
        signatures[0]: {"approved": "true"},
        signatures[1]: {"approved": "false"},
    }


def one_chat_node(version: float, **parameters) -> dict:
    """Chat Trigger -> the Chat node under test -> a Chat node that waits (so the run stops
    there and the first node's output can be read)."""
    workflow = copy.deepcopy(export_13())
    nodes = workflow["nodes"]
    tested = {**nodes[1], "typeVersion": version, "parameters": {"message": "Q?", **parameters}}
    workflow["nodes"] = [nodes[0], tested, nodes[2]]
    workflow["connections"] = {
        TRIGGER: {"main": [[{"node": "Welcome", "type": "main", "index": 0}]]},
        "Welcome": {"main": [[{"node": "Ask name", "type": "main", "index": 0}]]},
    }
    return workflow


ANSWER = {"sessionId": SESSION, "action": "sendMessage", "chatInput": "Ada"}


@pytest.mark.parametrize(
    ("version", "parameters", "output"),
    [
        (1, {}, ANSWER),
        (1.1, {"operation": "sendAndWait"}, {"data": ANSWER}),
        (1.2, {"operation": "sendAndWait"}, ANSWER),
        (1.3, {"operation": "sendAndWait"}, ANSWER),
        (
            1.1,
            {"operation": "sendAndWait", "responseType": "approval"},
            {"data": {**ANSWER, "approved": False}},
        ),
        (
            1.2,
            {"operation": "sendAndWait", "responseType": "approval"},
            {**ANSWER, "data": {"approved": False}},
        ),
        (
            1.3,
            {"operation": "sendAndWait", "responseType": "approval"},
            {**ANSWER, "data": {"approved": False}},
        ),
    ],
)
def test_a_chat_answer_gives_the_output_n8n_gives_for_that_version(version, parameters, output):
    chat = Conversation(one_chat_node(version, **parameters))
    assert chat.messages[0].wait is True
    chat.answer(n8n_reply("Ada"))
    assert chat.output("Welcome") == [{"json": output}]


@pytest.mark.parametrize(
    ("version", "parameters"),
    [(1, {"waitUserReply": False}), (1.1, {"operation": "send"}), (1.2, {})],
)
def test_a_send_before_1_3_passes_its_input_on(version, parameters):
    chat = Conversation(one_chat_node(version, **parameters))
    assert (chat.messages[0].text, chat.messages[0].wait) == ("Q?", False)
    assert chat.output("Welcome") == [HELLO]
    assert chat.texts() == ["Q?", "What is your name?"]  # it went on to the next node


def test_an_approval_by_button_gives_the_clicked_item_in_every_version():
    for version in (1.1, 1.2, 1.3):
        chat = Conversation(
            one_chat_node(version, operation="sendAndWait", responseType="approval")
        )
        chat.answer(clicked(True))
        assert chat.output("Welcome") == [clicked(True)], version


def test_one_approve_button_by_default_labelled_as_n8n_fills_it_in():
    chat = Conversation(one_chat_node(1.3, operation="sendAndWait", responseType="approval"))
    assert json.loads(chat.messages[0].text)["buttons"][0]["text"] == "Approve"
    double = {"values": {"approvalType": "double", "approveLabel": "Go &amp; ship"}}
    chat = Conversation(
        one_chat_node(1.3, operation="sendAndWait", responseType="approval", approvalOptions=double)
    )
    labels = [b["text"] for b in json.loads(chat.messages[0].text)["buttons"]]
    assert labels == ["Go & ship", "Decline"]


def test_an_approval_that_blocks_user_input_keeps_waiting_through_a_chat_message():
    chat = Conversation(
        one_chat_node(1.3, operation="sendAndWait", responseType="approval", blockUserInput=True)
    )
    assert json.loads(chat.messages[0].text)["blockUserInput"] is True
    chat.answer(n8n_reply("just text"))
    assert chat.run.status == "waiting"
    assert chat.run.run_data["Welcome"][0]["executionStatus"] == "waiting"
    chat.answer(clicked(True))
    assert chat.output("Welcome") == [clicked(True)]


def test_an_expired_wait_resumes_with_no_answer_and_the_node_passes_its_input_on():
    """What n8n does when limitWaitTime passes: the waiting node runs disabled, so its input
    items go on to the next node (checked on n8n 2.41.1)."""
    workflow = one_chat_node(
        1.3,
        operation="sendAndWait",
        options={"limitWaitTime": {"values": {"resumeAmount": 1, "resumeUnit": "minutes"}}},
    )
    chat = Conversation(workflow)
    assert chat.run.waiting["waitTill"] is not None
    chat.answer(None, expired=True)
    assert chat.output("Welcome") == [HELLO]
    assert chat.run.run_data["Welcome"][0]["executionStatus"] == "success"
    assert chat.run.status == "waiting"  # Ask name, the next node, now waits in turn
    assert chat.texts() == ["Q?", "What is your name?"]


def test_limit_wait_time_rows_default_to_one_hour_as_n8n_fills_them():
    workflow = one_chat_node(
        1.3, operation="sendAndWait", options={"limitWaitTime": {"values": {}}}
    )
    hooks = Hooks()
    run = run_workflow(
        load_workflow(workflow), [HELLO], hooks=hooks, services=Services(clock=lambda: 1000.0)
    )
    assert run.waiting["waitTill"] == (1000 + 3600) * 1000


def test_the_form_follows_the_version():
    chat = node_types()["@n8n/n8n-nodes-langchain.chat"].description
    v13 = shown_values(chat.properties, {"message": "x"}, 1.3)
    assert ("operation" in v13, "waitUserReply" in v13) == (True, False)
    v10 = shown_values(chat.properties, {"message": "x"}, 1)
    assert ("operation" in v10, "waitUserReply" in v10) == (False, True)
    waits = shown_values(chat.properties, {"operation": "sendAndWait"}, 1.3)
    assert waits["responseType"] == "freeTextChat"
    options = next(p for p in chat.properties if p.name == "options")
    shown = [c.name for c in options.children if displayed(c, {}, 1.3, waits)]
    assert shown == ["memoryConnection", "limitWaitTime"]
    approval = shown_values(
        chat.properties, {"operation": "sendAndWait", "responseType": "approval"}, 1.3
    )
    assert "approvalOptions" in approval and "blockUserInput" in approval
    assert [c.name for c in options.children if displayed(c, {}, 1.3, approval)] == [
        "limitWaitTime"
    ]
    assert [c.name for c in options.children if displayed(c, {}, 1.3, v13)] == ["memoryConnection"]


def test_a_chat_node_version_n8n_does_not_have_is_refused():
    workflow = one_chat_node(1.3)
    workflow["nodes"][1]["typeVersion"] = 1.4
    with pytest.raises(WorkflowValidationError, match="typeVersion 1.4") as err:
        load_workflow(workflow)
    assert err.value.node == "Welcome"
