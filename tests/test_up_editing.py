"""`mini-n8n up` for someone working in the editor: Ctrl-C with an editor tab open stops at once
and says what it waits for; starting again keeps the bundled examples they edited, and says so."""

from __future__ import annotations

import json
import re
import signal

import httpx
import pytest

from mini_n8n.redis_server import free_port
from mini_n8n.up import BUNDLED_WORKFLOWS
from tests.test_up import everything, start_up, stop_up

expect = pytest.importorskip("playwright.sync_api").expect


def editor_link(up) -> str:
    link = re.search(r"Editor:\s+(\S+)", everything(up))[1]
    return link.replace("localhost", "127.0.0.1")


def test_ctrl_c_with_an_editor_tab_open_stops_without_waiting_out_the_graceful_timeout(
    tmp_path, browser
):
    port = free_port()
    up = start_up(tmp_path, port)
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(editor_link(up))
        expect(page.locator("#push-state")).to_have_attribute("data-state", "up")
        up.proc.send_signal(signal.SIGINT)
        # The wait's own timeout only keeps a failure from hanging the test.
        assert up.proc.wait(60) == 0
        output = everything(up)
        assert re.search(
            r"mini-n8n: stopping the api \(pid \d+\) and the worker \(pid \d+\)\.\.\.", output
        )
        assert "stopping: ended 1 editor push stream and 0 chat sockets" in output
        assert "graceful timeout" not in output  # gunicorn's "Worker graceful timeout (pid:…)"
        assert "killing it" not in output
    finally:
        context.close()
        up.stop(signal.SIGKILL)


def test_an_example_edited_in_the_editor_is_kept_at_the_next_start_and_up_says_so(tmp_path):
    port = free_port()
    up = start_up(tmp_path, port)
    try:
        key = json.loads((tmp_path / ".mini-n8n" / "state.json").read_text())["api_key"]
        rest = f"http://127.0.0.1:{port}/rest/workflows"
        auth = {"X-N8N-API-KEY": key}
        assert 'imported "Calculator chat (Redis memory)" as calcChatRedis01' in everything(up)
        workflow = httpx.get(f"{rest}/calcChatRedis01", headers=auth).json()
        workflow["name"] = "My calculator"  # a save as the editor makes it, with its versionId
        saved = httpx.put(f"{rest}/calcChatRedis01", json=workflow, headers=auth)
        assert saved.status_code == 200, saved.text
        stop_up(up)

        up = start_up(tmp_path, port)
        again = everything(up)
        example = BUNDLED_WORKFLOWS / "chat-calculator-redis.json"
        assert (
            '  kept "Calculator chat (Redis memory)" (calcChatRedis01) as it was changed after its '
            f"import; `mini-n8n import {example}` imports the file over it\n"
        ) in again
        assert '  unchanged: "Calculator chat (Simple Memory)" (calcChatSimple01)\n' in again
        kept = httpx.get(f"{rest}/calcChatRedis01", headers=auth).json()
        assert kept["name"] == "My calculator" and kept["versionId"] == saved.json()["versionId"]
        assert 'Chat "My calculator": http://localhost:' in again  # still active, as it was
        stop_up(up)
    finally:
        up.stop(signal.SIGKILL)
