"""What a node that makes HTTP requests (HTTP Request, the HTTP Request Tool) expects from the
client its runner lends as Services.http.

The engine does no I/O: a node builds an OutgoingRequest (method, URL with its query, headers,
body bytes, its timeout and redirect rules) and hands it to the client, which sends it, follows
redirects as told, reads the answer under the deployment's bounds and returns an
IncomingResponse. Whatever keeps it from answering is an HttpFailure with a `code` as Node.js
names network errors (ECONNREFUSED, ETIMEDOUT...), so the node can word it as n8n does. The
client lives in models/http_requests.py; where it may connect is its own rule (models/egress.py),
not the node's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from engine.llm import Cancellation

MAX_REDIRECTS = 21  # n8n's (and the follow-redirects library's) default


@dataclass(frozen=True)
class OutgoingRequest:
    method: str
    url: str  # absolute http(s) URL, query included
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes | None = None
    timeout: float = 300.0  # seconds each step (connecting, each read) may wait
    # Redirects followed at most (0: a 3xx is the answer). For a method other than GET and
    # HEAD, only when `redirect_any_method` (n8n's followAllRedirects).
    max_redirects: int = MAX_REDIRECTS
    redirect_any_method: bool = True
    # Lower-case names of the headers that carry a credential: dropped on a redirect to another
    # origin unless `credentials_cross_origin` (n8n's sendCredentialsOnCrossOriginRedirect).
    credential_headers: frozenset[str] = field(default_factory=frozenset)
    credentials_cross_origin: bool = False
    # A credential's Allowed Domains (core/credentials.py domain_allowed): every hop's host must
    # match. None: no credential restriction.
    allowed_domains: str | None = None
    verify_tls: bool = True  # False: n8n's "Ignore SSL Issues"


@dataclass(frozen=True)
class IncomingResponse:
    status: int
    reason: str
    headers: tuple[tuple[str, str], ...]  # names in lower case, in the order received
    body: bytes  # decoded (gzip, deflate), at most the client's bound
    url: str  # where the answer came from, after redirects

    def header(self, name: str) -> str | None:
        """The first value of header `name` (any case), or None."""
        wanted = name.lower()
        return next((value for key, value in self.headers if key == wanted), None)

    def headers_json(self) -> dict[str, str | list[str]]:
        """The headers as n8n's full response shows them: lower-case names, a repeated one
        (set-cookie) as a list."""
        out: dict[str, str | list[str]] = {}
        for key, value in self.headers:
            if key not in out:
                out[key] = value
                continue
            earlier = out[key]
            out[key] = [*earlier, value] if isinstance(earlier, list) else [earlier, value]
        return out


class HttpFailure(Exception):
    """The request got no answer: `code` names why as Node.js would (ECONNREFUSED, ENOTFOUND,
    ETIMEDOUT, ECONNRESET, EPROTO), or one of ours: SSRF_BLOCKED (the address is not one this
    deployment may reach), DOMAIN_NOT_ALLOWED (a redirect left the credential's domains),
    TOO_LARGE (the answer is over the client's bound), TOO_MANY_REDIRECTS, INVALID_URL. The
    message names a host at most: never a header, a body or a query."""

    def __init__(self, code: str, message: str, description: str = ""):
        super().__init__(message)
        self.code = code
        self.message = message
        self.description = description


class HttpClient(Protocol):
    def send(
        self, request: OutgoingRequest, cancel: Cancellation | None = None
    ) -> IncomingResponse:
        """Send `request` and read its answer, whatever its status. Raises HttpFailure when
        there is none, engine.errors.ExecutionCanceled when `cancel` is set meanwhile."""
        ...
