"""People on the REST api (api/rest/signin.py, api/rest/users.py, api/access.py): sign-in with an
email and a password to the editor's session cookie, n8n's routes and shapes, the owner managing
users, a chat user kept to the Chat Hub's paths, failed sign-ins slowed, and no password in any
answer or log line (Flask test client, real Redis)."""

from __future__ import annotations

import logging

import pytest

from api import access
from api.app import create_app
from api.rest.cookie import COOKIE
from core.settings import Settings
from core.signin_throttle import ACCOUNT, ADDRESS, FREE_FAILURES
from core.users import UserStore

API_KEY = "users-test-key"
PASSWORD = "Sunny-Day-42"
KEY = {"X-N8N-API-KEY": API_KEY}


@pytest.fixture
def app(redis_url, keys):
    settings = Settings(redis_url=redis_url, api_key=API_KEY, key_prefix=keys.prefix)
    return create_app(settings=settings)


@pytest.fixture
def store(app):
    return app.extensions["mini_n8n"].users


def browser(app):
    """A tab of this server's own pages: its requests say they come from the same origin."""
    client = app.test_client()
    client.environ_base["HTTP_SEC_FETCH_SITE"] = "same-origin"
    return client


@pytest.fixture
def people(app, store: UserStore):
    """An owner, a member and a chat user, each signed in in a browser of their own."""
    signed_in = {}
    for role in ("owner", "member", "chat"):
        store.add(f"{role}@example.com", PASSWORD, role, role.title())
        client = browser(app)
        assert sign_in(client, f"{role}@example.com").status_code == 200
        signed_in[role] = client
    return signed_in


def sign_in(client, email: str, password: str = PASSWORD, **headers):
    body = {"emailOrLdapLoginId": email, "password": password}
    return client.post("/rest/login", json=body, headers=headers)


def test_signing_in_answers_n8ns_user_and_sets_the_editors_cookie(app, store):
    store.add("ada@example.com", PASSWORD, "member", "Ada", "Lovelace")
    client = browser(app)
    response = sign_in(client, "Ada@Example.com")
    assert response.status_code == 200
    user = response.json["data"]
    assert (user["email"], user["firstName"], user["lastName"], user["role"]) == (
        "ada@example.com", "Ada", "Lovelace", "global:member",
    )  # fmt: skip
    attributes = [part.strip() for part in response.headers["Set-Cookie"].split(";")]
    assert attributes[0].startswith(f"{COOKIE}=user.")
    assert {"HttpOnly", "SameSite=Strict", "Path=/"} <= set(attributes)
    assert client.get("/rest/login").json["data"] == user
    assert client.get("/rest/login/status").json == {
        "signedIn": True, "keyRequired": True, "user": user,
    }  # fmt: skip
    assert client.get("/rest/workflows").status_code == 200


def test_who_am_i_is_401_when_signed_out_and_the_status_says_so_with_200(app):
    client = browser(app)
    assert client.get("/rest/login").status_code == 401
    assert client.get("/rest/login/status").json == {
        "signedIn": False, "keyRequired": True, "user": None,
    }  # fmt: skip


def test_a_wrong_password_and_an_unknown_email_get_the_same_401_and_no_cookie(app, store):
    store.add("ada@example.com", PASSWORD, "member")
    client = browser(app)
    for email, password in [("ada@example.com", "Wrong-Pass-1"), ("bob@example.com", PASSWORD)]:
        response = sign_in(client, email, password)
        assert response.status_code == 401
        assert response.json == {"message": "Wrong username or password. Do you have caps lock on?"}
        assert "Set-Cookie" not in response.headers


@pytest.mark.parametrize(
    "body, status, message",
    [
        (
            {"emailOrLdapLoginId": "not-an-email", "password": PASSWORD},
            400,
            "Invalid email address",
        ),
        ({"emailOrLdapLoginId": "ada@example.com"}, 400, 'Send {"emailOrLdapLoginId"'),
        ({"emailOrLdapLoginId": 7, "password": PASSWORD}, 400, 'Send {"emailOrLdapLoginId"'),
    ],
)
def test_a_malformed_sign_in_is_a_clear_400(app, body, status, message):
    response = browser(app).post("/rest/login", json=body)
    assert response.status_code == status and response.json["message"].startswith(message)


def test_sign_in_takes_json_from_this_servers_pages_only(app, store):
    store.add("ada@example.com", PASSWORD, "member")
    client = browser(app)
    assert sign_in(client, "ada@example.com", **{"Sec-Fetch-Site": "same-site"}).status_code == 403
    form = client.post("/rest/login", data={"emailOrLdapLoginId": "ada@example.com"})
    assert form.status_code == 415
    assert client.get_cookie(COOKIE) is None


def test_signing_out_ends_the_session_in_redis_so_a_copied_cookie_is_refused(app, store):
    store.add("ada@example.com", PASSWORD, "member")
    client = browser(app)
    sign_in(client, "ada@example.com")
    copied = client.get_cookie(COOKIE).value
    response = client.post("/rest/logout")
    assert response.json == {"data": {"loggedOut": True}, "signedIn": False}
    other = browser(app)
    other.set_cookie(COOKIE, copied)
    assert other.get("/rest/login").status_code == 401
    assert other.get("/rest/workflows").status_code == 401


def test_past_the_free_failures_an_account_waits_even_with_the_right_password(app, store):
    store.add("ada@example.com", PASSWORD, "member")
    client = browser(app)
    for _ in range(FREE_FAILURES[ACCOUNT]):
        assert sign_in(client, "ada@example.com", "Wrong-Pass-1").status_code == 401
    assert sign_in(client, "ada@example.com", "Wrong-Pass-1").status_code == 401  # counted
    refused = sign_in(client, "ada@example.com")
    assert refused.status_code == 429 and refused.headers["Retry-After"] == "1"
    assert refused.json["message"] == "Too many failed sign-ins: try again in 1 seconds."
    assert client.get_cookie(COOKIE) is None


def test_when_the_wait_is_over_the_right_password_signs_in_and_forgets_the_failures(
    app, store, redis_client, keys
):
    store.add("ada@example.com", PASSWORD, "member")
    client = browser(app)
    for _ in range(FREE_FAILURES[ACCOUNT] + 1):
        sign_in(client, "ada@example.com", "Wrong-Pass-1")
    redis_client.delete(keys.signin_wait(ACCOUNT, "ada@example.com"))  # as Redis expires it
    assert sign_in(client, "ada@example.com").status_code == 200
    assert redis_client.get(keys.signin_failures(ACCOUNT, "ada@example.com")) is None


def test_one_address_guessing_many_accounts_is_slowed_too(app, store):
    store.add("ada@example.com", PASSWORD, "member")
    client = browser(app)
    for i in range(FREE_FAILURES[ADDRESS] + 1):
        assert sign_in(client, f"guess{i}@example.com", "Wrong-Pass-1").status_code == 401
    assert sign_in(client, "ada@example.com").status_code == 429


def test_no_password_reaches_a_log_line_or_an_answer(app, store, caplog):
    caplog.set_level(logging.DEBUG)
    store.add("ada@example.com", PASSWORD, "owner")
    client = browser(app)
    answers = [
        sign_in(client, "ada@example.com", "Wrong-Pass-1"),
        sign_in(client, "ada@example.com"),
        client.post("/rest/users", json={"email": "b@example.com", "password": "weak-Pass"}),
        client.post("/rest/users", json={"email": "c@example.com", "password": "Good-Pass-9"}),
        client.patch("/rest/me/password", json={"currentPassword": "Wrong-Pass-1",
                                                "newPassword": "Next-Pass-7"}),
        client.get("/rest/users"),
    ]  # fmt: skip
    said = caplog.text + "".join(a.get_data(as_text=True) for a in answers)
    for secret in (PASSWORD, "Wrong-Pass-1", "weak-Pass", "Good-Pass-9", "Next-Pass-7", "argon2"):
        assert secret not in said


def test_a_chat_user_reaches_only_the_hubs_paths_and_the_editor_sends_them_to_the_hub(people):
    chat = people["chat"]
    for path in ("/rest/workflows", "/rest/executions", "/rest/credentials", "/rest/users",
                 "/rest/node-types", "/rest/sessions", "/rest/push?pushRef=x"):  # fmt: skip
        response = chat.get(path)
        assert response.status_code == 403, path
        assert response.json == {"message": "Chat users may use the Chat Hub only."}
    assert chat.post("/rest/workflows", json={}).status_code == 403
    assert chat.get("/rest/login").json["data"]["role"] == "global:chatUser"
    page = chat.get("/", headers={"Sec-Fetch-Site": "none"})
    assert page.status_code == 302 and page.headers["Location"] == "/home/chat"
    assert chat.get("/home/chat", headers={"Sec-Fetch-Site": "none"}).status_code == 200


def test_opening_a_path_to_chat_users_is_one_prefix_in_the_access_rule(people, monkeypatch):
    """What the hub does for /rest/chat: here shown with a route that exists today."""
    chat = people["chat"]
    assert chat.get("/rest/node-types").status_code == 403
    monkeypatch.setattr(access, "CHAT_USER_PATHS", (*access.CHAT_USER_PATHS, "/rest/node-types"))
    assert chat.get("/rest/node-types").status_code == 200
    assert chat.get("/rest/node-types-more").status_code == 403  # a prefix is a path segment


def test_the_api_key_keeps_working_beside_a_chat_users_cookie(people):
    assert people["chat"].get("/rest/workflows", headers=KEY).status_code == 200


def test_a_member_uses_the_editor_and_lists_users_but_manages_none(people, store):
    member = people["member"]
    assert member.get("/rest/workflows").status_code == 200
    listed = member.get("/rest/users").json["data"]
    assert listed["count"] == 3
    assert [u["email"] for u in listed["items"]] == [
        "chat@example.com", "member@example.com", "owner@example.com",
    ]  # fmt: skip
    body = {"email": "new@example.com", "password": PASSWORD, "role": "global:member"}
    assert member.post("/rest/users", json=body).status_code == 403
    owner_id = store.by_email("owner@example.com").id
    assert member.delete(f"/rest/users/{owner_id}").status_code == 403
    assert store.by_email("new@example.com") is None


def test_the_owner_adds_and_removes_users_and_the_removed_are_signed_out(app, people, store):
    owner = people["owner"]
    body = {"email": "New@Example.com", "password": PASSWORD, "role": "global:chatUser",
            "firstName": "New"}  # fmt: skip
    added = owner.post("/rest/users", json=body)
    assert added.status_code == 201 and added.json["data"]["email"] == "new@example.com"
    assert owner.post("/rest/users", json=body).status_code == 409
    newcomer = browser(app)
    assert sign_in(newcomer, "new@example.com").status_code == 200
    removed = owner.delete(f"/rest/users/{added.json['data']['id']}")
    assert removed.json == {"data": {"success": True}}
    assert newcomer.get("/rest/login").status_code == 401
    member = store.by_email("member@example.com")
    changed = owner.patch(f"/rest/users/{member.id}/role", json={"newRoleName": "global:owner"})
    assert changed.status_code == 200 and store.get(member.id).role.value == "global:owner"


@pytest.mark.parametrize(
    "body, message",
    [
        ({"email": "x@example.com", "password": "short"}, "Password must be 8 to 64"),
        ({"email": "nope", "password": PASSWORD}, "Invalid email address"),
        ({"email": "x@example.com", "password": PASSWORD, "role": "global:admin"}, "role must"),
    ],
)
def test_a_refused_new_user_is_a_400_that_writes_nothing(people, store, body, message):
    response = people["owner"].post("/rest/users", json=body)
    assert response.status_code == 400 and response.json["message"].startswith(message)
    assert len(store.list()) == 3


def test_the_owner_cannot_remove_themselves(people, store):
    me = store.by_email("owner@example.com")
    response = people["owner"].delete(f"/rest/users/{me.id}")
    assert response.status_code == 400 and store.get(me.id) is not None


def test_the_api_key_stands_for_the_owner(app, store):
    client = app.test_client()
    body = {"email": "ada@example.com", "password": PASSWORD, "role": "global:owner"}
    assert client.post("/rest/users", json=body, headers=KEY).status_code == 201
    assert client.get("/rest/users", headers=KEY).json["data"]["count"] == 1
    response = client.patch("/rest/me/password", json={}, headers=KEY)
    assert response.status_code == 401  # the key is nobody's: no password of its own


def test_a_password_change_keeps_this_browser_and_signs_out_the_others(app, people):
    chat = people["chat"]
    other = browser(app)
    sign_in(other, "chat@example.com")
    wrong = chat.patch(
        "/rest/me/password", json={"currentPassword": "Wrong-Pass-1", "newPassword": "Next-Pass-7"}
    )
    assert wrong.status_code == 400
    assert wrong.json["message"] == "Provided current password is incorrect."
    weak = chat.patch("/rest/me/password", json={"currentPassword": PASSWORD, "newPassword": "x"})
    assert weak.status_code == 400 and weak.json["message"].startswith("Password must be")
    changed = chat.patch(
        "/rest/me/password", json={"currentPassword": PASSWORD, "newPassword": "Next-Pass-7"}
    )
    assert changed.json == {"data": {"success": True}}
    assert chat.get("/rest/login").status_code == 200
    assert other.get("/rest/login").status_code == 401
    assert sign_in(browser(app), "chat@example.com", "Next-Pass-7").status_code == 200
