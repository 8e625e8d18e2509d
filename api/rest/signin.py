"""Signing in and out: with an email and a password (n8n's routes and fields), or with the api
key (the editor's first way in, kept); either way the session cookie of api/rest/cookie.py.

| route                  | does                                                               |
|------------------------|--------------------------------------------------------------------|
| GET  /rest/login       | who am I: {"data": the user (n8n's PublicUser fields), or null for |
|                        |   the api key} with "signedIn" and "keyRequired"; 401 when signed  |
|                        |   out                                                              |
| GET  /rest/login/status | {"signedIn", "keyRequired", "user"}: always 200, so a page asks   |
|                        |   without a failed request                                         |
| POST /rest/login       | {"emailOrLdapLoginId", "password"} -> {"data": the user} and the   |
|                        |   cookie; a wrong pair -> 401, too many -> 429 (below). Or         |
|                        |   {"apiKey"} -> {"signedIn": true} and the cookie; wrong -> 401    |
| POST /rest/logout      | ends the session, drops the cookie -> {"data": {"loggedOut": true}} |

Failed sign-ins are slowed per account and per address (core/signin_throttle.py): past the free
ones, a try during the wait gets 429 with Retry-After and its password is not even checked. A
password is never logged, answered or named in an error, and what the server keeps of it is its
argon2 hash (core/passwords.py). Sign-in and sign-out are taken only from this server's own pages
(cookie.same_origin), and their bodies must be JSON, as every REST body.
"""

from __future__ import annotations

import hmac

from flask import Blueprint, Response, jsonify, request

from api import bodies
from api.errors import ApiError
from api.rest import auth, cookie
from api.runtime import runtime
from core import passwords
from core.signin_throttle import ACCOUNT, ADDRESS, Subject
from core.users import User, UserError, normalize_email

bp = Blueprint("signin", __name__, url_prefix="/rest")
WRONG_PASSWORD = "Wrong username or password. Do you have caps lock on?"  # n8n's words
MAX_PASSWORD = 1024  # far past n8n's 64 for a new one; the hash reads all of it


@bp.before_request
def _json_bodies_only() -> None:
    bodies.require_json(request)


@bp.get("/login")
def who_am_i() -> Response:
    found = auth.identify()
    if found is None:
        raise ApiError(401, "Unauthorized")
    user = found.user.public() if found.user is not None else None
    return jsonify({"data": user, "signedIn": True, "keyRequired": _key_required()})


@bp.get("/login/status")
def status() -> Response:
    found = auth.identify()
    user = found.user.public() if found is not None and found.user is not None else None
    return jsonify({"signedIn": found is not None, "keyRequired": _key_required(), "user": user})


@bp.post("/login")
def login() -> Response:
    _from_our_pages()
    body = bodies.json_object(request)
    if "emailOrLdapLoginId" in body or "password" in body:
        return _user_login(body)
    return _key_login(body)


@bp.post("/logout")
def logout() -> Response:
    _from_our_pages()  # or any page of the same site could sign the user out
    token = cookie.user_token(request)
    if token:
        runtime().user_sessions.close(token)
    response = jsonify({"data": {"loggedOut": True}, "signedIn": False})
    cookie.drop_cookie(response)
    return response


def _user_login(body: dict) -> Response:
    email, password = body.get("emailOrLdapLoginId"), body.get("password")
    if not isinstance(email, str) or not isinstance(password, str) or not password:
        raise ApiError(400, 'Send {"emailOrLdapLoginId": "...", "password": "..."}.')
    try:
        email = normalize_email(email)
    except UserError as err:
        raise ApiError(400, str(err)) from None
    rt = runtime()
    subjects = [Subject(ACCOUNT, email), Subject(ADDRESS, request.remote_addr or "unknown")]
    wait = rt.signin_throttle.retry_after(subjects)
    if wait:
        raise ApiError(
            429,
            f"Too many failed sign-ins: try again in {wait} seconds.",
            headers={"Retry-After": str(wait)},
        )
    user = rt.users.by_email(email)
    stored = user.password_hash if user is not None else None
    if len(password) > MAX_PASSWORD or not passwords.verify(stored, password):
        rt.signin_throttle.failed(subjects)
        raise ApiError(401, WRONG_PASSWORD)
    assert user is not None  # verify() is False without a stored hash
    rt.signin_throttle.succeeded(subjects[0])
    if passwords.needs_rehash(user.password_hash):
        user = rt.users.rehash(user, password)
    return signed_in_as(user, jsonify({"data": user.public()}))


def signed_in_as(user: User, response: Response) -> Response:
    """`response` with a new session of `user` in its cookie."""
    token = runtime().user_sessions.open(user)
    cookie.set_cookie(response, cookie.USER_PREFIX + token)
    return response


def _key_login(body: dict) -> Response:
    expected = runtime().settings.api_key
    given = body.get("apiKey")
    if not isinstance(given, str) or not given.strip():
        raise ApiError(
            400,
            'Send {"emailOrLdapLoginId": "...", "password": "..."}, '
            'or the api key as {"apiKey": "..."}.',
        )
    if not expected:
        raise ApiError(400, "This server has no api key: the editor needs no sign-in.")
    if not hmac.compare_digest(given.strip().encode(), expected.encode()):
        raise ApiError(401, "That is not this server's api key.")
    response = jsonify({"signedIn": True})
    cookie.set_cookie(response, cookie.session_value(expected))
    return response


def _key_required() -> bool:
    return bool(runtime().settings.api_key)


def _from_our_pages() -> None:
    if not cookie.same_origin(request):
        raise ApiError(403, "Sign in and out from this server's own pages.")
