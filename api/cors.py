"""CORS for a Chat Trigger, from its `allowedOrigins` option (ChatSettings.allowed_origins).

What n8n does and where we differ (DESIGN section 4):
- Headers are only added when the request has an `Origin`; an allowed origin is echoed, never `*`,
  with `Vary: Origin`.
- A preflight (`OPTIONS`) from an allowed origin gets 204 with the path's methods, the requested
  headers echoed and `Access-Control-Max-Age: 300`, as in n8n.
- An origin that is not allowed gets 403 JSON, for the preflight and for the request itself, and
  nothing runs. (n8n answers with the first allowed origin instead, so the browser refuses, but it
  still runs a request a browser sent without preflight, like a multipart form.)
- The page's own origin is always allowed: the hosted chat page posts to itself.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from flask import Request, Response

from api.errors import ApiError

EXPOSED = "X-Execution-Id, X-Session-Id"
MAX_AGE = "300"  # seconds a browser may cache a preflight, as n8n
# scheme://host[:port]; anything else cannot be a CSP source and is left out of frame-ancestors.
ORIGIN = re.compile(r"[a-z][a-z0-9+.-]*://(?:\[[0-9a-f:.]+\]|[a-z0-9.*-]+)(?::\d{1,5})?")


def origin_allowed(origin: str, allowed: list[str], request: Request) -> bool:
    if "*" in allowed or origin.rstrip("/").lower() in allowed:
        return True
    return urlsplit(origin).netloc.lower() == request.host.lower()


def frame_ancestors(allowed: list[str]) -> str:
    """Who may put the hosted chat page in a frame: the page itself and the allowed origins."""
    if "*" in allowed:
        return "*"
    return " ".join(["'self'", *(o for o in allowed if ORIGIN.fullmatch(o))])


def cors_headers(allowed: list[str], request: Request) -> dict[str, str]:
    """Headers for an actual request; ApiError 403 when its origin is not allowed."""
    origin = request.headers.get("Origin")
    if origin is None:
        return {"Vary": "Origin"}
    if not origin_allowed(origin, allowed, request):
        raise ApiError(403, f"Origin {origin} is not allowed", headers={"Vary": "Origin"})
    return {
        "Access-Control-Allow-Origin": origin,
        "Access-Control-Expose-Headers": EXPOSED,
        "Vary": "Origin",
    }


def preflight(allowed: list[str], request: Request, methods: list[str]) -> Response:
    allow = ", ".join(["OPTIONS", *methods])
    headers = {"Allow": allow, **cors_headers(allowed, request)}
    if "Access-Control-Allow-Origin" in headers:
        headers["Access-Control-Allow-Methods"] = allow
        headers["Access-Control-Max-Age"] = MAX_AGE
        requested = request.headers.get("Access-Control-Request-Headers")
        if requested:
            headers["Access-Control-Allow-Headers"] = requested
        headers["Vary"] = "Origin, Access-Control-Request-Headers"
    return Response(status=204, headers=headers)
