"""Secrets from files (core/settings.py): NAME_FILE names a file holding NAME, as compose and
docker secrets give them, so no secret is on a command line or in a process's environment."""

from __future__ import annotations

import pytest

from core.settings import Settings

VARIABLES = ("MINI_N8N_API_KEY", "REDIS_URL", "REDIS_PASSWORD", "CELERY_BROKER_URL")


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(f"{name}_FILE", raising=False)


def secret(tmp_path, monkeypatch, name: str, text: str) -> str:
    path = tmp_path / name.lower()
    path.write_text(text)
    monkeypatch.setenv(f"{name}_FILE", str(path))
    return str(path)


def test_the_api_key_comes_from_its_file_without_the_line_break(tmp_path, monkeypatch):
    secret(tmp_path, monkeypatch, "MINI_N8N_API_KEY", "k3y-from-a-file\n")
    assert Settings.from_env().api_key == "k3y-from-a-file"


def test_redis_password_file_joins_redis_url_and_the_broker_that_follows_it(tmp_path, monkeypatch):
    monkeypatch.setenv("REDIS_URL", "redis://redis:6379/0")
    secret(tmp_path, monkeypatch, "REDIS_PASSWORD", "p@ss/word:1\n")
    settings = Settings.from_env()
    assert settings.redis_url == "redis://:p%40ss%2Fword%3A1@redis:6379/0"
    assert settings.broker_url == settings.redis_url


def test_redis_password_file_keeps_the_urls_user(tmp_path, monkeypatch):
    monkeypatch.setenv("REDIS_URL", "rediss://app@redis.example:6380/2")
    secret(tmp_path, monkeypatch, "REDIS_PASSWORD", "s3cret")
    assert Settings.from_env().redis_url == "rediss://app:s3cret@redis.example:6380/2"


def test_whole_urls_may_come_from_files(tmp_path, monkeypatch):
    secret(tmp_path, monkeypatch, "REDIS_URL", "redis://:pw@redis:6379/0\n")
    secret(tmp_path, monkeypatch, "CELERY_BROKER_URL", "amqp://u:pw@rabbitmq:5672//")
    settings = Settings.from_env()
    assert settings.redis_url == "redis://:pw@redis:6379/0"
    assert settings.broker_url == "amqp://u:pw@rabbitmq:5672//"


@pytest.mark.parametrize(
    "setup, message",
    [
        (lambda env, write: (env("MINI_N8N_API_KEY", "k"), write("MINI_N8N_API_KEY", "k")),
         "set MINI_N8N_API_KEY or MINI_N8N_API_KEY_FILE, not both"),
        (lambda env, write: write("MINI_N8N_API_KEY", " \n"), "MINI_N8N_API_KEY_FILE: .* is empty"),
        (lambda env, write: env("MINI_N8N_API_KEY_FILE", "/nonexistent/key"),
         "MINI_N8N_API_KEY_FILE: cannot read /nonexistent/key: No such file or directory"),
        (lambda env, write: (env("REDIS_URL", "redis://:pw@redis:6379/0"),
                             write("REDIS_PASSWORD", "other")),
         "REDIS_PASSWORD_FILE is set and the URL holds a password too"),
    ],
    ids=["both", "empty", "missing", "two-passwords"],
)  # fmt: skip
def test_a_secret_file_that_cannot_be_used_stops_the_process_saying_why(
    tmp_path, monkeypatch, setup, message
):
    setup(monkeypatch.setenv, lambda name, text: secret(tmp_path, monkeypatch, name, text))
    with pytest.raises(ValueError, match=message) as raised:
        Settings.from_env()
    assert "other" not in str(raised.value) and "pw" not in str(raised.value)
