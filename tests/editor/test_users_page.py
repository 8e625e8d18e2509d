"""People in the editor, in a real headless Chromium against a real deployment: the email and
password sign-in beside the key's, the owner's Users page adding and removing people, a chat
user sent to the Chat Hub, and a hosted chat with n8nUserAuth sending a signed-out browser to
sign in and back. Each test has a browser context of its own (its own cookies)."""

from __future__ import annotations

import pytest

from core.users import UserStore
from tests.chat.support import chat_workflow
from tests.chat.test_page import ask
from tests.e2e.deployment import chat_url
from tests.editor.test_signin import Browsing

expect = pytest.importorskip("playwright.sync_api").expect

PASSWORD = "Sunny-Day-42"


@pytest.fixture
def browsing(browser):
    browsing = Browsing(browser)
    yield browsing
    browsing.context.close()


@pytest.fixture
def users(deployment):
    store = UserStore(deployment.redis, deployment.keys)
    yield store
    for user in store.list():
        store.remove(user)


def sign_in(page, email: str, password: str = PASSWORD) -> None:
    page.fill("#signin-email", email)
    page.fill("#signin-password", password)
    page.click("#signin-user-form button[type='submit']")


def test_the_owner_signs_in_with_email_and_password_and_adds_and_removes_a_user(
    deployment, browsing, users
):
    users.add("owner@example.com", PASSWORD, "owner", "Olga")
    page = browsing.tab()
    page.goto(f"{deployment.base}/")
    expect(page.locator("#signin-form")).to_be_visible()  # the key's form stays beside it
    sign_in(page, "owner@example.com", "Wrong-Pass-1")
    expect(page.locator("#signin-error")).to_have_text(
        "Wrong username or password. Do you have caps lock on?"
    )
    sign_in(page, "owner@example.com")
    expect(page.locator("#signin")).to_be_hidden()
    expect(page.locator("#signed-in-as")).to_have_text("owner@example.com")
    (cookie,) = browsing.cookies()
    assert cookie["httpOnly"] is True and cookie["sameSite"] == "Strict"
    assert PASSWORD not in cookie["value"] and page.evaluate("document.cookie") == ""

    page.click("#open-users")
    dialog = page.locator("#users-dialog")
    expect(dialog.locator("li[data-email='owner@example.com']")).to_contain_text("Owner")
    dialog.locator("#users-email").fill("chat@example.com")
    dialog.locator("#users-password").fill("weak")
    dialog.locator("#users-role").select_option("global:chatUser")
    dialog.locator("#users-add").click()
    expect(dialog.locator("#users-error")).to_have_text("Password must be 8 to 64 characters long.")
    dialog.locator("#users-password").fill(PASSWORD)
    dialog.locator("#users-add").click()
    added = dialog.locator("li[data-email='chat@example.com']")
    expect(added).to_contain_text("Chat user")
    assert users.by_email("chat@example.com").role.value == "global:chatUser"

    added.locator("button.remove").click()
    expect(added).to_have_count(0)
    assert users.by_email("chat@example.com") is None
    assert [f for f in browsing.failed if "/rest/users" not in f] == [
        f"401 POST {deployment.base}/rest/login"
    ]  # the wrong password, and the weak one's 400


def test_a_member_sees_no_users_page(deployment, browsing, users):
    users.add("member@example.com", PASSWORD, "member")
    page = browsing.tab()
    page.goto(f"{deployment.base}/")
    sign_in(page, "member@example.com")
    expect(page.locator("#workflow-list")).to_be_visible()
    expect(page.locator("#open-users")).to_be_hidden()
    assert browsing.errors == [] and browsing.failed == []


def test_a_chat_user_is_sent_to_the_chat_hub_and_the_editor_stays_closed(
    deployment, browsing, users
):
    users.add("chat@example.com", PASSWORD, "chat")
    page = browsing.tab()
    page.goto(f"{deployment.base}/")
    sign_in(page, "chat@example.com")
    page.wait_for_url(f"{deployment.base}/home/chat")
    page.wait_for_selector("body[data-ready=true]")
    expect(page.locator("#hub-user")).to_have_text("chat@example.com")
    expect(page.locator("#open-editor")).to_be_hidden()
    page.goto(f"{deployment.base}/")  # the editor's address: the server sends them back
    page.wait_for_url(f"{deployment.base}/home/chat")
    assert browsing.errors == [] and browsing.failed == []


def test_a_hosted_chat_with_n8n_user_auth_sends_the_browser_to_sign_in_and_back(
    deployment, browsing, users
):
    users.add("chat@example.com", PASSWORD, "chat")
    workflow = chat_workflow(authentication="n8nUserAuth")
    deployment.workflows.save(workflow)
    deployment.workflows.activate(workflow["id"])
    url = chat_url(deployment.base, workflow)
    page = browsing.tab()
    page.goto(url)
    expect(page.locator("#signin")).to_be_visible()
    assert "/signin?redirect=" in page.url
    sign_in(page, "chat@example.com")
    page.wait_for_url(url)
    page.wait_for_selector("body[data-ready=true]")
    assert ask(page, "What is 40 + 44?") == "Based on the tools: Calculator returned 84."
    assert browsing.errors == []
