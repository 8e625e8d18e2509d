"""`mini-n8n users add|list|remove|passwd`: users in the deployment's Redis, each password read
from standard input and never printed; errors are one line and exit 1."""

from __future__ import annotations

import io
import sys

import pytest

from core import passwords
from core.user_sessions import UserSessions
from core.users import Role, UserStore
from mini_n8n.cli import main

PASSWORD = "Sunny-Day-42"


@pytest.fixture
def cli(redis_url, keys, monkeypatch, capsys):
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("MINI_N8N_KEY_PREFIX", keys.prefix)
    said = f"Redis: {redis_url} (REDIS_URL)\n"

    def run(*args: str, stdin: str = "") -> tuple[int, str, str]:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        code = main(["users", *args])
        out, err = capsys.readouterr()
        assert err.startswith(said)
        return code, out, err[len(said) :]

    return run


@pytest.fixture
def store(redis_client, keys):
    return UserStore(redis_client, keys)


def test_users_add_reads_the_password_from_stdin_and_stores_only_its_hash(cli, store, redis_client):
    code, out, err = cli("add", "Ada@Example.com", "--role", "chat", stdin=f"{PASSWORD}\n")
    assert (code, out, err) == (0, "added ada@example.com (chat)\n", "")
    user = store.by_email("ada@example.com")
    assert user is not None and user.role is Role.CHAT_USER
    assert passwords.verify(user.password_hash, PASSWORD)
    everything = "".join(
        str(redis_client.get(k))
        for k in redis_client.keys(f"{store.keys.prefix}*")
        if redis_client.type(k) == "string"
    )
    assert PASSWORD not in everything and PASSWORD not in out


def test_users_list_shows_email_role_and_name_by_email(cli):
    cli("add", "bob@example.com", "--role", "owner", "--first-name", "Bob", stdin=PASSWORD)
    cli("add", "ada@example.com", stdin=PASSWORD)
    assert cli("list") == (0, "ada@example.com\tmember\t\nbob@example.com\towner\tBob\n", "")


def test_users_remove_drops_the_user_and_signs_their_browsers_out(cli, store, redis_client, keys):
    cli("add", "ada@example.com", stdin=PASSWORD)
    user = store.by_email("ada@example.com")
    sessions = UserSessions(redis_client, keys, store, 60)
    token = sessions.open(user)
    assert cli("remove", "ada@example.com") == (0, "removed ada@example.com\n", "")
    assert store.by_email("ada@example.com") is None and sessions.user(token) is None
    assert cli("list") == (0, "", "")


def test_users_passwd_sets_a_new_password_and_signs_every_browser_out(
    cli, store, redis_client, keys
):
    cli("add", "ada@example.com", stdin=PASSWORD)
    sessions = UserSessions(redis_client, keys, store, 60)
    token = sessions.open(store.by_email("ada@example.com"))
    code, out, _ = cli("passwd", "ada@example.com", stdin="Rainy-Day-43\n")
    assert (code, out) == (0, "password set for ada@example.com; their browsers are signed out\n")
    user = store.by_email("ada@example.com")
    assert passwords.verify(user.password_hash, "Rainy-Day-43")
    assert not passwords.verify(user.password_hash, PASSWORD)
    assert sessions.user(token) is None


@pytest.mark.parametrize(
    "args, stdin, message",
    [
        (("add", "ada@example.com"), "short1A\n", "Password must be 8 to 64 characters long."),
        (("add", "ada@example.com"), "nonumberS\n", "Password must contain at least 1 number."),
        (("add", "ada@example.com"), "", "no password on standard input"),
        (("add", "not-an-email"), f"{PASSWORD}\n", "Invalid email address"),
        (("remove", "nobody@example.com"), "", "There is no user nobody@example.com"),
        (("passwd", "nobody@example.com"), f"{PASSWORD}\n", "There is no user nobody@example.com"),
    ],
    ids=["short", "no-number", "no-stdin", "bad-email", "remove-unknown", "passwd-unknown"],
)
def test_a_refused_command_says_why_in_one_line_and_changes_nothing(
    cli, store, args, stdin, message
):
    code, out, err = cli(*args, stdin=stdin)
    assert (code, out) == (1, "")
    assert err.startswith(f"mini-n8n: {message}") and err.count("\n") == 1
    assert "Traceback" not in err and (not stdin.strip() or stdin.strip() not in err)
    assert store.list() == []


def test_adding_an_email_twice_is_refused_and_keeps_the_first(cli, store):
    cli("add", "ada@example.com", "--role", "owner", stdin=PASSWORD)
    code, _, err = cli("add", "ADA@example.com", stdin="Other-Pass-1\n")
    assert code == 1 and err == "mini-n8n: There is already a user with the email ada@example.com\n"
    user = store.by_email("ada@example.com")
    assert user.role is Role.OWNER and passwords.verify(user.password_hash, PASSWORD)
