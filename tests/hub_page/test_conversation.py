"""A chat user's conversation with the Support bot, in a real headless Chromium against real
api and worker processes: the answer streams in, the agent remembers, the conversation is
there with its title after a reload, an edit makes a branch the page switches between, an answer
is regenerated, and a slow one stopped."""

from __future__ import annotations

from tests.hub_page.agents import key, support_bot
from tests.hub_page.conftest import CHAT_USER
from tests.hub_page.page import Hub, expect

CALCULATED = "Based on the tools: Calculator returned 437."

# Every text the streaming message showed, in order (a MutationObserver, set before sending).
WATCH = """() => {
    window.seenTexts = [];
    new MutationObserver(() => {
        const text = document.querySelector('#messages li.message[data-status=running] .text');
        if (text && text.textContent) window.seenTexts.push(text.textContent);
    }).observe(document.getElementById('messages'), {subtree: true, childList: true, characterData: true});
}"""


def test_a_chat_user_streams_an_answer_branches_by_editing_and_switches_back(site, browsing):
    bot = site.activate(support_bot(delay_ms=20))
    page = browsing.tab()
    hub = Hub(page, site.base)
    hub.sign_in(CHAT_USER)
    expect(page.locator("#open-editor")).to_be_hidden()  # a chat user sees only the hub
    hub.pick(key(bot))
    expect(page.locator("#picker option:checked")).to_have_text("🛟 Support bot")
    expect(page.locator(".suggested-prompt").first).to_have_text("What is 19 * 23?")

    page.evaluate(WATCH)
    assert hub.ask("What is 19 * 23?") == CALCULATED
    seen = page.evaluate("window.seenTexts")
    partial = [t for t in seen if t != CALCULATED]
    assert partial and all(CALCULATED.startswith(t) for t in partial), seen  # it streamed in
    assert hub.ask("My name is Ada") == "Nice to meet you, Ada!"
    assert hub.ask("What is my name?") == "Your name is Ada."
    session = hub.conversation_id()
    title = "What is 19 *"  # the mock model's rule: the first words of the first message
    expect(hub.listed(session).locator(".open")).to_have_text(title)  # pushed, no reload
    expect(page.locator("#conversation-title")).to_have_text(title)

    page.reload()
    hub.ready()
    expect(hub.listed(session).locator(".open")).to_have_text(title)
    hub.listed(session).locator(".open").click()
    expect(page.locator("#conversation-title")).to_have_text(title)
    assert [text for _, text in hub.shown()][-2:] == ["What is my name?", "Your name is Ada."]

    ada = hub.message("My name is Ada")
    ada.locator(".edit").click()
    page.fill(".edit-text", "My name is Bob")
    assert hub.answer(lambda: page.click(".save-edit")) == "Nice to meet you, Bob!"
    assert hub.ask("What is my name?") == "Your name is Bob."
    bob = hub.message("My name is Bob")
    expect(bob.locator(".position")).to_have_text("2/2")

    bob.locator(".prev").click()  # back to the first branch
    expect(hub.message("My name is Ada").locator(".position")).to_have_text("1/2")
    assert [text for _, text in hub.shown()][-2:] == ["What is my name?", "Your name is Ada."]

    regenerate = page.locator("#messages > li.message").last.locator(".regenerate")
    assert (
        hub.answer(regenerate.click) == "Your name is Ada."
    )  # the memory follows the branch shown
    expect(page.locator("#messages > li.message").last.locator(".position")).to_have_text("2/2")
    assert browsing.errors == []


def test_a_slow_answer_stops_at_a_click(site, browsing):
    bot = site.activate(support_bot(delay_ms=200))
    page = browsing.tab()
    hub = Hub(page, site.base)
    hub.sign_in(CHAT_USER)
    hub.pick(key(bot))
    words = " ".join(f"word{i}" for i in range(60))

    def send_and_stop() -> None:
        hub.type(words)
        running = page.locator("#messages > li.message[data-status=running] .text")
        expect(running).to_contain_text("You said:")
        expect(page.locator("#stop")).to_be_enabled()
        page.click("#stop")

    hub.answer(send_and_stop)
    last = page.locator("#messages > li.message").last
    expect(last).to_have_attribute("data-status", "cancelled")
    expect(last.locator(".note")).to_have_text("Stopped")
    assert len(last.locator(".text").text_content()) < len(f"You said: {words}")
    expect(page.locator("#stop")).to_be_hidden()
    assert browsing.errors == []
