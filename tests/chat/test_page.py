"""The hosted chat page in a real headless Chromium against real api and worker processes."""

from __future__ import annotations

import concurrent.futures
import json
import re
from pathlib import Path

import httpx
import pytest

from tests.chat.conversation import FIRST, ask_name_workflow
from tests.chat.support import (
    ANSWER_84,
    BASIC_CREDENTIAL,
    BASIC_PASSWORD,
    BASIC_USER,
    TRIGGER,
    chat_workflow,
    trigger_output,
)
from tests.e2e.deployment import Deployment, chat_url, fresh_ids
from tests.waiting import wait_until
from tests.workflows import node

EXPORT_13 = Path(__file__).resolve().parents[2] / "examples" / "n8n-exports" / "chat-nodes-1-3.json"
ITEMS = "#chat-messages > li"
INITIAL = ["Hi there! 👋", "Ask me some arithmetic, or tell me your name."]


def open_chat(page, url: str) -> None:
    page.goto(url)
    page.wait_for_selector("body[data-ready=true]")


def bubbles(page) -> list[tuple[str, str]]:
    return [
        tuple(b)
        for b in page.eval_on_selector_all(
            ITEMS,
            "els => els.map(e => [e.classList.contains('user') ? 'user' : 'bot', e.textContent])",
        )
    ]


def type_message(page, text: str) -> int:
    """Sends `text` with Enter; returns how many bubbles there were before."""
    count = page.locator(ITEMS).count()
    page.fill("#chat-input", text)
    page.press("#chat-input", "Enter")
    return count


def wait_answer(page, count: int) -> str:
    """Waits until the answer bubble after `count` earlier ones is complete; returns its text."""
    page.wait_for_function(
        """n => {
            const items = document.querySelectorAll('#chat-messages > li');
            const last = items[items.length - 1];
            return items.length === n + 2 && ['done', 'error'].includes(last.dataset.state)
                && !document.getElementById('chat-send').disabled;
        }""",
        arg=count,
    )
    return page.locator(ITEMS).last.text_content()


def ask(page, text: str) -> str:
    return wait_answer(page, type_message(page, text))


def execution_ids(page) -> list[str]:
    ids: list[str] = []
    page.on(
        "response",
        lambda r: "x-execution-id" in r.headers and ids.append(r.headers["x-execution-id"]),
    )
    return ids


def test_the_page_streams_the_answer_into_the_bubble_as_it_arrives(chat_deployment, page):
    workflow = chat_deployment.activate(
        chat_workflow({"inputPlaceholder": "Ask away"}, delay_ms=80)
    )
    open_chat(page, chat_url(chat_deployment.base, workflow))
    assert page.title() == "mini-n8n calculator chat"
    assert page.text_content("#chat-title") == "mini-n8n calculator chat"
    assert (
        page.text_content("#chat-subtitle") == "Streams from the workers, remembers you in Redis."
    )
    assert page.get_attribute("#chat-input", "placeholder") == "Ask away"
    assert bubbles(page) == [("bot", m) for m in INITIAL]
    # Every text the bubbles are given, as given: a busy browser may paint several at once,
    # but each chunk still reaches the bubble when it arrives.
    page.evaluate(
        """() => {
            window.shown = [];
            new MutationObserver(records => {
                for (const r of records) for (const n of r.addedNodes) shown.push(n.textContent);
            }).observe(document.querySelector('#chat-messages'), {childList: true, subtree: true});
        }"""
    )
    count = type_message(page, "What is 40 + 44?")
    assert wait_answer(page, count) == ANSWER_84
    shown = page.evaluate("window.shown")
    partial = [t for t in shown if t and t != ANSWER_84 and ANSWER_84.startswith(t)]
    assert partial and partial[0].startswith("Based"), shown
    assert bubbles(page)[-2:] == [("user", "What is 40 + 44?"), ("bot", ANSWER_84)]


@pytest.fixture
def two_workers(redis_url):
    """Two apis and two workers on separate queues: api A only reaches worker A, B only B."""
    deploy = Deployment(redis_url, MINI_N8N_KEEPALIVE_SECONDS="1")
    try:
        queue_a, queue_b = f"{deploy.keys.prefix}qa", f"{deploy.keys.prefix}qb"
        with concurrent.futures.ThreadPoolExecutor(2) as pool:  # workers take seconds to start
            worker_a = pool.submit(deploy.start_worker, queue=queue_a)
            worker_b = pool.submit(deploy.start_worker, queue=queue_b)
            deploy.base_a = deploy.start_api(MINI_N8N_TASK_QUEUE=queue_a)
            deploy.base_b = deploy.start_api(MINI_N8N_TASK_QUEUE=queue_b)
            deploy.worker_a, deploy.worker_b = worker_a.result(), worker_b.result()
        yield deploy
    finally:
        deploy.stop()


def test_three_messages_served_by_two_workers_end_with_the_name_and_survive_a_reload(
    two_workers, page
):
    deploy = two_workers
    workflow = deploy.activate(chat_workflow())
    url_a, url_b = chat_url(deploy.base_a, workflow), chat_url(deploy.base_b, workflow)

    def second_message_via_b(route):
        if route.request.method == "POST" and "my name is Ada" in (route.request.post_data or ""):
            route.fulfill(response=route.fetch(url=url_b))
        else:
            route.continue_()

    page.route(url_a, second_message_via_b)
    ids = execution_ids(page)
    open_chat(page, url_a)
    assert ask(page, "What is 40 + 44?") == ANSWER_84
    assert ask(page, "my name is Ada") == "Nice to meet you, Ada!"
    assert ask(page, "What is my name?") == "Your name is Ada."
    pids = [deploy.execution(i)["worker"]["pid"] for i in ids]
    assert pids == [deploy.worker_a.pid, deploy.worker_b.pid, deploy.worker_a.pid]

    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    assert bubbles(page) == [("bot", m) for m in INITIAL] + [
        ("user", "What is 40 + 44?"),
        ("bot", ANSWER_84),
        ("user", "my name is Ada"),
        ("bot", "Nice to meet you, Ada!"),
        ("user", "What is my name?"),
        ("bot", "Your name is Ada."),
    ]
    assert len(ids) == 3  # restoring ran nothing


def test_html_in_the_workflow_s_texts_is_stripped_and_in_the_chat_shows_as_text(
    chat_deployment, page
):
    """As n8n's page: tags go from the title, subtitle, placeholder and initial messages (and
    with a script or style tag, its content); a chat message is text, whatever it holds."""
    title = '<b>Shop</b> <img src=x onerror="window.__xss_title=1">chat'
    subtitle = "Ask us</script><script>window.__xss_subtitle=1</script>"
    placeholder = '"><img src=x onerror="window.__xss_placeholder=1">'
    initial = (
        "<b>bold?</b> &amp; more\n</script><script>window.__xss_initial=1</script>\n\u2028<!--"
    )
    attack = "<img src=x onerror=window.__xss_message=1>"
    workflow = chat_workflow(
        {"title": title, "subtitle": subtitle, "inputPlaceholder": placeholder},
        initialMessages=initial,
    )
    open_chat(page, chat_url(chat_deployment.base, chat_deployment.activate(workflow)))
    assert page.text_content("#chat-title") == "Shop chat"
    assert page.text_content("#chat-subtitle") == "Ask us"
    assert page.get_attribute("#chat-input", "placeholder") == '">'
    assert bubbles(page) == [("bot", "bold? & more")]
    assert ask(page, attack) == f"You said: {attack}"
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    assert bubbles(page)[-2:] == [("user", attack), ("bot", f"You said: {attack}")]
    assert page.locator("img, b, script:not([nonce]):not([type])").count() == 0
    flags = page.evaluate("Object.keys(window).filter(k => k.startsWith('__xss'))")
    assert flags == []


def test_custom_css_restyles_the_page_as_it_restyles_n8n_s(chat_deployment, page):
    """n8n's theme variables and its widget's class names reach our page; a `</style>` in the
    CSS closes nothing, so no script of it runs."""
    css = (
        ":root { --chat--message--user--background: rgb(1, 2, 3); "
        "--chat--header--background: rgb(4, 5, 6); }\n"
        ".chat-message { max-width: 50%; }\n"
        ".chat-message-from-bot { letter-spacing: 3px; }\n"
        "</sty</stylele><script>window.__xss_css=1</script>"
    )
    workflow = chat_deployment.activate(chat_workflow({"customCss": css}))
    open_chat(page, chat_url(chat_deployment.base, workflow))
    ask(page, "hello")

    def style(selector: str, name: str) -> str:
        return page.eval_on_selector(selector, f"e => getComputedStyle(e).{name}")

    assert style(f"{ITEMS}.user", "backgroundColor") == "rgb(1, 2, 3)"
    assert style(".chat-header", "backgroundColor") == "rgb(4, 5, 6)"
    assert style(f"{ITEMS}.bot", "letterSpacing") == "3px"
    assert style(f"{ITEMS}.bot", "maxWidth") == "50%"
    assert page.evaluate("Object.keys(window).filter(k => k.startsWith('__xss'))") == []
    csp = httpx.get(chat_url(chat_deployment.base, workflow)).headers["content-security-policy"]
    assert "font-src https: data:" in csp and re.search(r"script-src 'nonce-[^']+';", csp)


def test_without_custom_css_the_page_keeps_its_own_look(chat_deployment, page):
    workflow = chat_deployment.activate(chat_workflow())
    open_chat(page, chat_url(chat_deployment.base, workflow))
    ask(page, "hello")
    user = page.eval_on_selector(f"{ITEMS}.user", "e => getComputedStyle(e).backgroundColor")
    assert user == "rgb(232, 97, 60)"  # our accent, not n8n's theme (an option left out is unset)
    csp = httpx.get(chat_url(chat_deployment.base, workflow)).headers["content-security-policy"]
    assert "https:" not in csp


def test_the_welcome_screen_comes_first_and_its_button_starts_a_new_chat(chat_deployment, page):
    options = {"showWelcomeScreen": True, "getStarted": "Let's <b>go</b>"}
    workflow = chat_deployment.activate(
        chat_workflow({**options, "loadPreviousSession": "notSupported"})
    )
    open_chat(page, chat_url(chat_deployment.base, workflow))
    key = f"mini-n8n-chat/{workflow['id']}/sessionId"
    before = page.evaluate("k => localStorage.getItem(k)", key)
    assert page.is_visible("#chat-welcome") and page.text_content("#chat-start") == "Let's go"
    assert not page.is_visible("#chat-input") and not page.is_visible("#chat-messages")
    page.click("#chat-start")
    assert not page.is_visible("#chat-welcome") and page.is_visible("#chat-input")
    assert bubbles(page) == [("bot", m) for m in INITIAL]
    assert page.evaluate("k => localStorage.getItem(k)", key) != before  # a new session
    assert ask(page, "What is 40 + 44?") == ANSWER_84


def test_a_restored_session_skips_the_welcome_screen(chat_deployment, page):
    """As in the widget: loading the previous session (the example's loadPreviousSession
    "memory") makes it the current one."""
    workflow = chat_workflow({"showWelcomeScreen": True})
    open_chat(page, chat_url(chat_deployment.base, chat_deployment.activate(workflow)))
    assert not page.is_visible("#chat-welcome") and page.is_visible("#chat-input")


def test_a_failed_execution_shows_a_readable_error_line(chat_deployment, page):
    workflow = chat_workflow()
    model = node(workflow, "Mock Chat Model")
    model["type"] = "@n8n/n8n-nodes-langchain.lmChatOpenAi"
    model["parameters"] = {"model": "gpt-4o-mini"}
    model["credentials"] = {"openAiApi": {"id": "none", "name": "No such key"}}
    open_chat(page, chat_url(chat_deployment.base, chat_deployment.activate(workflow)))
    count = type_message(page, "hello")
    wait_answer(page, count)
    error = page.locator(f"{ITEMS}:last-child .error").text_content()
    # The chat's public: it reads which execution failed; the editor reads why, in the record.
    assert re.fullmatch(r"Error: The workflow could not answer \(execution \w+\)\.", error)
    assert page.get_attribute(f"{ITEMS}:last-child", "data-state") == "error"


def test_new_conversation_starts_a_fresh_session(chat_deployment, page):
    workflow = chat_deployment.activate(chat_workflow())
    open_chat(page, chat_url(chat_deployment.base, workflow))
    key = f"mini-n8n-chat/{workflow['id']}/sessionId"
    first = page.evaluate("k => localStorage.getItem(k)", key)
    assert ask(page, "my name is Ada") == "Nice to meet you, Ada!"
    page.click("#chat-new")
    assert bubbles(page) == [("bot", m) for m in INITIAL]
    second = page.evaluate("k => localStorage.getItem(k)", key)
    assert second != first and len(second) == 36
    assert ask(page, "What is my name?") == "I don't know your name yet."
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    assert [text for _, text in bubbles(page)][-2:] == [
        "What is my name?",
        "I don't know your name yet.",
    ]
    assert len(chat_deployment.chat_list(first)) == 2


def test_a_json_answer_and_an_attached_file(chat_deployment, page):
    workflow = chat_workflow({"responseMode": "lastNode", "allowFileUploads": True})
    open_chat(page, chat_url(chat_deployment.base, chat_deployment.activate(workflow)))
    ids = execution_ids(page)
    page.set_input_files(
        "#chat-files", files=[{"name": "notes.txt", "mimeType": "text/plain", "buffer": b"hello"}]
    )
    assert page.text_content("#chat-chosen") == "notes.txt"
    assert ask(page, "What is 40 + 44?") == ANSWER_84
    assert bubbles(page)[-2] == ("user", "What is 40 + 44?notes.txt")
    item = trigger_output(chat_deployment.execution(ids[0]))
    assert [f["fileName"] for f in item["json"]["files"]] == ["notes.txt"]


def test_a_page_behind_basic_auth_works_once_the_browser_has_the_login(
    chat_deployment, browser, console_errors
):
    workflow = chat_workflow(authentication="basicAuth")
    node(workflow, TRIGGER)["credentials"] = {"httpBasicAuth": BASIC_CREDENTIAL}
    url = chat_url(chat_deployment.base, chat_deployment.activate(workflow))
    context = browser.new_context(
        http_credentials={"username": BASIC_USER, "password": BASIC_PASSWORD}
    )
    try:
        page = context.new_page()
        console_errors.watch(page)
        open_chat(page, url)
        assert ask(page, "What is 40 + 44?") == ANSWER_84
    finally:
        context.close()
    assert console_errors == []


def test_the_page_holds_a_chat_node_conversation_over_the_websocket(chat_deployment, page):
    workflow = chat_deployment.activate(ask_name_workflow())
    ids = execution_ids(page)
    open_chat(page, chat_url(chat_deployment.base, workflow))
    assert ask(page, "hello") == FIRST
    type_message(page, "Ada")
    page.locator(ITEMS, has_text="Nice to meet you, Ada!").wait_for()
    page.wait_for_function(
        "() => !document.querySelector('#chat-messages > li[data-state=pending]')"
    )  # the socket closed with the execution: no bubble waits for more
    assert bubbles(page)[1:] == [
        ("user", "hello"),
        ("bot", FIRST),
        ("user", "Ada"),
        ("bot", "Nice to meet you, Ada!"),
    ]
    assert len(ids) == 1  # the reply went over the socket, not as a second POST
    record = wait_until(
        lambda: (r := chat_deployment.execution(ids[0]))["status"] == "success" and r,
        10,
        "the conversation's execution to succeed",
    )
    assert record["runData"]["Ask name"][0]["data"]["main"][0][0]["json"]["chatInput"] == "Ada"


def test_the_page_shows_an_approval_s_buttons_and_a_click_answers_it(chat_deployment, page):
    """The n8n 2.41.1 export with 1.3 Chat nodes on our hosted page: the buttons of a
    with-buttons message, a click that resumes the execution, the clicked one kept."""
    workflow = chat_deployment.activate(fresh_ids(json.loads(EXPORT_13.read_text())[0]))
    open_chat(page, chat_url(chat_deployment.base, workflow))
    type_message(page, "hello")
    page.locator(ITEMS, has_text="What is your name?").wait_for()
    type_message(page, "Ada")
    question = page.locator(ITEMS, has_text="Shall I remember Ada?")
    question.wait_for()
    assert question.locator("button").all_inner_texts() == ["Yes", "No"]
    question.locator("button", has_text="No").click()
    page.locator(ITEMS, has_text="Forgot Ada.").wait_for()
    assert question.locator("button").all_inner_texts() == ["No"]
    assert question.locator("button").is_disabled()
    page.wait_for_function(
        "() => !document.querySelector('#chat-messages > li[data-state=pending]')"
    )  # the socket closed with the execution: no bubble waits for more
    assert [text for _, text in bubbles(page)[1:]] == [
        "hello",
        "Welcome! This one does not wait.",
        "What is your name?",
        "Ada",
        "Shall I remember Ada?No",  # the question, then the button kept
        "Forgot Ada.",
    ]
