"""A workflow exported from n8n 2.41.1 with 1.3 Chat nodes, on a real deployment: a message sent
without waiting, a free-text question, then an approval whose buttons' links resume the wait,
with the frames n8n's chat socket sends (recorded from n8n 2.41.1 running the same export). The
links are absolute, as n8n's, and a bot's fetch of one resumes nothing, as in n8n."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx
import pytest
from websockets.exceptions import ConnectionClosed

from tests.chat.conversation import CONTINUE, next_frame, open_chat, reply, start
from tests.e2e.deployment import fresh_ids
from tests.waiting import wait_until

EXPORT = Path(__file__).resolve().parents[2] / "examples" / "n8n-exports" / "chat-nodes-1-3.json"
CONFIRM_ID = "c1a7f00d-5e1d-4b0a-9c3e-13aa00000660"  # the approval node's id in the export
# A person's browser: n8n (and we) ignore clicks from bots, which python-httpx/x.y is to isbot.
BROWSER = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0"


def click(link: str, user_agent: str | None = BROWSER) -> httpx.Response:
    headers = {"User-Agent": user_agent} if user_agent is not None else {}
    with httpx.Client(headers=headers) as client:  # None: no User-Agent header at all
        if user_agent is None:
            del client.headers["User-Agent"]
        return client.get(link, timeout=10)


def exported(**trigger_options) -> dict:
    workflow = fresh_ids(json.loads(EXPORT.read_text())[0])
    workflow["nodes"][0]["parameters"]["options"].update(trigger_options)
    return workflow


def _session() -> str:
    return f"s-{uuid.uuid4().hex[:12]}"


def up_to_the_buttons(deploy, ws, session: str) -> list[dict]:
    """Welcome (no wait), the name question, the answer "Ada": the approval's buttons."""
    assert next_frame(ws) == "Welcome! This one does not wait."
    assert next_frame(ws) == CONTINUE
    assert next_frame(ws) == "What is your name?"
    reply(ws, session, "Ada")
    message = json.loads(next_frame(ws))
    assert [(b["text"], b["type"]) for b in message["buttons"]] == [
        ("Yes", "primary"),
        ("No", "secondary"),
    ]
    assert {k: v for k, v in message.items() if k != "buttons"} == {
        "type": "with-buttons",
        "text": "Shall I remember Ada?",
        "blockUserInput": False,
    }
    return message["buttons"]


def test_an_n8n_1_3_export_sends_asks_and_is_approved_by_a_button_as_in_n8n(chat_deployment):
    deploy = chat_deployment
    workflow = deploy.activate(exported())
    session = _session()
    execution_id = start(deploy.base, workflow, session)
    with open_chat(deploy.base, session, execution_id) as ws:
        buttons = up_to_the_buttons(deploy, ws, session)
        for button, approved in zip(buttons, ("true", "false"), strict=True):
            assert button["link"].startswith(  # absolute, as n8n writes them
                f"{deploy.base}/webhook-waiting/{execution_id}/{CONFIRM_ID}"
                f"?approved={approved}&signature="
            )
        clicked = click(buttons[0]["link"])
        assert clicked.status_code == 200
        assert "Got it, thanks" in clicked.text
        assert next_frame(ws) == CONTINUE  # the wait ended by a click: n8n says so
        assert next_frame(ws) == "Remembered Ada."
        assert next_frame(ws) == CONTINUE
        with pytest.raises(ConnectionClosed):
            next_frame(ws)
    record = deploy.execution(execution_id)
    assert record["status"] == "success"
    welcome = record["runData"]["Welcome"][0]["data"]["main"][0][0]["json"]
    assert welcome == {
        "sessionId": session,
        "action": "sendMessage",
        "chatInput": "Welcome! This one does not wait.",
    }
    confirm = record["runData"]["Confirm"][0]["data"]["main"][0][0]["json"]
    assert confirm["data"]["approved"] is True
    assert sorted(confirm["data"]) == ["approved", "respondedAt"]
    again = click(buttons[1]["link"])
    assert (again.status_code, "No action required" in again.text) == (200, True)


def test_a_button_link_resumes_only_as_it_was_issued(chat_deployment):
    deploy = chat_deployment
    workflow = deploy.activate(exported())
    session = _session()
    execution_id = start(deploy.base, workflow, session)
    with open_chat(deploy.base, session, execution_id) as ws:
        approve, decline = (b["link"] for b in up_to_the_buttons(deploy, ws, session))
        flipped = approve.replace("approved=true", "approved=false")
        assert click(flipped).status_code == 401
        unsigned = approve.split("&signature=")[0]
        assert click(unsigned).status_code == 401
        other_node = approve.replace(CONFIRM_ID, "c1a7f00d-5e1d-4b0a-9c3e-13aa00000440")
        assert click(other_node).status_code == 409
        unknown = approve.replace(execution_id, "0123456789abcdef")
        assert click(unknown).status_code == 404
        assert httpx.head(approve, timeout=10).status_code == 200  # a look, not a click
        assert deploy.execution(execution_id)["status"] == "waiting"
        assert click(decline).status_code == 200
        assert next_frame(ws) == CONTINUE
        assert next_frame(ws) == "Forgot Ada."
    wait_until(
        lambda: deploy.execution(execution_id)["status"] == "success", 10, "the execution to end"
    )
    confirm = deploy.execution(execution_id)["runData"]["Confirm"][0]["data"]["main"][0][0]
    assert confirm["json"]["data"]["approved"] is False


@pytest.mark.parametrize(
    ("user_agent", "status"),
    [
        ("Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)", 204),  # "bot": n8n's 204
        ("Mozilla/5.0 (X11; Linux x86_64) HeadlessChrome/120.0.6099.28 Safari/537.36", 200),
        ("facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)", 200),
        ("Mozilla/5.0 (Windows NT 10.0) Chrome/120.0 Safari/537.36 Teams/1.6.00.4472", 200),
        (None, 200),  # no User-Agent: Microsoft's preview service, to n8n
    ],
)
def test_a_bot_s_fetch_of_a_link_resumes_nothing(chat_deployment, user_agent, status):
    """A link preview must not approve: n8n answers a bot an empty page and goes on waiting."""
    deploy = chat_deployment
    workflow = deploy.activate(exported())
    session = _session()
    execution_id = start(deploy.base, workflow, session)
    with open_chat(deploy.base, session, execution_id) as ws:
        approve = up_to_the_buttons(deploy, ws, session)[0]["link"]
        fetched = click(approve, user_agent)
        assert (fetched.status_code, fetched.text) == (status, "")
        assert deploy.execution(execution_id)["status"] == "waiting"
        assert click(approve).status_code == 200  # the person's click still counts
        assert next_frame(ws) == CONTINUE
        assert next_frame(ws) == "Remembered Ada."
