"""CredentialStore: finding the credential a node refers to, without ever showing a secret."""

from __future__ import annotations

import json

import pytest

from core.credentials import CredentialError, CredentialStore

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
