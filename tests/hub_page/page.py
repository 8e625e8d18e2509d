"""The Chat Hub page as a test drives it: sign in, pick, send, wait for the answer, read the
branch shown. Every wait waits for the page's own state (the answer ended, the push channel
up), never for a time."""

from __future__ import annotations

import pytest

from tests.hub_page.conftest import PASSWORD

expect = pytest.importorskip("playwright.sync_api").expect

# A new answer ended: the last message is an AI message other than `before`, and nothing runs.
ANSWERED = """(before) => {
    const c = window.hub && window.hub.conversation;
    const items = [...document.querySelectorAll('#messages > li.message')];
    const last = items[items.length - 1];
    return Boolean(c) && !c.running && !c.held && Boolean(last) && last.dataset.type === 'ai'
        && last.dataset.status !== 'running' && last.dataset.messageId !== before;
}"""
LAST_ID = """() => {
    const items = document.querySelectorAll('#messages > li.message');
    return items.length ? items[items.length - 1].dataset.messageId : null;
}"""


class Hub:
    def __init__(self, page, base: str):
        self.page = page
        self.base = base

    def sign_in(self, email: str, path: str = "/home/chat") -> None:
        """From a signed-out browser: the hub sends it to sign in, and back."""
        self.page.goto(self.base + path)
        expect(self.page.locator("#signin")).to_be_visible()
        self.page.fill("#signin-email", email)
        self.page.fill("#signin-password", PASSWORD)
        self.page.click("#signin-user-form button[type='submit']")
        self.page.wait_for_url(self.base + path)
        self.ready()

    def open(self, path: str = "/home/chat") -> None:
        self.page.goto(self.base + path)
        self.ready()

    def ready(self) -> None:
        self.page.wait_for_selector("body[data-ready=true]")
        expect(self.page.locator("#push-state")).to_have_attribute("data-state", "up")

    def pick(self, key: str) -> None:
        self.page.select_option("#picker", key)

    def type(self, text: str) -> None:
        self.page.fill("#prompt", text)
        self.page.press("#prompt", "Enter")

    def ask(self, text: str) -> str:
        """Sends `text` and waits for the whole answer; returns it."""
        return self.answer(lambda: self.type(text))

    def answer(self, action) -> str:
        """Does `action` and waits for the new answer it brings; returns its text."""
        before = self.page.evaluate(LAST_ID)
        action()
        self.page.wait_for_function(ANSWERED, arg=before)
        return self.page.locator("#messages > li.message").last.locator(".text").text_content()

    def settled(self) -> str:
        """Waits until the answer being written (or the last one) ended; returns its text."""
        self.page.wait_for_function(ANSWERED, arg="")
        return self.page.locator("#messages > li.message").last.locator(".text").text_content()

    def shown(self) -> list[tuple[str, str]]:
        """The branch shown: (type, text) of each message."""
        return self.page.eval_on_selector_all(
            "#messages > li.message",
            "els => els.map(e => [e.dataset.type, e.querySelector('.text').textContent])",
        )

    def message(self, text: str):
        return self.page.locator(
            "#messages > li.message", has=self.page.locator(".text", has_text=text)
        )

    def conversation_id(self) -> str:
        return self.page.evaluate("window.hub.conversation.id")

    def listed(self, session_id: str):
        return self.page.locator(f"#conversations [data-session-id='{session_id}']")
