"""n8n's own `@n8n/chat` widget, unchanged, embedded on another origin and talking to our Chat
Trigger: CORS preflights, loadPreviousSession on mount, streaming on and off, and a conversation
with Chat nodes (responseNodes) over its WebSocket.

The widget comes from the npm registry (`npm pack`, into a temporary folder, never committed) or
from MINI_N8N_N8N_CHAT_DIST (a `dist` folder of the package). Without either the test is skipped.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import subprocess
import tarfile
import threading
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.chat.conversation import FIRST, ask_name_workflow
from tests.chat.support import ANSWER_84, chat_workflow
from tests.e2e.deployment import chat_url, fresh_ids
from tests.waiting import wait_until
from tests.workflows import node

EXPORTS = Path(__file__).resolve().parents[2] / "examples" / "n8n-exports"
EXPORT_13 = EXPORTS / "chat-nodes-1-3.json"
APPROVAL_IF = EXPORTS / "chat-approval-if.json"
WIDGET = os.environ.get("MINI_N8N_N8N_CHAT_PACKAGE", "@n8n/chat@1.37.0")
HOST_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><link rel="icon" href="data:,">
<link href="dist/style.css" rel="stylesheet"></head>
<body><div id="n8n-chat"></div>
<script type="module">
import { createChat } from './dist/chat.bundle.es.js';
const params = new URLSearchParams(location.search);
createChat({
  webhookUrl: params.get('webhook'),
  mode: 'fullscreen',
  enableStreaming: params.get('streaming') === 'true',
  initialMessages: ['Hello from the widget'],
});
</script></body></html>
"""


def _packed_dist(folder: Path) -> Path:
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed: cannot fetch @n8n/chat")
    try:
        done = subprocess.run(
            [npm, "pack", WIDGET, "--silent"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=120,
        )
    except subprocess.TimeoutExpired:
        pytest.skip("the npm registry did not answer in time: cannot fetch @n8n/chat")
    if done.returncode != 0:
        pytest.skip(f"npm pack {WIDGET} failed (registry unreachable?): {done.stderr[-300:]}")
    with tarfile.open(folder / done.stdout.strip().splitlines()[-1]) as tar:
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}  # Python >= 3.11.4
        tar.extractall(folder, **safe)
    return folder / "package" / "dist"


def _open_export(export, chat_deployment, widget_site, page) -> dict:
    """An n8n export, unchanged but for the origin it allows, active and open in the widget
    (no streaming, as its Chat nodes answer); the workflow as activated."""
    workflow = fresh_ids(json.loads(export.read_text())[0])
    workflow["nodes"][0]["parameters"]["options"]["allowedOrigins"] = widget_site
    url = chat_url(chat_deployment.base, chat_deployment.activate(workflow))
    page.goto(f"{widget_site}/index.html?webhook={quote(url)}&streaming=false")
    return workflow


def _the_one_run_succeeds(deployment, workflow: dict) -> str:
    """The conversation was one execution, and it ends in success: its id."""
    runs = deployment.redis.zrange(deployment.keys.workflow_executions(workflow["id"]), 0, -1)
    assert len(runs) == 1
    wait_until(
        lambda: deployment.execution(runs[0])["status"] == "success",
        10,
        "the conversation's execution to succeed",
    )
    return runs[0]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    extensions_map = {
        **http.server.SimpleHTTPRequestHandler.extensions_map,
        ".js": "text/javascript",
        ".mjs": "text/javascript",
    }

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def widget_site(tmp_path_factory):
    """A test-only static site on its own origin: the host page and the widget's dist files."""
    site = tmp_path_factory.mktemp("widget-site")
    given = os.environ.get("MINI_N8N_N8N_CHAT_DIST")
    dist = Path(given) if given else _packed_dist(tmp_path_factory.mktemp("npm"))
    shutil.copytree(dist, site / "dist")
    (site / "index.html").write_text(HOST_PAGE)
    handler = functools.partial(_Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("streaming", [True, False], ids=["streaming", "lastNode"])
def test_the_n8n_chat_widget_gets_the_answer_and_restores_the_session(
    chat_deployment, widget_site, page, streaming
):
    mode = "streaming" if streaming else "lastNode"
    workflow = chat_workflow({"responseMode": mode, "allowedOrigins": widget_site})
    url = chat_url(chat_deployment.base, chat_deployment.activate(workflow))
    allowed = []  # the host page is another origin: the browser enforces CORS on every call
    page.on("response", lambda r: allowed.append(r.headers.get("access-control-allow-origin")))
    page.goto(f"{widget_site}/index.html?webhook={quote(url)}&streaming={str(streaming).lower()}")
    page.locator(".chat-message-from-bot", has_text="Hello from the widget").wait_for()
    box = page.locator('[data-test-id="chat-input"]')
    box.fill("What is 40 + 44?")
    box.press("Enter")
    page.locator(".chat-message-from-bot", has_text=ANSWER_84).wait_for()
    # The answer shows as it streams; the typing bubble (a bot message too) stays until the
    # response has ended.
    page.locator(".chat-message-typing").wait_for(state="detached")
    assert page.locator(".chat-message-from-bot").last.inner_text().strip() == ANSWER_84
    assert allowed.count(widget_site) == 2  # loadPreviousSession, then the message

    page.reload()
    page.locator(".chat-message-from-user", has_text="What is 40 + 44?").wait_for()
    page.locator(".chat-message-from-bot", has_text=ANSWER_84).wait_for()


def test_the_widget_on_an_origin_not_allowed_is_refused_by_the_browser(
    chat_deployment, widget_site, page, console_errors
):
    workflow = chat_workflow({"allowedOrigins": "https://shop.example"})
    url = chat_url(chat_deployment.base, chat_deployment.activate(workflow))
    # On mount the widget asks for the previous session; the refused preflight stops it there
    # and the widget logs the failed fetch last.
    with page.expect_console_message(lambda m: "Failed to fetch" in m.text):
        page.goto(f"{widget_site}/index.html?webhook={quote(url)}&streaming=true")
    assert any("has been blocked by CORS policy" in e for e in console_errors), console_errors
    console_errors.clear()  # expected here: the browser reports the refused preflight
    runs = chat_deployment.redis.zcard(chat_deployment.keys.workflow_executions(workflow["id"]))
    assert runs == 0


def test_the_n8n_chat_widget_holds_a_conversation_with_chat_nodes_over_the_websocket(
    chat_deployment, widget_site, page
):
    workflow = ask_name_workflow()
    node(workflow, "When chat message received")["parameters"]["options"]["allowedOrigins"] = (
        widget_site
    )
    url = chat_url(chat_deployment.base, chat_deployment.activate(workflow))
    page.goto(f"{widget_site}/index.html?webhook={quote(url)}&streaming=false")
    page.locator(".chat-message-from-bot", has_text="Hello from the widget").wait_for()
    box = page.locator('[data-test-id="chat-input"]')
    box.fill("hello")
    box.press("Enter")
    page.locator(".chat-message-from-bot", has_text=FIRST).wait_for()
    box.fill("Ada")
    box.press("Enter")  # the widget sends it over its WebSocket, not as a new POST
    page.locator(".chat-message-from-bot", has_text="Nice to meet you, Ada!").wait_for()
    # `n8n|continue` shows the typing bubble (another message may come) until the socket closes
    # as the execution ends: the conversation is over once it is gone.
    page.locator(".chat-message-typing").wait_for(state="detached")
    bots = [t.strip() for t in page.locator(".chat-message-from-bot").all_inner_texts()]
    assert bots == ["Hello from the widget", FIRST, "Nice to meet you, Ada!"]
    _the_one_run_succeeds(chat_deployment, workflow)


def test_the_n8n_chat_widget_shows_an_approval_s_buttons_and_a_click_answers_it(
    chat_deployment, widget_site, page
):
    """The n8n 2.41.1 export with 1.3 Chat nodes: a message, a question answered over the
    socket, then buttons the widget renders from the with-buttons frame; clicking one GETs its
    link, the execution goes on, and its next message comes over the same socket."""
    workflow = _open_export(EXPORT_13, chat_deployment, widget_site, page)
    page.locator(".chat-message-from-bot", has_text="Hello from the widget").wait_for()
    box = page.locator('[data-test-id="chat-input"]')
    box.fill("hello")
    box.press("Enter")
    page.locator(".chat-message-from-bot", has_text="What is your name?").wait_for()
    box.fill("Ada")
    box.press("Enter")
    question = page.locator(".chat-message-from-bot", has_text="Shall I remember Ada?")
    question.wait_for()
    buttons = question.locator("button")
    assert [t.strip() for t in buttons.all_inner_texts()] == ["Yes", "No"]
    buttons.first.click()
    page.locator(".chat-message-from-bot", has_text="Remembered Ada.").wait_for()
    bots = [t.strip() for t in page.locator(".chat-message-from-bot").all_inner_texts()]
    assert bots[0] == "Hello from the widget"
    assert bots[1:3] == ["Welcome! This one does not wait.", "What is your name?"]
    assert bots[3].startswith("Shall I remember Ada?")
    assert bots[4] == "Remembered Ada."
    assert [t.strip() for t in question.locator("button").all_inner_texts()] == ["Yes"]
    _the_one_run_succeeds(chat_deployment, workflow)


@pytest.mark.parametrize(
    ("button", "answer"),
    [("Yes", "Done: restart the server."), ("No", "Cancelled, nothing was done.")],
)
def test_n8n_s_approval_export_answers_each_button_in_its_branch_in_the_n8n_chat_widget(
    chat_deployment, widget_site, page, button, answer
):
    """n8n's approval export (Chat node approval -> If -> a Chat node per branch), unchanged
    but for the origin it allows: the widget shows the two buttons, and a click on either ends
    in that branch's message, as on n8n (tests/chat/test_approval_if.py has the frames)."""
    workflow = _open_export(APPROVAL_IF, chat_deployment, widget_site, page)
    box = page.locator('[data-test-id="chat-input"]')
    box.fill("restart the server")
    box.press("Enter")
    question = page.locator(".chat-message-from-bot", has_text="Shall I restart the server?")
    question.wait_for()
    buttons = question.locator("button")
    assert [t.strip() for t in buttons.all_inner_texts()] == ["Yes", "No"]
    buttons.filter(has_text=button).click()
    page.locator(".chat-message-from-bot", has_text=answer).wait_for()
    page.locator(".chat-message-typing").wait_for(state="detached")  # a bot bubble too, empty
    bots = [t.strip() for t in page.locator(".chat-message-from-bot").all_inner_texts()]
    assert bots[-1] == answer and "Done: " not in bots[-2] and "Cancelled" not in bots[-2]
    run = _the_one_run_succeeds(chat_deployment, workflow)
    branch = {"Yes": "Approved", "No": "Declined"}[button]
    other = {"Approved": "Declined", "Declined": "Approved"}[branch]
    run_data = chat_deployment.execution(run)["runData"]
    assert branch in run_data and other not in run_data


def test_the_n8n_chat_widget_shows_the_same_answer_with_tool_step_lines_in_the_stream(
    chat_deployment, widget_site, page
):
    """Our streamToolCalls lines are chunk types @n8n/chat does not know: it skips them."""
    workflow = chat_workflow({"responseMode": "streaming", "allowedOrigins": widget_site})
    node(workflow, "AI Agent")["parameters"]["options"]["streamToolCalls"] = True
    url = chat_url(chat_deployment.base, chat_deployment.activate(workflow))
    page.goto(f"{widget_site}/index.html?webhook={quote(url)}&streaming=true")
    page.locator(".chat-message-from-bot", has_text="Hello from the widget").wait_for()
    box = page.locator('[data-test-id="chat-input"]')
    box.fill("What is 40 + 44?")
    box.press("Enter")
    page.locator(".chat-message-from-bot", has_text=ANSWER_84).wait_for()
    page.locator(".chat-message-typing").wait_for(state="detached")  # the response has ended
    bots = [t.strip() for t in page.locator(".chat-message-from-bot").all_inner_texts()]
    assert bots == ["Hello from the widget", ANSWER_84]
