"""`mini-n8n up` for someone working in the editor: Ctrl-C with an editor tab open stops at once
and says what it waits for; starting again keeps the bundled examples they edited, and says so."""

from __future__ import annotations

import re
import signal

import pytest

from mini_n8n.redis_server import free_port
from tests.test_up import everything, start_up

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
