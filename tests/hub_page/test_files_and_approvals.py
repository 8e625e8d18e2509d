"""Files and a Chat node's questions in the hub page, in a real headless Chromium against real
api and worker processes: a file goes with a message to an agent that takes files (and can be
downloaded again), an agent that takes none refuses it with the server's reason, and a workflow
agent that asks shows its question and its approval buttons, answered from the page."""

from __future__ import annotations

from tests.hub.workflows import asking_agent
from tests.hub_page.agents import key, support_bot
from tests.hub_page.conftest import CHAT_USER
from tests.hub_page.page import Hub, expect

FETCH = "async (href) => { const r = await fetch(href); return [r.status, await r.text()]; }"


def note(name: str, text: str) -> dict:
    return {"name": name, "mimeType": "text/plain", "buffer": text.encode()}


def test_a_file_goes_to_an_agent_that_takes_files_and_one_that_takes_none_refuses_it(
    site, browsing
):
    takes = site.activate(support_bot())
    refuses = site.activate(support_bot(files=False, name="Plain bot"))
    page = browsing.tab()
    hub = Hub(page, site.base)
    hub.sign_in(CHAT_USER)
    hub.pick(key(takes))
    page.set_input_files("#file-input", [note("notes.txt", "nineteen times twenty-three")])
    expect(page.locator("#chosen-files li")).to_have_text(["notes.txt×"])
    assert hub.ask("Read my notes") == "You said: Read my notes"
    link = hub.message("Read my notes").locator(".files a")
    expect(link).to_have_text("notes.txt")
    expect(page.locator("#chosen-files li")).to_have_count(0)
    fetched = page.evaluate(FETCH, link.get_attribute("href"))  # as the link's click gets it
    assert fetched == [200, "nineteen times twenty-three"]

    page.set_input_files("#file-input", [note("more.txt", "more")])
    hub.pick(key(refuses))
    expect(page.locator("#attach")).to_be_disabled()  # it takes no files: nothing more to add
    hub.type("And these")
    expect(page.locator("#composer-error")).to_have_text("This agent does not accept files")
    expect(page.locator("#chosen-files li")).to_have_text(["more.txt×"])  # kept, to remove
    expect(page.locator("#prompt")).to_have_value("And these")
    expect(hub.message("And these")).to_have_count(0)
    page.click(".remove-file")
    assert hub.ask("And these") == "You said: And these"
    assert [f for f in browsing.failed if "/conversations/send" in f] == [
        f"400 POST {site.base}/rest/chat/conversations/send"
    ]


def test_a_question_is_answered_and_an_approval_clicked_in_the_page(site, browsing):
    agent = site.activate(asking_agent())
    page = browsing.tab()
    hub = Hub(page, site.base)
    hub.sign_in(CHAT_USER)
    hub.pick(key(agent))
    assert hub.ask("hi") == "What is your name?"
    question = hub.message("What is your name?")
    expect(question).to_have_attribute("data-status", "waiting")
    expect(question.locator(".note")).to_have_text("Waiting for your answer")
    assert [text for _, text in hub.shown()] == [
        "hi", "Welcome! This one does not wait.", "What is your name?",
    ]  # fmt: skip

    assert hub.ask("Ada") == "Shall I remember Ada?"
    approval = hub.message("Shall I remember Ada?")
    expect(approval.locator(".buttons button")).to_have_text(["Yes", "No"])
    assert (
        hub.answer(approval.locator(".buttons button", has_text="Yes").click) == "Remembered Ada."
    )
    expect(approval.locator(".buttons button")).to_have_count(2)
    expect(approval.locator(".buttons button").first).to_be_disabled()  # answered
    expect(question).to_have_attribute("data-status", "success")  # read again at the end
    assert browsing.errors == []
