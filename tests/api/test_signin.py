"""The editor's sign-in (api/rest/signin.py): the api key once, then an HttpOnly, SameSite=Strict
session cookie that holds no key and stands for it on REST; the header keeps working for scripts
(Flask test client, real Redis)."""

from __future__ import annotations

import time

import pytest

from api.app import create_app
from api.rest.cookie import COOKIE, SESSION_SECONDS, session_value
from core.settings import Settings

API_KEY = "signin-test-key"


@pytest.fixture
def bare(redis_url, keys):
    """A client that sends no Sec-Fetch-Site (a browser older than 2023, or no browser)."""
    settings = Settings(redis_url=redis_url, api_key=API_KEY, key_prefix=keys.prefix)
    return create_app(settings=settings).test_client()


@pytest.fixture
def client(bare):
    """The editor's page in a browser: its requests say they come from the same origin."""
    bare.environ_base["HTTP_SEC_FETCH_SITE"] = "same-origin"
    return bare


def sign_in(client, key: str = API_KEY, **headers):
    return client.post("/rest/login", json={"apiKey": key}, headers=headers)


def test_signing_in_sets_an_http_only_strict_cookie_for_a_month_that_holds_no_key(client):
    response = sign_in(client)
    assert response.status_code == 200 and response.json == {"signedIn": True}
    set_cookie = response.headers["Set-Cookie"]
    attributes = [part.strip() for part in set_cookie.split(";")]
    assert attributes[0].startswith(f"{COOKIE}=")
    assert {"HttpOnly", "SameSite=Strict", "Path=/", f"Max-Age={SESSION_SECONDS}"} <= set(
        attributes
    )
    assert "Secure" not in attributes  # plain http here: a Secure cookie would never come back
    assert API_KEY not in set_cookie


def test_behind_a_tls_proxy_the_cookie_is_secure(client):
    response = sign_in(client, **{"X-Forwarded-Proto": "https"})
    assert "Secure" in [part.strip() for part in response.headers["Set-Cookie"].split(";")]


def test_the_cookie_stands_for_the_key_on_rest(client):
    assert client.get("/rest/workflows").status_code == 401
    sign_in(client)
    assert client.get("/rest/workflows").status_code == 200
    status = {"signedIn": True, "keyRequired": True, "user": None}
    assert client.get("/rest/login/status").json == status
    assert client.get("/rest/login").json == {"data": None, "signedIn": True, "keyRequired": True}


@pytest.mark.parametrize(
    "value",
    [
        session_value("another-key"),  # the key changed since
        session_value(API_KEY, issued=int(time.time()) - SESSION_SECONDS - 60),  # too old
        session_value(API_KEY, issued=int(time.time()) + 3600),  # from the future
        session_value(API_KEY)[:-2] + "00",  # tampered
        "not-a-session",
        API_KEY,  # the key itself is no cookie
    ],
    ids=["other-key", "expired", "future", "tampered", "garbage", "the-key"],
)
def test_a_cookie_this_key_did_not_sign_recently_is_refused(client, value):
    client.set_cookie(COOKIE, value)
    assert client.get("/rest/workflows").status_code == 401
    status = {"signedIn": False, "keyRequired": True, "user": None}
    assert client.get("/rest/login/status").json == status
    assert client.get("/rest/login").status_code == 401


def test_the_cookie_counts_only_on_requests_from_the_editors_own_origin(client):
    """Cookies know no ports: a page on another port of localhost is "same-site" and its
    requests carry the cookie; the browser's Sec-Fetch-Site tells them apart."""
    sign_in(client, **{"Sec-Fetch-Site": "same-origin"})
    same = {"Sec-Fetch-Site": "same-origin"}
    assert client.get("/rest/workflows", headers=same).status_code == 200
    for site in ("same-site", "cross-site"):
        other = {"Sec-Fetch-Site": site}
        assert client.get("/rest/workflows", headers=other).status_code == 401
        assert client.post("/rest/logout", headers=other).status_code == 403
        assert client.get_cookie(COOKIE) is not None  # still signed in
    assert sign_in(client, **{"Sec-Fetch-Site": "same-site"}).status_code == 403


def test_without_sec_fetch_site_the_cookie_counts_only_with_this_servers_origin(bare):
    own = {"Origin": "http://localhost"}  # the test client's server
    assert sign_in(bare).status_code == 403  # neither header: not from the editor
    assert sign_in(bare, **own).status_code == 200
    assert bare.get("/rest/workflows").status_code == 401
    assert (
        bare.get("/rest/workflows", headers={"Origin": "http://localhost:3000"}).status_code == 401
    )
    assert bare.get("/rest/workflows", headers=own).status_code == 200
    assert bare.post("/rest/logout", headers={"Origin": "http://evil.example"}).status_code == 403
    assert bare.get_cookie(COOKIE) is not None  # still signed in
    assert bare.post("/rest/logout", headers=own).status_code == 200


def test_a_wrong_key_is_refused_and_sets_no_cookie(client):
    response = sign_in(client, "wrong-key")
    assert response.status_code == 401
    assert response.json["message"] == "That is not this server's api key."
    assert "Set-Cookie" not in response.headers
    assert client.get_cookie(COOKIE) is None


def test_a_sign_in_without_a_key_is_a_clear_400(client):
    response = client.post("/rest/login", json={})
    assert response.status_code == 400
    assert response.json["message"] == (
        'Send {"emailOrLdapLoginId": "...", "password": "..."}, or the api key as {"apiKey": "..."}.'
    )


def test_signing_out_drops_the_cookie(client):
    sign_in(client)
    response = client.post("/rest/logout")
    assert response.status_code == 200
    assert response.json == {"data": {"loggedOut": True}, "signedIn": False}
    assert client.get_cookie(COOKIE) is None
    assert client.get("/rest/workflows").status_code == 401


def test_scripts_keep_sending_the_key_as_a_header(client):
    assert client.get("/rest/workflows", headers={"X-N8N-API-KEY": API_KEY}).status_code == 200
    bearer = {"Authorization": f"Bearer {API_KEY}"}
    assert client.get("/rest/workflows", headers=bearer).status_code == 200


def test_the_status_says_signed_in_without_a_key_when_the_server_needs_none(
    redis_url, keys, monkeypatch
):
    monkeypatch.setenv("HOST", "127.0.0.1")  # keyless REST answers only on loopback
    settings = Settings(redis_url=redis_url, api_key="", key_prefix=keys.prefix)
    client = create_app(settings=settings).test_client()
    response = client.get("/rest/login/status", headers={"Host": "localhost:5678"})
    assert response.json == {"signedIn": True, "keyRequired": False, "user": None}
