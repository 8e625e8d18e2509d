"""The api as gunicorn runs it, with the hub's users recognised by a test header (`X-Test-User:
<email>`) beside the editor's sign-in (the owner): a second and third user for the tests of
who may see what, until people have accounts (api/hub_identity.py `use` is the seam a sign-in
plugs into). Only the test suite imports this module."""

from __future__ import annotations

from flask import request

import engine.nodes  # noqa: F401  (as api/wsgi.py: the nodes before the first request)
from api import hub_identity
from api.app import create_app
from api.errors import ApiError
from api.hub_identity import OWNER, HubUser
from api.rest.auth import require_key

USERS = {
    "ada@example.com": HubUser("user-ada", "ada@example.com", "Ada", "chat"),
    "bob@example.com": HubUser("user-bob", "bob@example.com", "Bob", "member"),
}
HEADER = "X-Test-User"


def _user() -> HubUser:
    email = request.headers.get(HEADER)
    if email is None:
        require_key()
        return OWNER
    found = USERS.get(email)
    if found is None:
        raise ApiError(401, "Sign in first.")
    return found


app = create_app()
hub_identity.use(app, _user)
