"""n8n's approval export, as n8n 2.41.1 exports it (examples/n8n-exports/chat-approval-if.json):
Chat Trigger -> Chat node asking for approval (1.3, `responseType: approval`) -> If on
`$json.data.approved` (2.3) -> a Chat node per branch. It imports unchanged and each button
ends in its branch's message, with the frames n8n 2.41.1 sent for the same export and clicks
(recorded on the n8n beside us: buttons, `n8n|continue`, the branch's message, `n8n|continue`,
then the socket closes)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx
import pytest
from websockets.exceptions import ConnectionClosed

from tests.chat.conversation import CONTINUE, next_frame, open_chat, start
from tests.e2e.deployment import fresh_ids
from tests.waiting import wait_until

EXPORT = Path(__file__).resolve().parents[2] / "examples" / "n8n-exports" / "chat-approval-if.json"
BROWSER = {"User-Agent": "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/126.0"}


def _clickable(link: str, base: str) -> str:
    if link.startswith("//"):
        return f"http:{link}"
    return link if link.startswith("http") else f"{base}{link}"


def _buttons(ws) -> list[dict]:
    message = json.loads(next_frame(ws))
    assert {k: v for k, v in message.items() if k != "buttons"} == {
        "type": "with-buttons",
        "text": "Shall I restart the server?",
        "blockUserInput": False,
    }
    assert [(b["text"], b["type"]) for b in message["buttons"]] == [
        ("Yes", "primary"),
        ("No", "secondary"),
    ]
    return message["buttons"]


@pytest.mark.parametrize(
    ("button", "answer", "branch"),
    [(0, "Done: restart the server.", "Approved"), (1, "Cancelled, nothing was done.", "Declined")],
    ids=["approved", "declined"],
)
def test_n8n_s_approval_export_answers_each_branch_as_n8n_does(
    chat_deployment, button, answer, branch
):
    deploy = chat_deployment
    workflow = deploy.activate(fresh_ids(json.loads(EXPORT.read_text())[0]))
    session = f"s-{uuid.uuid4().hex[:12]}"
    execution_id = start(deploy.base, workflow, session, "restart the server")
    with open_chat(deploy.base, session, execution_id) as ws:
        link = _clickable(_buttons(ws)[button]["link"], deploy.base)
        assert httpx.get(link, headers=BROWSER, timeout=10).status_code == 200
        assert next_frame(ws) == CONTINUE
        assert next_frame(ws) == answer
        assert next_frame(ws) == CONTINUE
        with pytest.raises(ConnectionClosed):
            next_frame(ws)
    wait_until(
        lambda: deploy.execution(execution_id)["status"] == "success", 10, "the execution to end"
    )
    run_data = deploy.execution(execution_id)["runData"]
    other = {"Approved": "Declined", "Declined": "Approved"}[branch]
    assert branch in run_data and other not in run_data
    routed = run_data["Approved?"][0]["data"]["main"]
    assert [len(items) for items in routed] == ([1, 0] if button == 0 else [0, 1])
