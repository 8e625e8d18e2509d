"""A conversation's title, made once its first reply succeeded, and sent to the user's browsers
as a push event (`chatHubTitleUpdated`); n8n writes it to its database only, and its front end
polls every 2 s.

Asked of the same model (n8n's rule: a workflow agent's first OpenAI-compatible model node, or
a personal agent's or a chosen model), through a workflow of one Agent run on a worker, with
n8n's instructions: 1 to 4 words, sentence case, no quotes, the user's language. The mock model
answers nothing useful to that, so its conversations get a title by rule: the first words of
the first message. A failure leaves "New Chat" and a log line, as n8n's does.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from api.hub import generated
from api.responses import Outcome
from core.answers import output_text
from core.events import Kind
from core.hub_batch import Batch
from core.hub_records import HubMessage, HubRun, HubSession
from core.hub_settings import MOCK_PROVIDER
from core.results import FinalResult

log = logging.getLogger("mini_n8n.hub")

NEW_CHAT = "New Chat"  # n8n's title of a conversation before its first reply
MAX_TITLE = 256
RULE_WORDS = 4
INSTRUCTIONS = (
    "Write a title for the conversation below: 1 to 4 words, sentence case, no quotes, no "
    "punctuation at the end, in the same language as the user. Answer with the title only."
)


def give_title(h, run: HubRun) -> None:
    batch = Batch(h.rt.redis)
    batch.call("GET", h.rt.keys.hub_conversation(run.session_id))
    batch.call("HGET", h.rt.keys.hub_messages(run.session_id), run.reply_to)
    raw_session, raw_question = batch.execute()
    if raw_session is None or raw_question is None:
        return
    if HubSession.from_json(raw_session).title != NEW_CHAT:
        return
    question = HubMessage.from_json(raw_question)
    try:
        title = _asked(h, run, question.content)
    except Exception:
        log.exception("hub conversation %s: no title", run.session_id)
        return
    if not title:
        return

    def titled(session: HubSession) -> bool:
        if session.title != NEW_CHAT:
            return False  # renamed meanwhile: the user's title stays
        session.title = title
        return True

    session = h.conversations.change(run.session_id, run.user_id, titled)
    if session is not None and session.title == title:
        h.events.emit(run.user_id, run.session_id, "chatHubTitleUpdated", {"title": title})


def by_rule(text: str) -> str:
    """The first words of the first message, in sentence case, without end punctuation."""
    words = re.sub(r"\s+", " ", text).strip().split(" ")[:RULE_WORDS]
    title = " ".join(words).rstrip(".,;:!?")
    return (title[:1].upper() + title[1:])[:MAX_TITLE] if title else ""


def cleaned(text: str) -> str:
    """A model's answer as a title: its first line, without quotes or end punctuation."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    line = line.strip("\"'`*# ").rstrip(".,;:!?")
    return line[:MAX_TITLE]


def _asked(h, run: HubRun, question: str) -> str:
    how: dict[str, Any] = run.title_with or {"provider": MOCK_PROVIDER}
    if how.get("provider") == MOCK_PROVIDER or not how.get("model"):
        return by_rule(question)
    replies = [h.conversations.message(run.session_id, m) for m in run.messages]
    answer = "".join(m.content for m in replies if m is not None)
    rt = h.rt
    workflow_id = generated.model_workflow_id("title", how["model"], how.get("credential", {})
                                              .get("id"))  # fmt: skip
    node = generated.model_node(how["provider"], how["model"], how.get("credential"))
    raw, workflow = generated.agent_workflow(workflow_id, "Title Generator Agent", node, [], 0)
    chat_input = f"User: {question}\n\nAssistant: {answer}"
    item = {"json": {"sessionId": run.session_id, "action": "sendMessage", "chatInput": chat_input,
                     "systemMessage": INSTRUCTIONS}}  # fmt: skip
    launched = rt.launcher.start(raw, workflow, generated.TRIGGER, [item],
                                 mode="webhook", response_mode="lastNode")  # fmt: skip
    return cleaned(_output(h, launched))


def _output(h, launched) -> str:
    rt = h.rt
    outcome = Outcome(launched, rt.executions, rt.relay(), rt.settings, rt.liveness)
    try:
        while True:
            event = outcome.next_event()
            if event is not None and event.kind == Kind.DONE:
                body = event.body
                result = body if isinstance(body, FinalResult) else FinalResult.from_json(body)
                return output_text(result.output) if result.ok else ""
    finally:
        outcome.close()
