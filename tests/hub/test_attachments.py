"""A message's files: taken where the agent allows them, refused (changing nothing) where it does
not, re-checked on edit (n8n skips that check), and read back by their owner only."""

from __future__ import annotations

import base64
import json
import uuid

from tests.hub.client import HubClient, agent_model, file, new_id
from tests.hub.workflows import support_bot

NOTE = b"remember the milk"


def _send_raw(client: HubClient, session: str, model: dict, files: list[dict]):
    return client.post("/conversations/send", {
        "messageId": new_id(), "sessionId": session, "message": "see the file",
        "model": model, "previousMessageId": None, "credentials": {}, "attachments": files,
    })  # fmt: skip


def test_a_file_the_agent_allows_reaches_the_workflow_and_downloads_back(hub_deployment):
    deploy = hub_deployment
    bot = deploy.activate(support_bot(files="text/plain"))
    owner = HubClient(deploy.base)
    session = str(uuid.uuid4())
    with owner.push() as push:
        human = owner.send(session, "see the file", agent_model(bot),
                           files=[file("note.txt", "text/plain", NOTE)])  # fmt: skip
        created = push.wait_for(lambda e: e["type"] == "chatHubHumanMessageCreated", "it")
        push.end_of(session)
    assert created["data"]["attachments"] == [
        {"id": f"{human}:0", "fileName": "note.txt", "mimeType": "text/plain"}
    ]
    stored = owner.conversation(session)["conversation"]["messages"][human]
    assert stored["attachments"] == [{"fileName": "note.txt", "mimeType": "text/plain"}]
    download = owner.http.get(f"/conversations/{session}/messages/{human}/attachments/0")
    assert download.status_code == 200 and download.content == NOTE
    assert download.headers["content-disposition"].startswith("attachment;")
    execution_id = owner.messages(session)[-1]["executionId"]
    record = deploy.execution(execution_id)
    trigger = record["runData"]["When chat message received"][0]["data"]["main"][0][0]
    assert trigger["json"]["files"][0]["fileName"] == "note.txt"
    assert base64.b64decode(trigger["binary"]["data0"]["data"]) == NOTE
    other = HubClient(deploy.base, "bob@example.com")
    path = f"/conversations/{session}/messages/{human}/attachments/0"
    assert other.http.get(path).status_code == 404


def test_files_the_agent_refuses_are_400_and_write_nothing(hub_deployment):
    deploy = hub_deployment
    takes_text = deploy.activate(support_bot(files="text/plain"))
    takes_none = deploy.activate(support_bot(name="No files", files=None))
    owner = HubClient(deploy.base)
    for model, files, said in [
        (agent_model(takes_text), [file("a.png", "image/png", b"\x89PNG")], "image/png"),
        (agent_model(takes_none), [file("note.txt", "text/plain", NOTE)], "does not accept"),
        (agent_model(takes_text), [{"fileName": "x", "mimeType": "text/plain", "data": "%%"}],
         "base64"),
    ]:  # fmt: skip
        session = str(uuid.uuid4())
        refused = _send_raw(owner, session, model, files)
        assert refused.status_code == 400 and said in refused.json()["message"], refused.text
        assert owner.http.get(f"/conversations/{session}").status_code == 404


def test_a_file_past_the_limits_is_413_and_a_body_past_the_rest_limit_too(hub_deployment):
    bot = hub_deployment.activate(support_bot(files="text/plain"))
    owner = HubClient(hub_deployment.base)
    big = [file("big.txt", "text/plain", b"x" * (64 * 1024 + 1))]
    assert _send_raw(owner, str(uuid.uuid4()), agent_model(bot), big).status_code == 413
    body = json.dumps({"message": "x" * (2 * 1024 * 1024)}).encode()
    huge = owner.http.post("/conversations/send", content=body,
                           headers={"Content-Type": "application/json"})  # fmt: skip
    assert huge.status_code == 413


def test_an_edit_rechecks_new_files_against_the_agents_rules(hub_deployment):
    deploy = hub_deployment
    bot = deploy.activate(support_bot(files="text/plain"))
    owner = HubClient(deploy.base)
    session = str(uuid.uuid4())
    with owner.push() as push:
        human = owner.send(session, "see the file", agent_model(bot),
                           files=[file("note.txt", "text/plain", NOTE)])  # fmt: skip
        push.end_of(session)
    edit = {
        "messageId": new_id(), "message": "see these", "model": agent_model(bot),
        "credentials": {}, "keepAttachmentIndices": [0],
        "newAttachments": [file("evil.html", "text/html", b"<script>")],
    }  # fmt: skip
    path = f"/conversations/{session}/messages/{human}/edit"
    refused = owner.post(path, edit)
    assert refused.status_code == 400 and "text/html" in refused.json()["message"]
    assert len(owner.messages(session)) == 2
    with owner.push() as push:
        edit["newAttachments"] = [file("more.txt", "text/plain", b"and eggs")]
        assert owner.post(path, edit).status_code == 200
        push.end_of(session)
    revised = owner.conversation(session)["conversation"]["messages"][edit["messageId"]]
    assert [a["fileName"] for a in revised["attachments"]] == ["note.txt", "more.txt"]
    kept = owner.http.get(f"/conversations/{session}/messages/{edit['messageId']}/attachments/0")
    assert kept.content == NOTE
