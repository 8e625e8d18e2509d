"""One endpoint's HTTP client for model calls: httpx's, with a short way beside it.

Where no proxy is configured in the environment (httpx's `trust_env`), requests go over the
client's own kept-alive connections (models/http.py) with the client's headers and timeout:
httpx's layers (auth and redirect flows, event hooks, a cookie jar, then httpcore's pool and h11)
cost several times the CPU per call (docs/performance.md) for a POST with a bearer key that is
never redirected; n8n's model client keeps no cookies either. With a proxy, httpx's own way,
unchanged, on sockets set up as models/httpcore_backend.py does. Both ways answer and fail
alike: tests/models/test_http_differential.py."""

from __future__ import annotations

import urllib.request
from typing import Any

import httpx

from models import http, httpcore_backend
from models.sockets import Poll

# httpx's, where a proxy is configured: as many connections as the openai SDK allowed, a worker
# streams many answers at once. Idle ones kept for reuse are fewer than its 100: httpcore's
# pool polls every idle connection's socket on each request and each release, which under
# gevent cost more CPU with many idle connections than opening new local ones did; a few keep
# most of the reuse (no TCP and TLS handshake) at about the CPU of no reuse.
LIMITS = httpx.Limits(max_connections=1000, max_keepalive_connections=8)
# The client's own connections are taken without looking at the others: as many kept as the
# openai SDK keeps. With few, a worker answering many chats at once closed and opened
# connections all the time, and a server's full listen queue cost a new one a second.
MAX_IDLE = 100


class ModelClient(httpx.Client):
    """httpx's client; `poll` looks at idle kept connections (models/sockets.py)."""

    def __init__(self, poll: Poll | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        # No delayed-ACK stall on kept connections: the short way's own sockets see to it;
        # this is for httpx's, where a proxy is configured and NO_PROXY names the host.
        httpcore_backend.install(self, poll)
        self._direct: http.Connections | None = None
        if not urllib.request.getproxies():
            self._direct = http.Connections(
                self.headers.raw, self.timeout.read, kwargs["verify"], MAX_IDLE, poll
            )

    def post_stream(self, url: str, content: bytes) -> Any:
        """POST `content`, the response's body still to be read (close it): an httpx.Response,
        or the short way's http.Reply, which has the same parts."""
        if self._direct is None:
            return self.send(self.build_request("POST", url, content=content), stream=True)
        return self._direct.request("POST", url, content)

    def post_now(self, url: str, content: bytes) -> http.Sent | None:
        """POST `content` at once, on the short way's kept connection if one is idle (its
        `reply()` is what post_stream returns); None: post_stream it."""
        if self._direct is None:
            return None
        return self._direct.send("POST", url, content)

    def fetch(self, url: str, timeout: float) -> None:
        """GET `url` and read its answer (a warm start: it opens a kept connection)."""
        if self._direct is None:
            self.get(url, timeout=timeout)
            return
        reply = self._direct.request("GET", url, timeout=timeout)
        try:
            reply.read()
        finally:
            reply.close()

    def close(self) -> None:
        if self._direct is not None:
            self._direct.close()
        super().close()
