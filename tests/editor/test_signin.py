"""Signing in to the editor, in a real headless Chromium against a real deployment: a page in a
user's words, then a session cookie that new tabs and bookmarks use until sign-out or a new key.
Each test has a browser context of its own, so it starts with no cookie."""

from __future__ import annotations

import time

import pytest

from tests.browser import person
from tests.e2e.deployment import fresh_ids
from tests.editor.conftest import API_KEY
from tests.workflows import REDIS_CHAT, example

expect = pytest.importorskip("playwright.sync_api").expect

COOKIE = "mini-n8n-auth"
SIGNED_OUT = "This browser is no longer signed in"


class Browsing:
    """One fresh browser context (its own cookies) and what its pages logged as errors, and the
    requests that failed."""

    def __init__(self, browser):
        # A person's user agent: headless Chromium's counts as a bot, whose clicks on approval
        # links are ignored as n8n ignores them (api/bots.py).
        self.context = browser.new_context(
            viewport={"width": 1400, "height": 900}, user_agent=person(browser)
        )
        self.errors: list[str] = []
        self.failed: list[str] = []

    def tab(self):
        page = self.context.new_page()
        page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        page.on("pageerror", lambda err: self.errors.append(f"uncaught: {err}"))
        page.on(
            "response",
            lambda r: (
                r.status >= 400 and self.failed.append(f"{r.status} {r.request.method} {r.url}")
            ),
        )
        return page

    def cookies(self) -> list[dict]:
        return [c for c in self.context.cookies() if c["name"] == COOKIE]


@pytest.fixture
def browsing(browser):
    browsing = Browsing(browser)
    yield browsing
    browsing.context.close()


@pytest.fixture
def workflow(deployment) -> dict:
    workflow = fresh_ids(example(REDIS_CHAT))
    deployment.workflows.save(workflow)
    return workflow


def listed(page, workflow: dict):
    return page.locator(f"#workflow-list [data-workflow-id='{workflow['id']}']")


def sign_in(page, key: str = API_KEY) -> None:
    page.fill("#signin-key", key)
    page.click("#signin-form button[type='submit']")


def test_without_a_sign_in_the_page_says_where_the_key_is_and_makes_no_failed_request(
    deployment, browsing
):
    page = browsing.tab()
    page.goto(f"{deployment.base}/")
    signin = page.locator("#signin")
    expect(signin).to_be_visible()
    expect(signin.locator("h1")).to_have_text("Sign in to the mini-n8n editor")
    for where in ("make up", "#key=", ".mini-n8n/state.json", "MINI_N8N_API_KEY"):
        expect(signin).to_contain_text(where)
    expect(page.locator(".topbar")).to_be_hidden()  # no toolbar to click while signed out
    expect(page.locator(".layout")).to_be_hidden()
    assert browsing.errors == [] and browsing.failed == []


def test_signing_in_keeps_a_cookie_no_script_reads_and_a_new_tab_is_signed_in(
    deployment, browsing, workflow
):
    page = browsing.tab()
    page.goto(f"{deployment.base}/")
    sign_in(page)
    expect(listed(page, workflow)).to_be_visible()
    expect(page.locator("#signin")).to_be_hidden()
    expect(page.locator("#sign-out")).to_be_visible()

    (cookie,) = browsing.cookies()
    assert cookie["httpOnly"] is True and cookie["sameSite"] == "Strict"
    assert API_KEY not in cookie["value"]
    assert cookie["expires"] > time.time() + 29 * 24 * 3600  # survives closing the browser
    assert page.evaluate("document.cookie") == ""
    stored = page.evaluate("JSON.stringify({...sessionStorage, ...localStorage})")
    assert API_KEY not in stored

    bookmark = browsing.tab()
    bookmark.goto(f"{deployment.base}/#workflow={workflow['id']}")
    expect(bookmark.locator(".node[data-node-name='AI Agent']")).to_be_visible()
    expect(bookmark.locator("#push-state")).to_have_attribute("data-state", "up")
    expect(bookmark.locator("#signin")).to_be_hidden()
    assert browsing.errors == [] and browsing.failed == []


def test_the_link_make_up_prints_signs_in_and_leaves_the_address_bar(
    deployment, browsing, workflow
):
    page = browsing.tab()
    page.goto(f"{deployment.base}/#key={API_KEY}&workflow={workflow['id']}")
    expect(page.locator(".node[data-node-name='AI Agent']")).to_be_visible()
    assert "key=" not in page.url and page.url.endswith(f"#workflow={workflow['id']}")
    assert len(browsing.cookies()) == 1
    assert browsing.errors == [] and browsing.failed == []


def test_a_bookmark_works_on_an_api_started_after_the_sign_in(deployment, browsing, workflow):
    """The cookie is checked against the key alone, so a restarted api (here: a new api process
    of the same deployment) takes it; cookies are per host, not per port."""
    page = browsing.tab()
    page.goto(f"{deployment.base}/#key={API_KEY}")
    expect(listed(page, workflow)).to_be_visible()
    restarted = deployment.start_api()
    bookmark = browsing.tab()
    bookmark.goto(f"{restarted}/#workflow={workflow['id']}")
    expect(bookmark.locator(".node[data-node-name='AI Agent']")).to_be_visible()
    expect(bookmark.locator("#signin")).to_be_hidden()
    assert browsing.errors == [] and browsing.failed == []


def test_signing_out_signs_every_tab_out(deployment, browsing, workflow):
    first, second = browsing.tab(), browsing.tab()
    first.goto(f"{deployment.base}/#key={API_KEY}")
    expect(listed(first, workflow)).to_be_visible()
    second.goto(f"{deployment.base}/")
    expect(listed(second, workflow)).to_be_visible()

    first.click("#sign-out")
    expect(first.locator("#signin")).to_be_visible()
    expect(first.locator(".topbar")).to_be_hidden()
    assert browsing.cookies() == []

    listed(second, workflow).locator("button").click()  # its next request is refused
    expect(second.locator("#signin")).to_be_visible()
    expect(second.locator("#signin-error")).to_contain_text(SIGNED_OUT)
    assert [f for f in browsing.failed if "/rest/" in f and f.startswith("401 GET")]
    sign_in(second)
    expect(second.locator("#signin")).to_be_hidden()
    expect(second.locator("#workflow-list")).to_be_visible()


def test_a_wrong_key_is_refused_with_a_message_and_no_cookie(deployment, browsing):
    page = browsing.tab()
    page.goto(f"{deployment.base}/")
    sign_in(page, "not-the-key")
    expect(page.locator("#signin-error")).to_have_text("That is not this server's api key.")
    expect(page.locator("#signin")).to_be_visible()
    assert browsing.cookies() == []
    assert browsing.failed == [f"401 POST {deployment.base}/rest/login"]


def test_a_new_key_signs_the_browser_out_and_the_new_key_signs_it_in(deployment, browsing):
    """Another key on the same host: the cookie the old key signed is sent, and refused."""
    page = browsing.tab()
    page.goto(f"{deployment.base}/#key={API_KEY}")
    expect(page.locator("#workflow-list")).to_be_visible()
    new_key = "a-new-key-0123456789"
    changed = deployment.start_api(MINI_N8N_API_KEY=new_key)
    later = browsing.tab()
    later.goto(f"{changed}/")
    expect(later.locator("#signin")).to_be_visible()
    assert browsing.failed == []  # asked without a request that fails
    sign_in(later, new_key)
    expect(later.locator("#signin")).to_be_hidden()
    expect(later.locator("#workflow-list")).to_be_visible()
