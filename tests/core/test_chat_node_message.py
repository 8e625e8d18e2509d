"""core/chat_node_message.py: a Chat node's message and an approval's frame, each one type with
one encoder and one decoder."""

from __future__ import annotations

import json

from core.chat_node_message import Approval, Button, ChatNodeMessage

MESSAGE = ChatNodeMessage('Hi "}\ud800', True, "Ask name", 2, 1700000000123.25)


def test_a_message_is_stored_without_its_index_in_the_order_the_readers_know():
    stored = MESSAGE.numbered(4).encode()
    assert list(json.loads(stored)) == ["text", "wait", "node", "runIndex", "sentAt"]
    assert ChatNodeMessage.decode(stored, 4) == MESSAGE.numbered(4)


def test_on_a_channel_a_message_carries_its_index_first():
    body = MESSAGE.numbered(4).to_json()
    assert list(body) == ["n", "text", "wait", "node", "runIndex", "sentAt"]
    assert ChatNodeMessage.from_json(body) == MESSAGE.numbered(4)


def test_a_message_missing_its_fields_reads_as_empty():
    assert ChatNodeMessage.from_json({"n": True, "wait": 1, "runIndex": "2"}) == ChatNodeMessage(
        "", False
    )


def test_an_approval_is_read_back_from_its_frame():
    approval = Approval(
        "Go?", False, (Button("Yes", "/w/e1/n1?a=1"), Button("No", "/x", "secondary"))
    )
    frame = approval.frame()
    assert frame.startswith('{"type":"with-buttons","text":"Go?","blockUserInput":false,')
    assert Approval.from_frame(frame) == approval


def test_any_other_text_is_no_approval():
    assert Approval.from_frame("Go?") is None
    assert Approval.from_frame('{"type":"with-buttons","text":"Go?"}') is None
