"""The editor's sign-in: the api key once, then a session cookie, as n8n's editor keeps its login.

| route              | does                                                                    |
|--------------------|-------------------------------------------------------------------------|
| GET  /rest/login   | {"signedIn", "keyRequired"}: always 200, so the page asks without a     |
|                    |   failed request                                                        |
| POST /rest/login   | {"apiKey"} -> 200 {"signedIn": true} and the cookie; a wrong key -> 401 |
| POST /rest/logout  | drops the cookie -> 200 {"signedIn": false}                             |

The cookie is `HttpOnly` (no script reads it) and `SameSite=Strict` (no other site's request
carries it), it counts only on requests from the editor's own origin (`signed_in`), and it holds
no key: `<issued>.<nonce>.<mac>`,
the mac an HMAC-SHA256 keyed with the api key. A new key therefore signs every browser out, and
nothing stored in a browser reveals the key. It lasts SESSION_SECONDS; sign-out removes it from
the browser. Scripts keep sending the key as a header (api/rest/auth.py checks both).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

from flask import Blueprint, Request, Response, jsonify, request

from api.errors import ApiError
from api.runtime import runtime

COOKIE = "mini-n8n-auth"
# A month: a bookmark keeps working across restarts of the server and of the browser.
SESSION_SECONDS = 30 * 24 * 3600
PURPOSE = b"mini-n8n editor session"

bp = Blueprint("signin", __name__, url_prefix="/rest")


def session_value(api_key: str, issued: int | None = None) -> str:
    issued = int(time.time()) if issued is None else issued
    nonce = secrets.token_urlsafe(12)
    return f"{issued}.{nonce}.{_mac(api_key, issued, nonce)}"


def signed_in(req: Request, api_key: str) -> bool:
    """The request carries a session cookie this key signed, and comes from the editor's own
    origin. SameSite=Strict keeps other sites' requests from carrying the cookie, but a page of
    the same site on another port would still send it (cookies know no ports: any local web app
    is "same-site" with localhost:5678); browsers say where a request comes from in
    Sec-Fetch-Site, so only same-origin ones count."""
    return _same_origin(req) and valid_session(req.cookies.get(COOKIE), api_key)


def _same_origin(req: Request) -> bool:
    """Sec-Fetch-Site says "same-origin"; without it (a browser older than 2023, or anything
    that is not a browser), the Origin header must name this server. A cookie alone is no
    proof: it may come from a client that sends neither, on behalf of another page."""
    site = req.headers.get("Sec-Fetch-Site")
    if site is not None:
        return site == "same-origin"
    return req.headers.get("Origin") == req.host_url.rstrip("/")


def valid_session(value: str | None, api_key: str) -> bool:
    """Whether `value` is a cookie this key signed, and not older than SESSION_SECONDS."""
    if not value or not api_key:
        return False
    parts = value.split(".")
    if len(parts) != 3 or not parts[0].isdigit():
        return False
    issued, nonce, mac = int(parts[0]), parts[1], parts[2]
    if not 0 <= time.time() - issued <= SESSION_SECONDS:
        return False
    return hmac.compare_digest(mac, _mac(api_key, issued, nonce))


def _mac(api_key: str, issued: int, nonce: str) -> str:
    message = PURPOSE + f"|{issued}|{nonce}".encode()
    return hmac.new(api_key.encode(), message, hashlib.sha256).hexdigest()


@bp.get("/login")
def status():
    from api.rest.auth import require_key  # here: auth imports this module for the cookie

    try:
        require_key()
        signed_in = True
    except ApiError:
        signed_in = False
    return jsonify({"signedIn": signed_in, "keyRequired": bool(runtime().settings.api_key)})


@bp.post("/login")
def login():
    _from_the_editor()
    expected = runtime().settings.api_key
    body = request.get_json(silent=True)
    given = body.get("apiKey") if isinstance(body, dict) else None
    if not isinstance(given, str) or not given.strip():
        raise ApiError(400, 'Send the api key as {"apiKey": "..."}.')
    if not expected:
        raise ApiError(400, "This server has no api key: the editor needs no sign-in.")
    if not hmac.compare_digest(given.strip().encode(), expected.encode()):
        raise ApiError(401, "That is not this server's api key.")
    response = jsonify({"signedIn": True})
    response.set_cookie(
        COOKIE,
        session_value(expected),
        max_age=SESSION_SECONDS,
        path="/",
        httponly=True,
        samesite="Strict",
        secure=_https(),
    )
    return response


@bp.post("/logout")
def logout() -> Response:
    _from_the_editor()  # or any page of the same site could sign the user out
    response = jsonify({"signedIn": False})
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="Strict", secure=_https())
    return response


def _from_the_editor() -> None:
    if not _same_origin(request):
        raise ApiError(403, "Sign in and out from the editor's own page.")


def _https() -> bool:
    """Behind a TLS proxy the api sees plain http; the proxy's X-Forwarded-Proto says https.
    (Believing it can only make the cookie stricter: a Secure cookie never goes over http.)"""
    forwarded = request.headers.get("X-Forwarded-Proto", "").split(",")[0].strip().lower()
    return request.is_secure or forwarded == "https"
