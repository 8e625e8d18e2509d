"""CredentialStore: finding the credential a node refers to, without ever showing a secret."""

from __future__ import annotations

import json

import pytest

from core.credentials import CredentialError, CredentialStore, UrlNotAllowed, check_url

KEY = "sk-test-SECRET-123"
OTHER_KEY = "sk-test-OTHER-456"

OPENAI_A = {
    "id": "a1",
    "name": "OpenAi account",
    "type": "openAiApi",
    "data": {"apiKey": KEY, "url": "http://a/v1"},
}
OPENAI_B = {
    "id": "b2",
    "name": "Local vLLM",
    "type": "openAiApi",
    "data": {"apiKey": OTHER_KEY, "url": "http://b/v1"},
}
BASIC = {
    "id": "c3",
    "name": "Chat login",
    "type": "httpBasicAuth",
    "data": {"user": "ada", "password": "pw-SECRET"},
}
REDIS = {
    "id": "d4",
    "name": "Redis",
    "type": "redis",
    "data": {
        "host": "redis",
        "port": 6379,
        "password": "redis-SECRET",
        "database": 0,
        "ssl": False,
        "user": "default",
    },
}


def secrets_absent(text: str) -> bool:
    return not any(s in text for s in (KEY, OTHER_KEY, "pw-SECRET", "redis-SECRET"))


def test_matches_by_id_before_name():
    store = CredentialStore([OPENAI_A, OPENAI_B])
    found = store.resolve("openAiApi", {"id": "b2", "name": "OpenAi account"})
    assert found == {"apiKey": OTHER_KEY, "url": "http://b/v1"}
    assert (found.id, found.name, found.type) == ("b2", "Local vLLM", "openAiApi")


def test_matches_by_name_when_the_id_is_unknown():
    # An export from another n8n instance keeps the name but carries that instance's ids.
    store = CredentialStore([OPENAI_A, OPENAI_B])
    assert store.resolve("openAiApi", {"id": "zz", "name": "Local vLLM"})["apiKey"] == OTHER_KEY


def test_takes_the_only_credential_of_the_type_when_nothing_matches():
    store = CredentialStore([OPENAI_A, BASIC])
    assert store.resolve("openAiApi", None).name == "OpenAi account"
    assert store.resolve("openAiApi", {"id": "zz", "name": "Elsewhere"}).name == "OpenAi account"


def test_falls_back_to_the_environment_for_openai():
    store = CredentialStore(
        [BASIC], env={"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": "http://env/v1"}
    )
    found = store.resolve("openAiApi", {"id": "a1", "name": "OpenAi account"})
    assert found == {"apiKey": KEY, "url": "http://env/v1"}
    assert found.name == "environment (OPENAI_API_KEY)"


def test_environment_fallback_without_base_url_leaves_url_out():
    store = CredentialStore([], env={"OPENAI_API_KEY": KEY})
    assert store.resolve("openAiApi", None) == {"apiKey": KEY}


def test_prefers_a_stored_credential_over_the_environment():
    store = CredentialStore([OPENAI_A], env={"OPENAI_API_KEY": OTHER_KEY})
    assert store.resolve("openAiApi", None)["apiKey"] == KEY


def test_missing_credential_error_names_credential_and_type_only():
    store = CredentialStore([BASIC])
    with pytest.raises(CredentialError) as info:
        store.resolve("openAiApi", {"id": "a1", "name": "OpenAi account"})
    assert str(info.value) == (
        'credential "OpenAi account" (id a1) of type openAiApi not found: '
        "add it to MINI_N8N_CREDENTIALS_FILE or set OPENAI_API_KEY"
    )


def test_ambiguous_choice_is_an_error():
    store = CredentialStore([OPENAI_A, OPENAI_B])
    with pytest.raises(CredentialError) as info:
        store.resolve("openAiApi", {"name": "Nope"})
    assert str(info.value) == (
        'credential "Nope" of type openAiApi not found, and there are 2 credentials of that type '
        "to choose from: match its id or name in MINI_N8N_CREDENTIALS_FILE"
    )
    assert secrets_absent(str(info.value))


def test_basic_auth_and_redis_credentials_are_stored_and_resolved():
    store = CredentialStore([BASIC, REDIS])
    assert store.resolve("httpBasicAuth", {"id": "c3", "name": "Chat login"}) == BASIC["data"]
    assert store.resolve("redis", {"name": "Redis"})["password"] == "redis-SECRET"


def test_no_secret_in_repr_str_or_redacted_view():
    store = CredentialStore([OPENAI_A, BASIC, REDIS], env={"OPENAI_API_KEY": OTHER_KEY})
    resolved = [store.resolve(t, None) for t in ("openAiApi", "httpBasicAuth", "redis")]
    shown = [repr(store), str(store), json.dumps(store.redacted())] + [repr(r) for r in resolved]
    shown += [str(r) for r in resolved] + [f"{resolved}"]
    assert all(secrets_absent(text) for text in shown)
    assert (
        repr(resolved[0])
        == "ResolvedCredential(openAiApi 'OpenAi account', {'apiKey': '***', 'url': 'http://a/v1'})"
    )
    assert store.redacted()[2]["data"]["host"] == "redis"  # non-secret fields stay readable


def test_loads_a_list_file_named_by_the_environment(tmp_path):
    path = tmp_path / "credentials.json"
    path.write_text(json.dumps([OPENAI_A, BASIC]))
    store = CredentialStore.from_env({"MINI_N8N_CREDENTIALS_FILE": str(path)})
    assert len(store) == 2
    assert store.resolve("openAiApi", {"id": "a1"})["apiKey"] == KEY


def test_loads_a_credentials_object_file_and_reads_env_fallback(tmp_path):
    path = tmp_path / "credentials.json"
    path.write_text(json.dumps({"credentials": [BASIC]}))
    store = CredentialStore.from_env(
        {"MINI_N8N_CREDENTIALS_FILE": str(path), "OPENAI_API_KEY": KEY}
    )
    assert store.resolve("httpBasicAuth", None)["user"] == "ada"
    assert store.resolve("openAiApi", None)["apiKey"] == KEY


def test_from_env_uses_the_process_environment(monkeypatch):
    monkeypatch.delenv("MINI_N8N_CREDENTIALS_FILE", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    assert CredentialStore.from_env().resolve("openAiApi", None)["apiKey"] == KEY


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (f'[{{"type": "openAiApi", "data": {{"apiKey": "{KEY}"', "is not valid JSON: Expecting"),
        ('{"creds": []}', 'must hold a list of credentials or {"credentials": [...]}'),
        (json.dumps([{"name": "x", "data": {"apiKey": KEY}}]), 'credential #1 ("x") has no "type"'),
        (json.dumps([{"type": "openAiApi", "data": KEY}]), 'has a "data" that is not an object'),
    ],
)
def test_a_bad_file_is_a_clear_error_without_its_content(tmp_path, content, message):
    path = tmp_path / "credentials.json"
    path.write_text(content)
    with pytest.raises(CredentialError) as info:
        CredentialStore.from_env({"MINI_N8N_CREDENTIALS_FILE": str(path)})
    assert message in str(info.value)
    assert secrets_absent(str(info.value))


def test_a_missing_file_is_named():
    with pytest.raises(CredentialError) as info:
        CredentialStore.from_env({"MINI_N8N_CREDENTIALS_FILE": "/nonexistent/creds.json"})
    assert str(info.value) == "credentials file /nonexistent/creds.json not found"


def test_has_type_names_the_configured_types_and_the_environments_key():
    store = CredentialStore([{"id": "r", "name": "R", "type": "redis", "data": {"host": "h"}}])
    assert store.has_type("redis") and not store.has_type("openAiApi")
    from_env = CredentialStore(env={"OPENAI_API_KEY": "sk-x"})
    assert from_env.has_type("openAiApi") and not from_env.has_type("redis")


# --- Allowed HTTP Request Domains (n8n's assertCredentialAllowsUrl with a pinned URL) ----------
OWN = "http://127.0.0.1:8000/v1"


def openai_with(**domains) -> dict:
    return {"id": "o1", "name": "OpenAi", "type": "openAiApi",
            "data": {"apiKey": KEY, "url": OWN, **domains}}  # fmt: skip


def refusal(credential: dict, url: str) -> str | None:
    resolved = CredentialStore([credential]).resolve("openAiApi", None)
    try:
        check_url(resolved, url, OWN)
    except UrlNotAllowed as err:
        return str(err)
    return None


def test_without_allowed_domains_a_credential_goes_only_to_its_own_url():
    assert refusal(openai_with(), OWN + "/") is None
    assert refusal(openai_with(), "http://127.0.0.2:9000/v1") == (
        'Domain not allowed: credential "OpenAi" belongs to 127.0.0.1:8000 and is not sent to '
        '127.0.0.2:9000. To allow it, set its allowedHttpRequestDomains to "domains" with '
        'allowedDomains "127.0.0.2", or to "all".'
    )


def test_all_allows_any_url():
    assert refusal(openai_with(allowedHttpRequestDomains="all"), "http://elsewhere:1/v1") is None


def test_none_allows_only_the_credentials_own_url_in_n8ns_words():
    none = openai_with(allowedHttpRequestDomains="none")
    assert refusal(none, OWN) is None
    assert refusal(none, "http://user:pw@127.0.0.1:9000/v1?k=v") == (
        "Domain not allowed: This credential is restricted from accessing 127.0.0.1:9000."
    )


@pytest.mark.parametrize(
    "allowed, url, ok",
    [
        ("example.com", "https://example.com/v1", True),
        ("Example.COM.", "https://example.com./v1", True),
        ("example.com", "https://api.example.com/v1", False),
        ("*.example.com", "https://api.example.com/v1", True),
        ("*.example.com", "https://example.com/v1", False),  # subdomains only, as n8n's
        ("a.org, *.example.com ,127.0.0.2", "http://127.0.0.2:9/v1", True),
        ("example.com", "https://example.com.evil.net/v1", False),
        ("example.com", "https://evil.net/?example.com", False),
        ("::1", "http://[::1]:9/v1", True),
    ],
)
def test_domains_allow_the_hosts_their_list_names(allowed, url, ok):
    domains = openai_with(allowedHttpRequestDomains="domains", allowedDomains=allowed)
    message = refusal(domains, url)
    assert (message is None) is ok
    if not ok:
        assert message is not None and message.endswith(
            f"Only the following domains are allowed: {allowed.strip()}"
        )


def test_domains_with_an_empty_list_refuse_as_n8n_does():
    empty = openai_with(allowedHttpRequestDomains="domains", allowedDomains=" ")
    assert refusal(empty, OWN) == (
        "No allowed domains specified. Configure allowed domains or change restriction setting."
    )


@pytest.mark.parametrize(
    "data, message",
    [
        ({"allowedHttpRequestDomains": "some"}, 'must be "all", "domains" or "none"'),
        ({"allowedDomains": ["a.org"]}, "allowedDomains must be a comma-separated string"),
    ],
)
def test_a_restriction_n8n_would_not_offer_is_refused_when_the_file_is_read(data, message):
    entry = {**openai_with(), "data": {"apiKey": KEY, **data}}
    with pytest.raises(CredentialError, match=message) as caught:
        CredentialStore([entry])
    assert KEY not in str(caught.value)


def test_the_restriction_shows_in_the_redacted_view():
    entry = openai_with(allowedHttpRequestDomains="domains", allowedDomains="a.org")
    data = CredentialStore([entry]).redacted()[0]["data"]
    assert data == {"apiKey": "***", "url": OWN, "allowedHttpRequestDomains": "domains",
                    "allowedDomains": "a.org"}  # fmt: skip
