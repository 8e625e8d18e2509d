"""The page tests' Chromium does not see this machine's network change (tests/browser_network.py):
links that come and go while it loads fail none of its requests."""

from __future__ import annotations

import http.server
import subprocess
import threading
import uuid

import pytest

from tests import browser_network
from tests.waiting import wait_until

CHANGES = 50  # links added and removed while the page fetches, each after a fresh request


class _Counting(http.server.BaseHTTPRequestHandler):
    """Answers every GET with a small page and closes the connection (HTTP/1.0), so each fetch
    opens a connection of its own: what a network change fails."""

    seen = 0  # the page's fetches (not the page itself, nor its icon)

    def do_GET(self):
        if self.path.startswith("/?n="):
            type(self).seen += 1
        body = b"<!doctype html><title>probe</title>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Counting)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def _change_a_link(name: str, number: int) -> None:
    """A veth pair (this kernel has no dummy links) with a documentation-range address (RFC
    5737), up, then gone: links and an address that come and go as a faultlab host's or a
    container's do. Nothing is sent on it."""
    for argv in (
        ["ip", "link", "add", name, "type", "veth", "peer", "name", f"{name}p"],
        ["ip", "addr", "add", f"192.0.2.{number + 1}/32", "dev", name],
        ["ip", "link", "set", f"{name}p", "up"],
        ["ip", "link", "set", name, "up"],
        ["ip", "link", "del", name],
    ):
        subprocess.run(argv, check=True, capture_output=True)


def test_links_that_come_and_go_fail_none_of_the_pages_requests(browser, server):
    if not browser_network.possible():
        pytest.skip("only root can change this machine's links (and give Chromium a network)")
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{server}/")
    page.evaluate(
        """() => {
        window.failures = [];
        window.fetches = 0;
        window.fetched = (async () => {
          while (!window.enough) {
            window.fetches += 1;
            try { await (await fetch(`/?n=${window.fetches}`, { cache: 'no-store' })).text(); }
            catch (err) { window.failures.push(String(err)); }
          }
          return window.failures;
        })();
      }"""
    )
    name = f"mnbr{uuid.uuid4().hex[:6]}d"
    for number in range(CHANGES):
        seen = _Counting.seen
        wait_until(lambda seen=seen: _Counting.seen > seen, 30, "the page's next fetch")
        _change_a_link(name, number)
    page.evaluate("() => { window.enough = true; }")
    assert page.evaluate("() => window.fetched") == []
    assert _Counting.seen == page.evaluate("() => window.fetches")  # every one reached it
    context.close()
