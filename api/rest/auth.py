"""The api key that guards /rest.

`MINI_N8N_API_KEY` is sent as `Authorization: Bearer <key>` or `X-N8N-API-KEY: <key>` (n8n's
public api header). Without a configured key /rest is refused, unless the api listens on
loopback only, where nobody but this machine's users can reach it; even then only requests
whose `Host` is a loopback name are answered, so a web page cannot reach the api through DNS
rebinding (its requests carry the attacker's host name). Nor can a page on another site
write through it: a keyless request that a browser marks as cross-site (`Sec-Fetch-Site`) or
whose `Origin` is not the api's own is refused, and so is any REST body that is not
`application/json` (which a page can send elsewhere only after a CORS preflight that we never
answer). The editor sends no key: it signs in once and its session cookie stands for the key
(api/rest/signin.py). EventSource cannot send headers, so the push endpoint may take the key as
the `key` query parameter instead.
"""

from __future__ import annotations

import hmac
import ipaddress
import os

from flask import request

from api.errors import ApiError
from api.rest.signin import signed_in
from api.runtime import runtime

LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


def bound_to_loopback() -> bool:
    # `mini-n8n api` binds to HOST (default 0.0.0.0, every interface).
    return os.environ.get("HOST", "0.0.0.0").strip() in LOOPBACK


def loopback_host(host: str) -> bool:
    """Is the request's Host header (name[:port]) a name only this machine answers to?"""
    bracketed = host.startswith("[")  # [::1]:5678
    name = host[1:].split("]", 1)[0] if bracketed else host.rsplit(":", 1)[0]
    name = name.lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def presented_key(allow_query: bool = False) -> str | None:
    header = request.headers.get("Authorization", "")
    if header[:7].lower() == "bearer ":
        return header[7:].strip()
    if "X-N8N-API-KEY" in request.headers:
        return request.headers["X-N8N-API-KEY"]
    if allow_query:
        return request.args.get("key")
    return None


def require_key(allow_query: bool = False) -> None:
    """A before_request hook: returns nothing when the request may go on, raises otherwise."""
    if request.method == "OPTIONS":
        return
    expected = runtime().settings.api_key
    if not expected:
        if bound_to_loopback():
            if loopback_host(request.host):
                refuse_cross_site()
                return
            raise ApiError(
                403,
                "Without an api key the REST api answers only requests to a loopback host name "
                "(localhost, 127.0.0.1, [::1]); set MINI_N8N_API_KEY to use another.",
            )
        raise ApiError(
            403,
            "The REST api is disabled: set MINI_N8N_API_KEY, or bind the api to loopback "
            "(HOST=127.0.0.1) to use it without a key.",
        )
    given = presented_key(allow_query)
    if given is None:
        if signed_in(request, expected):
            return  # the editor, signed in once (api/rest/signin.py)
        raise ApiError(
            401,
            "An api key is required: send it as 'Authorization: Bearer <key>' or 'X-N8N-API-KEY'.",
            headers={"WWW-Authenticate": 'Bearer realm="mini-n8n"'},
        )
    if not hmac.compare_digest(given.encode(), expected.encode()):
        raise ApiError(401, "The api key is not valid.")


def refuse_cross_site() -> None:
    """Keyless requests come from this machine's own tools or the editor it serves: a browser
    says when a page of another site sent one. curl and scripts send neither header."""
    site = request.headers.get("Sec-Fetch-Site", "").lower()
    if site in ("cross-site", "same-site"):
        raise ApiError(403, "Cross-site requests to the REST api are refused.")
    origin = request.headers.get("Origin")
    if origin is not None and origin != request.host_url.rstrip("/"):
        raise ApiError(403, f"Requests from {origin} to the REST api are refused.")
