"""The hosted page's text from the workflow, as n8n 2.41.1's page makes it: the recorded output of
its own functions (tests/fixtures/chat_page/, recorded by record.js beside them) for the initial
messages, the title-like texts and the custom CSS. n8n's page gets HTML-escaped text that its
widget shows as text; ours gets the text itself (it sets textContent), so they compare unescaped."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from api.chat_page import custom_css, initial_messages, plain_text

CASES = json.loads(
    (Path(__file__).resolve().parents[1] / "fixtures" / "chat_page" / "sanitized.json").read_text()
)


@pytest.mark.parametrize("case", CASES, ids=lambda c: repr(c["input"])[:50])
def test_initial_messages_are_n8n_s_lines_of_plain_text(case):
    assert initial_messages(case["input"]) == [html.unescape(m) for m in case["initialMessages"]]


@pytest.mark.parametrize("case", CASES, ids=lambda c: repr(c["input"])[:50])
def test_a_title_is_n8n_s_plain_text(case):
    assert plain_text(case["input"]) == html.unescape(case["title"])


@pytest.mark.parametrize("case", CASES, ids=lambda c: repr(c["input"])[:50])
def test_custom_css_cannot_close_its_style_element(case):
    css = custom_css(case["input"])
    assert not re.search("</style", css, re.IGNORECASE)
    theirs = case["customCss"]
    if theirs is not None and not re.search("</style", theirs, re.IGNORECASE):
        assert css == theirs  # where n8n's one pass leaves none, the same text
