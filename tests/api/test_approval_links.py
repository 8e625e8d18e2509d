"""An approval's button links go out absolute, as n8n writes them, on the origin and scheme the
chat client reached the api by."""

from __future__ import annotations

import json

import pytest
from flask import Flask, request

from api.waiting_webhook import absolute_links, link_base
from core.chat_node_message import Approval, Button

PATH = "/webhook-waiting/e1/n1?approved=true&signature=abc"


@pytest.mark.parametrize(
    ("url", "headers", "base"),
    [
        ("http://chat.example:5678/chat", {}, "http://chat.example:5678"),
        ("https://chat.example/chat", {}, "https://chat.example"),
        # behind a TLS proxy the api sees http; the proxy says what the client used
        ("http://chat.example/chat", {"X-Forwarded-Proto": "https"}, "https://chat.example"),
        ("http://chat.example/chat", {"X-Forwarded-Proto": "https, http"}, "https://chat.example"),
        ("http://chat.example/chat", {"X-Forwarded-Proto": "http"}, "http://chat.example"),
    ],
)
def test_the_links_base_is_the_client_s_origin_with_its_scheme(url, headers, base):
    with Flask(__name__).test_request_context(url, headers=headers):
        assert link_base(request) == base


def test_a_message_with_buttons_gets_absolute_links_and_any_other_frame_is_left_alone():
    approval = Approval("Shall I?", False, (Button("Yes", PATH), Button("No", PATH, "secondary")))
    frame = absolute_links(approval.frame(), "https://chat.example")
    links = [b["link"] for b in json.loads(frame)["buttons"]]
    assert links == [f"https://chat.example{PATH}"] * 2
    assert absolute_links("Hello //there", "https://chat.example") == "Hello //there"
