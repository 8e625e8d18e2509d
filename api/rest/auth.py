"""Who sent a request to /rest, and whether it may go on.

A request is signed in (a `Principal`) by, in this order:

1. the api key `MINI_N8N_API_KEY`, sent as `Authorization: Bearer <key>` or `X-N8N-API-KEY:
   <key>` (n8n's public api header): the machine credential of scripts, the CLI and compose;
2. a user session cookie (api/rest/cookie.py): a person, with a role (core/users.py);
3. a key session cookie: the editor signed in once with the key;
4. nothing, when no key is configured and the api listens on loopback only, where nobody but
   this machine's users can reach it; even then only requests whose `Host` is a loopback name
   are answered, so a web page cannot reach the api through DNS rebinding (its requests carry
   the attacker's host name). Nor can a page on another site write through it: a keyless
   request that a browser marks as cross-site (`Sec-Fetch-Site`) or whose `Origin` is not the
   api's own is refused, and so is any REST body that is not `application/json` (which a page
   can send elsewhere only after a CORS preflight that we never answer).

The key and its sessions stand for the owner. What a role may reach is decided in one place,
api/access.py, for every route under /rest; `require_role` narrows a route to some roles.
EventSource cannot send headers, so the push endpoint may take the key as the `key` query
parameter instead.

For a route of another blueprint (the Chat Hub's): `bp.before_request(auth.require_signed_in)`,
then `auth.current_user()` in the view for the signed-in person (401 for the key alone).
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import Any, TypeVar

from flask import g, request

from api.errors import ApiError
from api.rest import cookie
from api.runtime import runtime
from core.users import Role, User

LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Principal:
    """Who is signed in: a user, or (None) the api key, one of its sessions, or keyless
    loopback; those stand for the owner."""

    user: User | None

    @property
    def role(self) -> Role:
        return self.user.role if self.user is not None else Role.OWNER


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


def session_user(navigation: bool = False) -> User | None:
    """The person the request's user session cookie stands for, if it has a valid one and comes
    from this server's own pages (`navigation`: a page the user opens, cookie.same_origin)."""
    token = cookie.user_token(request)
    if not token or not cookie.same_origin(request, navigation):
        return None
    cache = g.setdefault("session_users", {})
    if token not in cache:
        cache[token] = runtime().user_sessions.user(token)
    return cache[token]


def identify(allow_query: bool = False, navigation: bool = False) -> Principal | None:
    """Who sent the request (the order in the module's docstring), or None."""
    expected = runtime().settings.api_key
    given = presented_key(allow_query)
    if given is not None and expected:  # without a configured key, a header means nothing
        return Principal(None) if hmac.compare_digest(given.encode(), expected.encode()) else None
    user = session_user(navigation)
    if user is not None:
        return Principal(user)
    if expected:
        value = request.cookies.get(cookie.COOKIE)
        if cookie.same_origin(request, navigation) and cookie.valid_session(value, expected):
            return Principal(None)
        return None
    if bound_to_loopback() and loopback_host(request.host) and not _cross_site():
        return Principal(None)
    return None


def require_signed_in(allow_query: bool = False) -> None:
    """A before_request hook: returns nothing when the request is signed in (its Principal in
    `g.principal`), raises the reason otherwise."""
    if request.method == "OPTIONS":
        return
    found = identify(allow_query)
    if found is not None:
        g.principal = found
        return
    raise _refusal(allow_query)


require_key = require_signed_in  # the name the push channel and older callers use


def principal() -> Principal:
    """The request's Principal (signs it in first if no hook did)."""
    if "principal" not in g:
        require_signed_in()
    return g.principal


def current_user() -> User:
    """The signed-in person; 401 when the request is signed in with the api key alone."""
    user = principal().user
    if user is None:
        raise ApiError(401, "Sign in as a user: the api key stands for no one.")
    return user


def require_role(*roles: Role) -> Callable[[F], F]:
    """A view decorator: 403 unless the signed-in role is one of `roles`."""

    def decorate(view: F) -> F:
        @wraps(view)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            if principal().role not in roles:
                raise ApiError(403, "You are not allowed to do this.")
            return view(*args, **kwargs)

        return guarded  # type: ignore[return-value]

    return decorate


def _refusal(allow_query: bool) -> ApiError:
    if runtime().settings.api_key:
        if presented_key(allow_query) is not None:
            return ApiError(401, "The api key is not valid.")
        return ApiError(
            401,
            "An api key is required: send it as 'Authorization: Bearer <key>' or 'X-N8N-API-KEY'.",
            headers={"WWW-Authenticate": 'Bearer realm="mini-n8n"'},
        )
    if bound_to_loopback():
        if loopback_host(request.host):
            refuse_cross_site()
        return ApiError(
            403,
            "Without an api key the REST api answers only requests to a loopback host name "
            "(localhost, 127.0.0.1, [::1]); set MINI_N8N_API_KEY to use another.",
        )
    return ApiError(
        403,
        "The REST api is disabled without a sign-in: sign in as a user, set MINI_N8N_API_KEY, "
        "or bind the api to loopback (HOST=127.0.0.1) to use it without a key.",
    )


def _cross_site() -> bool:
    try:
        refuse_cross_site()
    except ApiError:
        return True
    return False


def refuse_cross_site() -> None:
    """Keyless requests come from this machine's own tools or the editor it serves: a browser
    says when a page of another site sent one. curl and scripts send neither header."""
    site = request.headers.get("Sec-Fetch-Site", "").lower()
    if site in ("cross-site", "same-site"):
        raise ApiError(403, "Cross-site requests to the REST api are refused.")
    origin = request.headers.get("Origin")
    if origin is not None and origin != request.host_url.rstrip("/"):
        raise ApiError(403, f"Requests from {origin} to the REST api are refused.")
