"""The parameter panel's expression preview: the engine's evaluator on the item the node read in
an execution's run data."""

from __future__ import annotations

import pytest

from engine.errors import ExpressionError
from engine.preview import preview
from engine.workflow import load_workflow
from tests.workflows import REDIS_CHAT, example

TRIGGER = "When chat message received"
MESSAGE = {"sessionId": "s-1", "chatInput": "What is 3 * 29?", "action": "sendMessage"}


def runs(json: dict) -> list[dict]:
    return [{"data": {"main": [[{"json": json}]]}}]


RUN_DATA = {TRIGGER: runs(MESSAGE), "AI Agent": runs({"output": "Based on the tools: 87."})}


def test_a_main_node_sees_the_output_of_the_node_before_it():
    workflow = load_workflow(example(REDIS_CHAT))
    assert preview("={{ $json.chatInput }}", workflow, RUN_DATA, "AI Agent") == "What is 3 * 29?"


def test_a_sub_node_sees_the_item_of_the_node_it_serves():
    workflow = load_workflow(example(REDIS_CHAT))
    assert preview("={{ $json.sessionId }}", workflow, RUN_DATA, "Redis Chat Memory") == "s-1"


def test_named_node_references_and_template_text_work():
    workflow = load_workflow(example(REDIS_CHAT))
    text = "=Agent said: {{ $('AI Agent').item.json.output }}"
    assert preview(text, workflow, RUN_DATA, "Calculator") == "Agent said: Based on the tools: 87."


def test_without_run_data_json_is_empty_and_a_bad_expression_is_an_expression_error():
    workflow = load_workflow(example(REDIS_CHAT))
    assert preview("={{ $json.chatInput ?? 'none' }}", workflow, {}, "AI Agent") == "none"
    with pytest.raises(ExpressionError):
        preview("={{ $json.( }}", workflow, RUN_DATA, "AI Agent")
