"""The HTTP Request nodes' client of one process: what a runner lends as Services.http
(engine/http_client.py).

One pooled httpx transport (two: one checks certificates, one does not, for n8n's "Ignore SSL
Issues"), so executions reuse kept-alive connections; its sockets are httpcore's (gevent's under
the worker's monkey-patching) behind the egress check of models/egress.py. No httpx.Client:
its cookie jar would carry one workflow's cookies into another's requests, and its redirects
are followed here instead, as n8n's request helper follows them (followSsrfRedirects): at most
`max_redirects`, a 303 (and a POST's 301 or 302) becoming a GET without its body, the
credential's headers dropped on the way to another origin, every hop's host checked against
the credential's Allowed Domains and, when it connects, against the egress rule.

Bounds: every step (connecting, each read) waits at most the request's timeout; an answer over
MINI_N8N_HTTP_MAX_RESPONSE_BYTES, counted after gzip, fails rather than fill the process. The
exchange runs beside the caller (a greenlet under gevent, models/pump.py's `spawn`), which waits
in short slices: a stop ends the wait at once, and under gevent the request with it.
"""

from __future__ import annotations

import queue
import re
import socket
import ssl
import threading
import zlib
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpcore
import httpx

from core.credentials import UrlNotAllowed, check_domains
from engine.errors import ExecutionCanceled
from engine.http_client import HttpFailure, IncomingResponse, OutgoingRequest
from engine.llm import Cancellation
from models.egress import EgressPolicy, GuardedBackend, Resolve
from models.pump import Spawn, spawn_thread

POLL = 0.1  # seconds between looks at the stop flag while a request is under way
REDIRECTS = (301, 302, 303, 307, 308)
ACCEPT_ENCODING = "gzip, deflate"  # what the client can decode (and bound while decoding)
CROSS_ORIGIN_DROPPED = frozenset({"authorization", "proxy-authorization", "cookie"})
MAX_CONNECTIONS = 100  # per transport: requests waiting beyond it wait for the pool's timeout
MAX_IDLE = 20
HEADER_NAME = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
HEADER_VALUE = re.compile(rb"[\t\x20-\x7e\x80-\xff]*")


class HttpRequests:
    def __init__(self, policy: EgressPolicy, max_bytes: int, spawn: Spawn = spawn_thread,
                 tls: Callable[[], ssl.SSLContext] | None = None,
                 resolve: Resolve = socket.getaddrinfo):  # fmt: skip
        self.policy = policy
        self.resolve = resolve  # host names to addresses (a test lends its own)
        self.max_bytes = max_bytes
        self.spawn = spawn
        # The TLS context that checks certificates: the process's shared one (loading CAs
        # takes a while), or one of its own.
        self._tls = tls or httpx.create_ssl_context
        self._transports: dict[bool, httpx.HTTPTransport] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_settings(
        cls, settings: Any, spawn: Spawn = spawn_thread, tls: Any = None
    ) -> HttpRequests:
        return cls(
            EgressPolicy.from_settings(settings), settings.http_max_response_bytes, spawn, tls
        )

    def send(
        self, request: OutgoingRequest, cancel: Cancellation | None = None
    ) -> IncomingResponse:
        if cancel is None:
            return self.exchange(request)
        results: queue.Queue = queue.Queue()

        def run() -> None:
            try:
                results.put((True, self.exchange(request)))
            except BaseException as err:  # noqa: BLE001 - handed to the caller, who raises it
                results.put((False, err))

        interrupt = self.spawn(run)
        answered = False
        try:
            while not cancel.is_set():
                try:
                    ok, value = results.get(timeout=POLL)
                except queue.Empty:
                    continue
                answered = True
                if ok:
                    return value
                raise value
            raise ExecutionCanceled()
        finally:
            if not answered:
                interrupt()  # a greenlet stops in its socket wait; a thread at its timeout

    def exchange(self, request: OutgoingRequest) -> IncomingResponse:
        """The request and the redirects it is told to follow, in this thread."""
        transport = self._transport(request.verify_tls)
        method, url, body = request.method, request.url, request.body
        headers = list(request.headers)
        hops = 0
        while True:
            response = self._one(transport, method, url, headers, body, request.timeout)
            location = response.header("location")
            follows = method in ("GET", "HEAD") or request.redirect_any_method
            if response.status not in REDIRECTS or not location or not follows:
                return response
            if request.max_redirects == 0:
                return response  # the node decides: a 3xx is not a success
            if hops >= request.max_redirects:
                raise HttpFailure(
                    "TOO_MANY_REDIRECTS",
                    f"Maximum number of redirects ({request.max_redirects}) exceeded",
                )
            next_url = _next_url(url, location)
            _check_domains(next_url, request.allowed_domains)
            method, body, headers = _next_hop(request, response.status, method, body, headers,
                                              next_url)  # fmt: skip
            url, hops = next_url, hops + 1

    def _transport(self, verify: bool) -> httpx.HTTPTransport:
        with self._lock:
            transport = self._transports.get(verify)
            if transport is None:
                transport = self._transports[verify] = self._build(verify)
            return transport

    def _build(self, verify: bool) -> httpx.HTTPTransport:
        """A transport whose pool connects through the egress check. Built over httpx's own
        pool attribute (httpx takes no network backend: encode/httpx pull request 3749); if that
        layout ever changes, this refuses to build rather than connect unchecked."""
        context = self._context(verify)
        transport = httpx.HTTPTransport(verify=context, trust_env=False)
        pool = httpcore.ConnectionPool(
            ssl_context=context,
            max_connections=MAX_CONNECTIONS,
            max_keepalive_connections=MAX_IDLE,
            keepalive_expiry=5.0,
            network_backend=GuardedBackend(self.policy, self.resolve),
        )
        if not isinstance(getattr(transport, "_pool", None), httpcore.ConnectionPool):
            raise RuntimeError("httpx's transport has no pool to guard: not sending requests")
        transport._pool = pool
        return transport

    def _context(self, verify: bool) -> ssl.SSLContext:
        if not verify:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            return context
        return self._tls()  # httpx's honours SSL_CERT_FILE / SSL_CERT_DIR

    def _one(self, transport: httpx.HTTPTransport, method: str, url: str,
             headers: list[tuple[str, str]], body: bytes | None, timeout: float) -> IncomingResponse:  # fmt: skip
        if not any(name.lower() == "accept-encoding" for name, _ in headers):
            headers = [*headers, ("Accept-Encoding", ACCEPT_ENCODING)]
        try:
            request = httpx.Request(method, url, headers=_header_bytes(headers), content=body,
                                    extensions={"timeout": httpx.Timeout(timeout).as_dict()})  # fmt: skip
        except (httpx.InvalidURL, ValueError) as err:
            raise HttpFailure("INVALID_URL", f"Invalid URL: {err}") from None
        try:
            response = transport.handle_request(request)
            try:
                content = self._read(response)
            finally:
                response.close()
        except httpx.HTTPError as err:
            raise _failure(err, urlsplit(url).netloc.rpartition("@")[2], timeout) from None
        return IncomingResponse(
            status=response.status_code,
            reason=response.reason_phrase,
            headers=tuple(response.headers.multi_items()),
            body=content,
            url=url,
        )

    def _read(self, response: httpx.Response) -> bytes:
        """The body, decoded, failing as soon as it passes the bound."""
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > self.max_bytes and not _coded(response):
            raise self._too_large()
        decode = _decoder(response.headers.get("content-encoding", ""))
        pieces, size = [], 0
        for raw in response.iter_raw():
            for piece in decode(raw, self.max_bytes - size + 1):
                size += len(piece)
                if size > self.max_bytes:
                    raise self._too_large()
                pieces.append(piece)
        return b"".join(pieces)

    def _too_large(self) -> HttpFailure:
        return HttpFailure(
            "TOO_LARGE",
            f"The response is larger than {self.max_bytes} bytes "
            "(MINI_N8N_HTTP_MAX_RESPONSE_BYTES)",
        )

    def close(self) -> None:
        with self._lock:
            transports, self._transports = list(self._transports.values()), {}
        for transport in transports:
            transport.close()


def _header_bytes(headers: list[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    """Headers as HTTP carries them: a token for a name, Latin-1 text without line breaks for a
    value, as Node.js accepts them; anything else fails as Node.js words it."""
    out = []
    for name, value in headers:
        try:
            raw = (name.encode("ascii"), value.encode("latin-1"))
        except UnicodeEncodeError:
            raw = (b"", b"\n")
        if not HEADER_NAME.fullmatch(raw[0]) or not HEADER_VALUE.fullmatch(raw[1]):
            raise HttpFailure("ERR_INVALID_CHAR", f'Invalid character in header content ["{name}"]')
        out.append(raw)
    return out


def _coded(response: httpx.Response) -> bool:
    return response.headers.get("content-encoding", "").strip().lower() not in ("", "identity")


def _decoder(encoding: str) -> Any:
    """A function (data, most) -> pieces that inflates gzip or deflate without ever making more
    than `most` bytes at once (a small compressed body can stand for gigabytes); any other
    coding is passed on as it came."""
    encoding = encoding.strip().lower()
    if encoding in ("gzip", "x-gzip", "deflate"):
        return _Inflate().feed
    return lambda data, most: iter((data,))


class _Inflate:
    """gzip or zlib (told by their headers), or raw deflate as some servers send it."""

    def __init__(self) -> None:
        self._inflate = zlib.decompressobj(zlib.MAX_WBITS | 32)
        self._started = False

    def feed(self, data: bytes, most: int) -> Iterator[bytes]:
        while data:
            try:
                out = self._inflate.decompress(data, max(most, 1))
            except zlib.error:
                if self._started:
                    raise httpx.DecodingError("the body could not be decompressed") from None
                self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)
                self._started = True
                continue
            self._started = True
            yield out
            data = self._inflate.unconsumed_tail
            if len(out) >= most:
                return


def _next_url(url: str, location: str) -> str:
    try:
        next_url = urljoin(url, location)
        scheme = urlsplit(next_url).scheme
    except ValueError:
        scheme = ""
    if scheme not in ("http", "https"):
        raise HttpFailure("INVALID_URL", "Invalid redirect location received from server")
    return next_url


def _check_domains(url: str, allowed_domains: str | None) -> None:
    if allowed_domains is None:
        return
    try:
        check_domains(url, allowed_domains)
    except UrlNotAllowed as err:
        raise HttpFailure("DOMAIN_NOT_ALLOWED", str(err)) from None


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    default = {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), parts.port or default


def _next_hop(request: OutgoingRequest, status: int, method: str, body: bytes | None,
              headers: list[tuple[str, str]], next_url: str
              ) -> tuple[str, bytes | None, list[tuple[str, str]]]:  # fmt: skip
    """The method, body and headers of the request to `next_url` (n8n's buildRedirectHopConfig:
    compared with the first request's origin)."""
    downgrade = (status == 303 and method not in ("GET", "HEAD")) or (
        status in (301, 302) and method == "POST"
    )
    strip = _origin(request.url) != _origin(next_url) and not request.credentials_cross_origin
    dropped = CROSS_ORIGIN_DROPPED | request.credential_headers if strip else frozenset()

    def kept(name: str) -> bool:
        lower = name.lower()
        return (
            lower != "host"
            and lower not in dropped
            and not (downgrade and lower.startswith("content-"))
        )

    headers = [(name, value) for name, value in headers if kept(name)]
    return ("GET", None, headers) if downgrade else (method, body, headers)


def _failure(err: httpx.HTTPError, host: str, timeout: float) -> HttpFailure:
    text = str(err)
    if isinstance(err, httpx.TimeoutException):
        return HttpFailure("ECONNABORTED", f"timeout of {int(timeout * 1000)}ms exceeded")
    if isinstance(err, httpx.ConnectError):
        if "CERTIFICATE" in text.upper() or "SSL" in text.upper():
            return HttpFailure("ETLS", f"The TLS connection to {host} failed: {text}")
        if "refused" in text.lower():
            return HttpFailure("ECONNREFUSED", f"connect ECONNREFUSED {host}")
        if "unreachable" in text.lower():
            return HttpFailure("EHOSTUNREACH", f"connect EHOSTUNREACH {host}")
        return HttpFailure("ECONNRESET", f"connect to {host} failed: {text}")
    if isinstance(err, httpx.DecodingError):
        return HttpFailure("EPROTO", f"the answer from {host} could not be decoded: {text}")
    return HttpFailure("ECONNRESET", f"socket hang up ({host})")
