"""Who is asking the Chat Hub, and what they may do: the one module that knows.

Every view of the hub (api/hub/) asks `require_hub_user()` (its blueprint's before_request) and
then `current_user()`; whether a user may chat with a workflow agent is `may_use_workflow_agent`.
Nothing else in the hub reads a cookie, a key or a role.

The hub's user is the signed-in person (api/rest/auth.py, with its CSRF rules), their role
n8n's; the api key, one of its sessions or keyless loopback stand for the owner, with a fixed id.

A test (or a deployment with its own sign-in) replaces how a request is recognised with `use`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flask import Flask, current_app, g

from api.errors import ApiError
from api.rest import auth
from core.users import Role, User

ROLES = ("owner", "member", "chat")


@dataclass(frozen=True)
class HubUser:
    id: str
    email: str
    first_name: str
    role: str  # owner | member | chat (n8n's global:owner, global:member, global:chatUser)


# The editor's one sign-in, until there are accounts.
OWNER = HubUser(id="owner", email="owner@localhost", first_name="Owner", role="owner")

Resolver = Callable[[], HubUser]
_RESOLVER = "mini_n8n_hub_identity"


def use(app: Flask, resolver: Resolver) -> None:
    """Recognise the hub's users with `resolver` (it returns the user, or raises ApiError)."""
    app.extensions[_RESOLVER] = resolver


def require_hub_user() -> None:
    """A before_request hook: the request's user in `g.hub_user`, or 401/403."""
    resolver: Resolver = current_app.extensions.get(_RESOLVER, _signed_in)
    user = resolver()
    if user.role not in ROLES:
        raise ApiError(403, "This account may not use the Chat Hub.")
    g.hub_user = user


def current_user() -> HubUser:
    if "hub_user" not in g:
        require_hub_user()
    user: HubUser = g.hub_user
    return user


def may_use_workflow_agent(user: HubUser, workflow: dict[str, Any]) -> bool:
    """Owners and members chat with every workflow agent; a chat user with those the owner
    shared: the workflow's `settings.chatHubShare`, "all" or a list of emails (ours: n8n
    shares through projects)."""
    if user.role in ("owner", "member"):
        return True
    share = (workflow.get("settings") or {}).get("chatHubShare")
    if share == "all":
        return True
    return isinstance(share, list) and user.email.lower() in {str(e).lower() for e in share}


def may_read_all(user: HubUser) -> bool:
    """Whether the user may list every user's conversations (`mini-n8n chats --all`)."""
    return user.role == "owner"


_ROLES = {Role.OWNER: "owner", Role.MEMBER: "member", Role.CHAT_USER: "chat"}


def hub_user(user: User) -> HubUser:
    return HubUser(id=user.id, email=user.email, first_name=user.first_name,
                   role=_ROLES[user.role])  # fmt: skip


def _signed_in() -> HubUser:
    auth.require_signed_in()  # the sign-in rules, CSRF included: 401/403 when they refuse
    user = auth.principal().user
    return OWNER if user is None else hub_user(user)
