"""The conversation list of the hub page, in a real headless Chromium against a real api: n8n's
cursor pages, grouped by the day of the last message (Today, Yesterday, This week, Older),
renamed and deleted in place; another user's conversation is not to be had by its address."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from core.hub_records import HubSession
from core.hub_settings import HubSettings
from core.hub_store import ConversationStore
from core.users import UserStore
from tests.hub_page.conftest import CHAT_USER, OWNER
from tests.hub_page.page import Hub, expect

GROUPS = "#conversations .conversation-group"


def _at(days_ago: int, hour: int = 12) -> int:
    """Milliseconds at `hour` o'clock local time, `days_ago` calendar days ago."""
    day = datetime.now().date() - timedelta(days=days_ago)
    return int(datetime(day.year, day.month, day.day, hour).timestamp() * 1000)


def _conversations(site, email: str, times: dict[str, int]) -> dict[str, str]:
    """Conversations of the user titled as `times`' keys, last written then: title -> id."""
    store = ConversationStore(site.redis, site.keys, HubSettings())
    user = UserStore(site.redis, site.keys).by_email(email)
    ids = {}
    for title, at in times.items():
        session = HubSession(str(uuid.uuid4()), user.id, title, at, at, at)
        assert store.create(session)
        ids[title] = session.id
    return ids


def test_conversations_come_in_pages_grouped_by_day_and_are_renamed_and_deleted(site, browsing):
    now = int(datetime.now().timestamp() * 1000) - 60_000
    times = {"Today's": now, "Yesterday's": _at(1), "Three days ago": _at(3)}
    times |= {f"Old {n:02d}": _at(30 + n) for n in range(20)}  # 23 in all: two pages of 18
    ids = _conversations(site, OWNER, times)
    page = browsing.tab()
    hub = Hub(page, site.base)
    hub.sign_in(OWNER)
    expect(page.locator("#open-editor")).to_be_visible()  # an owner has the editor too
    expect(page.locator(f"{GROUPS} h2")).to_have_text(["Today", "Yesterday", "This week", "Older"])
    older = page.locator(f"{GROUPS}[data-group='Older'] .open")
    expect(older).to_have_count(15)
    page.click("#more-conversations")
    expect(older).to_have_count(20)
    expect(older.first).to_have_text("Old 00")
    expect(page.locator("#more-conversations")).to_be_hidden()

    item = hub.listed(ids["Yesterday's"])
    item.hover()  # its buttons show on hover, focus, or when it is open
    item.locator(".rename").click()
    page.fill(".rename-input", "Renamed yesterday")
    page.press(".rename-input", "Enter")
    expect(item.locator(".open")).to_have_text("Renamed yesterday")
    store = ConversationStore(site.redis, site.keys, HubSettings())
    owner = UserStore(site.redis, site.keys).by_email(OWNER)
    assert store.get(ids["Yesterday's"], owner.id).title == "Renamed yesterday"

    hub.listed(ids["Three days ago"]).locator(".open").click()
    page.wait_for_url(f"{site.base}/home/chat/{ids['Three days ago']}")
    expect(page.locator("#conversation-title")).to_have_text("Three days ago")
    page.once("dialog", lambda d: d.accept())
    hub.listed(ids["Three days ago"]).locator(".delete").click()  # shown: it is open
    expect(hub.listed(ids["Three days ago"])).to_have_count(0)
    page.wait_for_url(f"{site.base}/home/chat")  # the open one went: a new chat
    expect(page.locator(f"{GROUPS} h2")).to_have_text(["Today", "Yesterday", "Older"])
    assert store.get(ids["Three days ago"], owner.id) is None
    assert browsing.errors == []


def test_another_users_conversation_is_not_opened_by_its_address(site, browsing):
    (theirs,) = _conversations(site, OWNER, {"Olga's": _at(0, 1)}).values()
    page = browsing.tab()
    hub = Hub(page, site.base)
    hub.sign_in(CHAT_USER, f"/home/chat/{theirs}")
    expect(page.locator("#notice-text")).to_have_text(
        "That conversation is not yours, or it was deleted."
    )
    page.wait_for_url(f"{site.base}/home/chat")
    expect(hub.listed(theirs)).to_have_count(0)
    expect(page.locator("#conversation-title")).to_have_text("New chat")
