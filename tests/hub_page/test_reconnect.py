"""The hub page after its push channel dropped mid-answer, in a real headless Chromium against
real api and worker processes: the api's Redis subscription is killed (CLIENT KILL, as a proxy
or a failover would drop it), the page's event stream ends, the browser opens it again and the
page asks for every event after the last one it applied (`reconnect?lastSequence=n`): the answer
ends whole, each chunk once. A tab opened mid-answer on another api process shows it once and
follows it."""

from __future__ import annotations

import json

from tests.e2e.connections import connections
from tests.hub_page.agents import key, support_bot
from tests.hub_page.conftest import CHAT_USER
from tests.hub_page.page import Hub, expect

RELAY = "mini-n8n-relay"


def _kill_the_apis_subscription(site) -> int:
    """CLIENT KILL the api's relay connection (the hub's push channel rides on it)."""
    roles = {proc.pid: "api" for proc, _ in site.apis}
    found = [c["id"] for c, role in connections(site.redis, roles)
             if c.get("name") == RELAY and role == "api"]  # fmt: skip
    for connection_id in found:
        site.redis.execute_command("CLIENT", "KILL", "ID", connection_id)
    return len(found)


def test_the_page_catches_up_every_event_missed_while_its_push_channel_was_down(site, browsing):
    bot = site.activate(support_bot(delay_ms=100))
    page = browsing.tab()
    caught_up: list[str] = []
    page.on("request", lambda r: "/reconnect?" in r.url and caught_up.append(r.url))
    hub = Hub(page, site.base)
    hub.sign_in(CHAT_USER)
    hub.pick(key(bot))
    words = " ".join(f"w{i}" for i in range(30))
    full = f"You said: {words}"

    def send_and_drop() -> None:
        hub.type(words)
        running = page.locator("#messages > li.message[data-status=running] .text")
        expect(running).to_contain_text("w2 ")
        assert _kill_the_apis_subscription(site) >= 1
        expect(page.locator("#push-state")).to_have_attribute("data-state", "down")

    assert hub.answer(send_and_drop) == full  # whole, and no chunk twice
    expect(page.locator("#push-state")).to_have_attribute("data-state", "up")
    assert page.evaluate("window.hub.push.opened") >= 2
    assert page.evaluate("window.hub.conversation.catchUps") >= 1
    asked = [int(url.rsplit("lastSequence=", 1)[1]) for url in caught_up]
    assert asked and all(n > 0 for n in asked)  # what came after the last event applied
    assert browsing.errors == []


def test_a_tab_on_another_api_opened_mid_answer_shows_it_once_and_follows_it(site, browsing):
    bot = site.activate(support_bot(delay_ms=200))
    page = browsing.tab()
    hub = Hub(page, site.base)
    hub.sign_in(CHAT_USER)
    hub.pick(key(bot))
    words = " ".join(f"w{i}" for i in range(60))
    hub.type(words)
    writing = "#messages > li.message[data-status=running] .text"
    expect(page.locator(writing)).to_contain_text("w2 ")
    other = browsing.tab()  # a second tab, on another api process, opened mid-answer
    second = Hub(other, site.start_api())  # the cookie is the host's: signed in there too
    second.open(f"/home/chat/{hub.conversation_id()}")
    expect(other.locator(writing)).to_contain_text("w5 ")  # rebuilt from its chunks, followed
    page.click("#stop")
    stopped = hub.settled()
    assert second.settled() == stopped and f"You said: {words}".startswith(stopped)
    last = other.locator("#messages > li.message").last
    expect(last).to_have_attribute("data-status", "cancelled")
    session = hub.conversation_id()
    texts = [m["content"] for m in _stored(site, session) if m["type"] == "ai"]
    assert texts == [stopped]  # what the server kept, shown once in each tab
    assert browsing.errors == []


def _stored(site, session: str) -> list[dict]:
    return [json.loads(raw) for raw in site.redis.hvals(site.keys.hub_messages(session))]
