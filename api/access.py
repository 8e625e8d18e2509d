"""What each role may reach: the one place that says it, for every route under /rest and for the
pages.

Owners and members (and the api key, which stands for the owner) reach everything a route of
theirs allows (some narrow themselves further with `api.rest.auth.require_role`). A chat user
reaches only the Chat Hub: of /rest, the paths under CHAT_USER_PATHS, and of the pages, the hub;
every other REST route answers 403 and the editor's page sends them to the hub. This is stricter
than n8n, whose chat users may still list workflows, credentials and executions.

To open a route to chat users, add its path prefix to CHAT_USER_PATHS (the hub's REST api is
`/rest/chat`). `install` runs the rule before every request, whatever blueprint serves it.
"""

from __future__ import annotations

from flask import Flask, redirect, request

from api.errors import ApiError
from api.rest import auth
from core.users import Role

# Path prefixes under /rest a chat user may reach; each matches itself and what lies below it.
CHAT_USER_PATHS = (
    "/rest/login",  # who am I, sign in (and /rest/login/status)
    "/rest/logout",
    "/rest/me/password",
    "/rest/chat",  # the Chat Hub's REST api and push channel
)
HUB_PATH = "/home/chat"  # n8n's path of the Chat Hub


def allows(role: Role, path: str) -> bool:
    """May `role` reach `path`? (Only what lies under /rest is asked.)"""
    if role is not Role.CHAT_USER:
        return True
    return any(path == prefix or path.startswith(prefix + "/") for prefix in CHAT_USER_PATHS)


def install(app: Flask) -> None:
    app.before_request(_chat_users_stay_in_the_hub)


def _chat_users_stay_in_the_hub():
    path = request.path
    if path == "/rest" or path.startswith("/rest/"):
        # As the route itself will sign it in: only the push channel takes the key as a query.
        found = auth.identify(allow_query=path == "/rest/push")
        if found is not None and not allows(found.role, path):
            raise ApiError(403, "Chat users may use the Chat Hub only.")
        return None
    if path == "/":
        found = auth.identify(navigation=True)
        if found is not None and found.role is Role.CHAT_USER:
            return redirect(HUB_PATH)
    return None
