"""The hub page's own logic, run in Chromium as the page runs it (its ES modules imported into
the signed-in page): the message tree's branches as n8n's front end reads them, the day groups
of the conversation list, and the conversation's event numbers (a repeat dropped, a gap caught
up in order) with a stand-in for the REST client."""

from __future__ import annotations

import pytest

from tests.hub_page.conftest import CHAT_USER
from tests.hub_page.page import Hub


@pytest.fixture(scope="module")
def page(site, browser):
    context = browser.new_context()
    page = context.new_page()
    Hub(page, site.base).sign_in(CHAT_USER)
    yield page
    context.close()


TREE = """async () => {
    const { MessageTree } = await import('/static/hub/tree.js');
    const tree = new MessageTree();
    const m = (id, at, previousMessageId, extra = {}) =>
        tree.put({ id, createdAt: at, previousMessageId, type: extra.type || 'human', ...extra });
    m('h1', 1, null);
    m('a1', 2, 'h1', { type: 'ai' });
    m('h2', 3, 'a1');
    m('a2', 4, 'h2', { type: 'ai' });
    m('h2b', 5, 'a1', { revisionOfMessageId: 'h2' });     // h2 edited
    m('a2b', 6, 'h2b', { type: 'ai' });
    m('a2c', 7, 'h2b', { type: 'ai', retryOfMessageId: 'a2b' });  // its answer regenerated
    const ids = () => tree.chain().map((x) => x.id).join(' ');
    const out = { latest: ids(), alternatives: tree.alternatives(tree.get('h2')).map((x) => x.id) };
    tree.focus = 'h2';
    out.back = ids();
    tree.focus = 'a2b';
    out.firstRetry = ids();
    out.retries = tree.alternatives(tree.get('a2c')).map((x) => x.id);
    m('h3', 8, 'a2b');  // sent from the branch shown
    tree.focus = 'h3';
    out.sent = ids();
    tree.focus = 'h2b';
    out.latestBelow = ids();
    return out;
}"""


def test_the_branch_shown_follows_the_focus_down_its_latest_answers(page):
    found = page.evaluate(TREE)
    assert found["latest"] == "h1 a1 h2b a2c"
    assert found["alternatives"] == ["h2", "h2b"]
    assert found["back"] == "h1 a1 h2 a2"
    assert found["firstRetry"] == "h1 a1 h2b a2b"
    assert found["retries"] == ["a2b", "a2c"]
    assert found["sent"] == "h1 a1 h2b a2b h3"
    assert found["latestBelow"] == "h1 a1 h2b a2c"  # the latest answer again, as n8n's page


GROUPS = """async () => {
    const { grouped } = await import('/static/hub/dates.js');
    const now = new Date(2026, 2, 29, 10, 0);  // the day Europe's clocks go forward
    const at = (d, h) => new Date(2026, 2, d, h).toISOString();
    const sessions = [
        { id: 'a', lastMessageAt: at(29, 1) }, { id: 'b', lastMessageAt: at(28, 23) },
        { id: 'c', lastMessageAt: at(22, 0) }, { id: 'd', lastMessageAt: at(21, 23) },
        { id: 'e', lastMessageAt: at(29, 9) },
    ];
    return grouped(sessions, now).map((g) => [g.group, g.sessions.map((s) => s.id)]);
}"""


def test_conversations_group_by_calendar_day_as_n8n_groups_them(page):
    assert page.evaluate(GROUPS) == [
        ["Today", ["e", "a"]], ["Yesterday", ["b"]], ["This week", ["c"]], ["Older", ["d"]],
    ]  # fmt: skip


EVENTS = """async () => {
    const { Conversation } = await import('/static/hub/conversation.js');
    const ev = (n, type, data = {}) => ({ type, data: { sessionId: 's', sequenceNumber: n, ...data } });
    const kept = [
        ev(1, 'chatHubHumanMessageCreated', { messageId: 'h', content: 'hi', previousMessageId: null, timestamp: 1 }),
        ev(2, 'chatHubExecutionBegin'),
        ev(3, 'chatHubStreamBegin', { messageId: 'a', previousMessageId: 'h', timestamp: 2 }),
        ev(4, 'chatHubStreamChunk', { messageId: 'a', content: 'You ' }),
        ev(5, 'chatHubStreamChunk', { messageId: 'a', content: 'said: ' }),
        ev(6, 'chatHubStreamChunk', { messageId: 'a', content: 'hi' }),
        ev(7, 'chatHubStreamEnd', { messageId: 'a', status: 'success' }),
    ];
    const asked = [];
    const api = {
        reconnect: async (id, last) => {
            asked.push(last);
            return { pendingEvents: kept.filter((e) => e.data.sequenceNumber > last), lastSequenceNumber: 7 };
        },
    };
    const c = new Conversation(api, 's', { fresh: true });
    for (const n of [1, 2, 3, 4, 4, 3]) c.receive(kept[n - 1]);  // repeats are dropped
    const before = c.tree.get('a').text;
    c.receive(kept[6]);  // 7 before 5 and 6: a gap
    await new Promise((resolve) => c.addEventListener('change', () => !c.held && resolve()));
    c.receive(kept[4]);  // late copies of what the catch-up applied
    return { before, asked, text: c.tree.get('a').text, status: c.tree.get('a').status, last: c.lastSequence };
}"""


def test_events_apply_once_in_order_and_a_gap_asks_for_what_was_missed(page):
    found = page.evaluate(EVENTS)
    assert found == {"before": "You ", "asked": [4], "text": "You said: hi", "status": "success",
                     "last": 7}  # fmt: skip


GONE = """async () => {
    const { Conversation } = await import('/static/hub/conversation.js');
    const ev = (n, type, data = {}) => ({ type, data: { sessionId: 's', sequenceNumber: n, ...data } });
    let asked = 0, timers = 0;
    const api = {
        reconnect: async () => {
            asked += 1;
            throw Object.assign(new Error('Chat session not found'), { status: 404 });
        },
    };
    const c = new Conversation(api, 's', { fresh: true });
    c.receive(ev(1, 'chatHubExecutionBegin'));
    c.receive(ev(2, 'chatHubStreamBegin', { messageId: 'a', previousMessageId: null, timestamp: 2 }));
    let retried;
    const gone = new Promise((resolve) => c.addEventListener('gone', () => resolve(true)));
    const retry = new Promise((resolve) => { retried = resolve; });
    const setTimeout = window.setTimeout;
    window.setTimeout = (fn, ms) => { timers += 1; retried(false); return setTimeout(fn, ms); };
    let told;
    try {
        c.receive(ev(5, 'chatHubStreamChunk', { messageId: 'a', content: 'lost' }));  // a gap
        told = await Promise.race([gone, retry]);  // told, or a retry scheduled instead
    } finally {
        window.setTimeout = setTimeout;
    }
    return { told, asked, timers, running: c.running, held: c.held, live: c.live.size };
}"""


def test_a_catch_up_answered_not_found_says_the_conversation_is_gone_and_asks_no_more(page):
    """After Redis came back empty (or the conversation was deleted elsewhere) the server answers
    the catch-up 404: the page is told once and schedules no retry, where it used to ask again
    every second and show the answer as still being written."""
    found = page.evaluate(GONE)
    assert found == {"told": True, "asked": 1, "timers": 0, "running": False, "held": None,
                     "live": 0}  # fmt: skip
