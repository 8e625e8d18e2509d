"""Who gets the hub page, in a real headless Chromium against a real api: a signed-out browser
is sent to sign in and back, a chat user sees the hub and nothing else, and signing out leaves
the hub signed out."""

from __future__ import annotations

from tests.hub_page.conftest import CHAT_USER
from tests.hub_page.page import Hub, expect


def test_a_signed_out_browser_signs_in_and_comes_back_to_the_hub(site, browsing):
    page = browsing.tab()
    page.goto(f"{site.base}/home/chat")
    assert page.url == f"{site.base}/signin?redirect=/home/chat"
    hub = Hub(page, site.base)
    hub.sign_in(CHAT_USER)
    expect(page.locator("#hub-user")).to_have_text(CHAT_USER)
    assert browsing.errors == [] and browsing.failed == []


def test_a_chat_user_reaches_only_the_hub(site, browsing):
    page = browsing.tab()
    asked: list[str] = []
    page.on("request", lambda r: "/rest/" in r.url and asked.append(r.url.split("/rest/")[1]))
    hub = Hub(page, site.base)
    hub.sign_in(CHAT_USER)
    expect(page.locator("#open-editor")).to_be_hidden()
    assert asked and all(path.startswith(("chat/", "login")) for path in asked), asked
    page.goto(f"{site.base}/")  # the editor's address sends them back
    page.wait_for_url(f"{site.base}/home/chat")
    refused = page.evaluate("fetch('/rest/workflows').then(r => r.status)")
    assert refused == 403


def test_signing_out_leaves_the_hub_signed_out(site, browsing):
    page = browsing.tab()
    hub = Hub(page, site.base)
    hub.sign_in(CHAT_USER)
    page.click("#sign-out")
    page.wait_for_url(f"{site.base}/signin?redirect=/home/chat")
    expect(page.locator("#signin")).to_be_visible()
    assert browsing.cookies() == []
    page.goto(f"{site.base}/home/chat")
    assert page.url == f"{site.base}/signin?redirect=/home/chat"
