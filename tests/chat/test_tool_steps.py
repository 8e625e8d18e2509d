"""Tool steps in the stream (the AI Agent's streamToolCalls, ours and off by default) on a real
deployment: the NDJSON lines of a calculator turn, in order, with the option on and none with it
off; our hosted page shows each as one compact line above the answer."""

from __future__ import annotations

import json

from tests.chat.support import ANSWER_84, chat_workflow
from tests.e2e.client import stream_chat
from tests.e2e.deployment import chat_url
from tests.workflows import node


def tool_steps_workflow(on: bool, **trigger_options) -> dict:
    workflow = chat_workflow(trigger_options)
    node(workflow, "AI Agent")["parameters"]["options"]["streamToolCalls"] = on
    return workflow


def test_with_the_option_the_stream_carries_a_start_and_an_end_line_per_tool_call(
    chat_deployment,
):
    workflow = chat_deployment.activate(tool_steps_workflow(True))
    reply = stream_chat(chat_url(chat_deployment.base, workflow), "What is 40 + 44?", "steps-1")
    types = reply.types()
    assert types[:3] == ["begin", "tool-call-start", "tool-call-end"]
    assert types[-1] == "end" and set(types[3:-1]) == {"item"}
    assert reply.text() == ANSWER_84
    start, end = reply.chunks[1], reply.chunks[2]
    assert set(start) == set(end) == {"type", "metadata"}  # no content: nothing to show as text
    common = {"nodeName": "AI Agent", "toolName": "Calculator", "toolNode": "Calculator"}
    assert start["metadata"] == {
        **start["metadata"],
        **common,
        "toolCallId": end["metadata"]["toolCallId"],
        "toolInput": json.dumps({"input": "40 + 44"}, separators=(",", ":")),
    }
    assert end["metadata"] == {**end["metadata"], **common, "toolOutput": "84"}
    assert end["metadata"]["durationMs"] >= 0
    assert start["metadata"]["timestamp"] <= end["metadata"]["timestamp"]


def test_without_the_option_no_tool_line_is_streamed(chat_deployment):
    workflow = chat_deployment.activate(tool_steps_workflow(False))
    reply = stream_chat(chat_url(chat_deployment.base, workflow), "What is 40 + 44?", "steps-2")
    assert set(reply.types()) == {"begin", "item", "end"}
    assert reply.text() == ANSWER_84


def test_the_hosted_page_shows_a_compact_line_per_tool_call_above_the_answer(chat_deployment, page):
    workflow = chat_deployment.activate(tool_steps_workflow(True))
    page.goto(chat_url(chat_deployment.base, workflow))
    page.wait_for_selector("body[data-ready=true]")
    page.fill("#chat-input", "What is 40 + 44?")
    page.press("#chat-input", "Enter")
    answer = page.locator("#chat-messages > li.bot[data-state=done]", has_text=ANSWER_84)
    answer.wait_for()
    assert answer.locator(".tool-step").all_inner_texts() == ["Calculator · 40 + 44 → 84"]
    assert answer.locator(".text").inner_text() == ANSWER_84
