"""Webhook authentication for the Chat Trigger's `authentication` parameter, as n8n answers it:

- `none`: nothing to check.
- `basicAuth`: the node's `httpBasicAuth` credential (`user`, `password`) from the deployment's
  credentials file. No or malformed `Authorization` header -> 401, wrong user or password -> 403,
  both with `WWW-Authenticate: Basic realm="Webhook"`; no usable credential -> 500.
- `n8nUserAuth`: a person signed in to this server (api/rest/signin.py), any role, by the
  session cookie: none -> 401 "User not authenticated!", one that stands for nobody (signed out,
  expired, the user removed) -> 401 "Invalid authentication token", as n8n answers. The hosted
  page itself sends a signed-out browser to sign in and back (api/chat_trigger.py). Who it was
  goes into the trigger's output as n8n's hosted page puts it there, `metadata.user` ({id,
  firstName, lastName, email}), but written here from the session, never taken from the body.

Messages never name a user or a password, and the credential is never logged.
"""

from __future__ import annotations

import hmac
import logging

from flask import Request

from api.errors import ApiError
from core.credentials import CredentialError
from core.users import User

log = logging.getLogger("mini_n8n.auth")

CHALLENGE = {"WWW-Authenticate": 'Basic realm="Webhook"'}
NO_CREDENTIAL = "No authentication data defined on node!"


def check_webhook_auth(rt, node, method: str, request: Request) -> User | None:
    """Nothing when the request may go on (the signed-in user for n8nUserAuth), raises
    otherwise."""
    if method in ("none", "", None):
        return None
    if method == "basicAuth":
        _basic_auth(rt, node, request)
        return None
    if method == "n8nUserAuth":
        return signed_in_user(request)
    raise ApiError(500, f'Unknown authentication "{method}"')


def signed_in_user(request: Request, navigation: bool = False) -> User:
    """The person the request's session cookie stands for, or 401 as n8n says it."""
    # Imported here: the api.rest package imports its routes, and one of them imports this.
    from api.rest import auth, cookie

    user = auth.session_user(navigation)
    if user is not None:
        return user
    if cookie.user_token(request) is None:
        raise ApiError(401, "User not authenticated!")
    raise ApiError(401, "Invalid authentication token")


def _basic_auth(rt, node, request: Request) -> None:
    expected_user, expected_password = _expected(rt, node)
    given = request.authorization
    if given is None or given.type != "basic" or given.username is None:
        raise ApiError(401, "Authorization is required!", headers=CHALLENGE)
    # Both comparisons always run, in constant time, so timing tells nothing about which failed.
    user_ok = hmac.compare_digest(given.username.encode(), expected_user.encode())
    password_ok = hmac.compare_digest((given.password or "").encode(), expected_password.encode())
    if not (user_ok and password_ok):
        raise ApiError(403, "Authorization data is wrong!", headers=CHALLENGE)


def _expected(rt, node) -> tuple[str, str]:
    try:
        credential = rt.credentials.resolve("httpBasicAuth", node.credentials.get("httpBasicAuth"))
    except CredentialError as err:  # names the credential and the file, never a secret
        log.error("chat trigger %r: %s", node.name, err)
        raise ApiError(500, NO_CREDENTIAL) from None
    user, password = credential.get("user"), credential.get("password")
    if not isinstance(user, str) or not isinstance(password, str) or not user or not password:
        log.error(
            "chat trigger %r: its httpBasicAuth credential has no user or password", node.name
        )
        raise ApiError(500, NO_CREDENTIAL)
    return user, password
