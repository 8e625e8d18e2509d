"""The session cookie the editor, REST and the Chat Hub share: `mini-n8n-auth`, HttpOnly (no
script reads it), SameSite=Strict (no other site's request carries it), for SESSION_SECONDS.

It holds one of two things, and never a key or a password:

- a key session, `<issued>.<nonce>.<mac>`: signed in with the api key, the mac an HMAC-SHA256
  keyed with the api key, so a new key signs every such browser out;
- a user session, `user.<token>`: signed in with an email and a password, the token's digest
  kept in Redis (core/user_sessions.py), so sign-out, a new password or the user's removal ends
  it at once, on every api process.

A cookie counts only on requests from this server's own pages (`same_origin`): SameSite=Strict
keeps other sites' requests from carrying it, but a page of the same site on another port would
still send it (cookies know no ports: any local web app is "same-site" with localhost:5678).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

from flask import Request, Response, request

from api.runtime import SESSION_SECONDS

COOKIE = "mini-n8n-auth"
USER_PREFIX = "user."
PURPOSE = b"mini-n8n editor session"

__all__ = ["COOKIE", "SESSION_SECONDS", "session_value", "valid_session", "same_origin"]


def session_value(api_key: str, issued: int | None = None) -> str:
    """A key session's cookie value."""
    issued = int(time.time()) if issued is None else issued
    nonce = secrets.token_urlsafe(12)
    return f"{issued}.{nonce}.{_mac(api_key, issued, nonce)}"


def valid_session(value: str | None, api_key: str) -> bool:
    """Whether `value` is a key session this key signed, and not older than SESSION_SECONDS."""
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


def user_token(req: Request) -> str | None:
    """The token of the request's user session cookie, if it carries one."""
    value = req.cookies.get(COOKIE, "")
    return value[len(USER_PREFIX) :] if value.startswith(USER_PREFIX) else None


def same_origin(req: Request, navigation: bool = False) -> bool:
    """Sec-Fetch-Site says "same-origin" (or, for a page the user opens, "none": typed, a
    bookmark); without it (a browser older than 2023, or anything that is not a browser), the
    Origin header must name this server. A cookie alone is no proof: it may come from a client
    that sends neither, on behalf of another page."""
    site = req.headers.get("Sec-Fetch-Site")
    if site is not None:
        return site == "same-origin" or (navigation and site == "none")
    if navigation and req.method in ("GET", "HEAD"):
        return True  # an old browser's navigation; a page view changes nothing
    return req.headers.get("Origin") == req.host_url.rstrip("/")


def set_cookie(response: Response, value: str) -> None:
    response.set_cookie(
        COOKIE,
        value,
        max_age=SESSION_SECONDS,
        path="/",
        httponly=True,
        samesite="Strict",
        secure=_https(),
    )


def drop_cookie(response: Response) -> None:
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="Strict", secure=_https())


def _https() -> bool:
    """Behind a TLS proxy the api sees plain http; the proxy's X-Forwarded-Proto says https.
    (Believing it can only make the cookie stricter: a Secure cookie never goes over http.)"""
    forwarded = request.headers.get("X-Forwarded-Proto", "").split(",")[0].strip().lower()
    return request.is_secure or forwarded == "https"
