"""api/bots.py says what n8n 2.41.1's isbot (3.6.13) says, User-Agent for User-Agent
(tests/fixtures/isbot/: the verdicts of the real package, recorded by record.js beside them), and
ignores the clicks n8n ignores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from api.bots import ignored_click, is_bot, says_bot

VERDICTS = json.loads(
    (Path(__file__).resolve().parents[1] / "fixtures" / "isbot" / "verdicts.json").read_text()
)


@pytest.mark.parametrize("verdict", VERDICTS, ids=lambda v: v["ua"][:60])
def test_a_user_agent_is_a_bot_exactly_when_isbot_says_so(verdict):
    assert is_bot(verdict["ua"]) is verdict["isbot"]
    assert says_bot(verdict["ua"]) is verdict["saysBot"]


def test_the_recording_covers_browsers_bots_and_isbot_s_amendments():
    bots = {v["ua"] for v in VERDICTS if v["isbot"]}
    assert len(bots) > 10 and len(VERDICTS) - len(bots) > 10
    assert any("Cubot" in v["ua"] and not v["isbot"] for v in VERDICTS)  # "(?<! cu)bot"
    assert any("HeadlessChrome" in ua for ua in bots)


@pytest.mark.parametrize(
    ("user_agent", "ignored"),
    [
        (None, True),  # n8n's isMicrosoftPreviewService: no User-Agent at all
        ("", True),
        ("Mozilla/5.0 (Windows NT 10.0) Chrome/120.0 Safari/537.36 Teams/1.6", True),
        ("Mozilla/5.0 SkypeUriPreview Preview/0.5", True),
        ("Mozilla/5.0 (X11; Linux x86_64) HeadlessChrome/120.0 Safari/537.36", True),
        ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/120.0 Safari/537.36", False),
    ],
)
def test_clicks_n8n_ignores(user_agent, ignored):
    assert ignored_click(user_agent) is ignored
