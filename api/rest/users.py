"""People: the owner adds, lists and removes users; everyone signed in as a user changes their
own password. n8n's routes and fields where n8n has the route; n8n invites by email, mini-n8n
sends no mail, so the owner creates a user with a password instead (`POST /rest/users`).

| route                            | who        | does                                         |
|----------------------------------|------------|----------------------------------------------|
| GET    /rest/users               | owner,     | {"data": {"count", "items": [users]}}, by    |
|                                  |   member   |   email (n8n's page shape)                   |
| POST   /rest/users               | owner      | {email, password, role, firstName?,          |
|                                  |            |   lastName?} -> 201 {"data": the user}       |
| DELETE /rest/users/<id>          | owner      | remove (not oneself) -> {"data":             |
|                                  |            |   {"success": true}}; their browsers are out |
| PATCH  /rest/users/<id>/role     | owner      | {"newRoleName"} -> {"data": {"success"}}     |
| PATCH  /rest/me/password         | any user   | {"currentPassword", "newPassword"} ->        |
|                                  |            |   {"data": {"success": true}}; other         |
|                                  |            |   browsers signed out, this one kept in      |

The api key stands for the owner. A user is n8n's PublicUser fields (core/users.py `public`),
never the password's hash. Roles are n8n's names: global:owner, global:member, global:chatUser.
"""

from __future__ import annotations

from flask import Response, jsonify, request

from api import bodies
from api.errors import ApiError
from api.rest import auth, bp
from api.rest.signin import signed_in_as
from api.runtime import runtime
from core import passwords
from core.users import Role, User, UserError, UserExists, UserNotFound

OWNER = Role.OWNER


@bp.get("/users")
@auth.require_role(Role.OWNER, Role.MEMBER)
def list_users() -> Response:
    users = runtime().users.list()
    return jsonify({"data": {"count": len(users), "items": [u.public() for u in users]}})


@bp.post("/users")
@auth.require_role(OWNER)
def add_user():
    body = bodies.json_object(request)
    try:
        user = runtime().users.add(
            body.get("email"),
            body.get("password"),
            body.get("role", Role.MEMBER.value),
            body.get("firstName"),
            body.get("lastName"),
        )
    except UserExists as err:
        raise ApiError(409, str(err)) from None
    except UserError as err:
        raise ApiError(400, str(err)) from None
    return jsonify({"data": user.public()}), 201


@bp.delete("/users/<user_id>")
@auth.require_role(OWNER)
def remove_user(user_id: str) -> Response:
    user = _user(user_id)
    me = auth.principal().user
    if me is not None and me.id == user.id:
        raise ApiError(400, "Cannot delete your own user")  # n8n's words
    runtime().users.remove(user)
    return jsonify({"data": {"success": True}})


@bp.patch("/users/<user_id>/role")
@auth.require_role(OWNER)
def change_role(user_id: str) -> Response:
    body = bodies.json_object(request)
    user = _user(user_id)
    me = auth.principal().user
    if me is not None and me.id == user.id:
        raise ApiError(400, "Cannot change your own role")
    try:
        runtime().users.set_role(user, body.get("newRoleName"))
    except UserNotFound as err:
        raise ApiError(404, str(err)) from None
    except UserError as err:
        raise ApiError(400, str(err)) from None
    return jsonify({"data": {"success": True}})


@bp.patch("/me/password")
def change_password() -> Response:
    me = auth.current_user()
    body = bodies.json_object(request)
    current, new = body.get("currentPassword"), body.get("newPassword")
    if not isinstance(current, str) or not current:
        raise ApiError(400, "Missing current password")
    if not isinstance(new, str) or not new:
        raise ApiError(400, "Missing new password")
    if not passwords.verify(me.password_hash, current):
        raise ApiError(400, "Provided current password is incorrect.")  # n8n's words
    try:
        updated = runtime().users.set_password(me, new)
    except UserNotFound as err:
        raise ApiError(404, str(err)) from None
    except UserError as err:
        raise ApiError(400, str(err)) from None
    return signed_in_as(updated, jsonify({"data": {"success": True}}))


def _user(user_id: str) -> User:
    user = runtime().users.get(user_id)
    if user is None:
        raise ApiError(404, f"There is no user {user_id}")
    return user
