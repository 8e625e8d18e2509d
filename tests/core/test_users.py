"""Users in Redis (core/users.py), their passwords (core/passwords.py) and their signed-in
browsers (core/user_sessions.py), on a real Redis: n8n's roles and password rule, one user per
email, only an argon2id hash stored, and sessions that end with a new password or the user."""

from __future__ import annotations

import threading

import pytest

from core import passwords
from core.user_sessions import UserSessions
from core.users import Role, User, UserError, UserExists, UserNotFound, UserStore

PASSWORD = "Sunny-Day-42"


@pytest.fixture
def store(redis_client, keys):
    return UserStore(redis_client, keys)


@pytest.fixture
def sessions(redis_client, keys, store):
    return UserSessions(redis_client, keys, store, seconds=3600)


def test_a_password_is_stored_as_an_argon2id_hash_that_verifies_it_and_nothing_else():
    stored = passwords.hash_password(PASSWORD)
    assert stored.startswith("$argon2id$v=19$m=19456,t=2,p=1$") and PASSWORD not in stored
    assert passwords.verify(stored, PASSWORD)
    assert not passwords.verify(stored, PASSWORD.lower())
    assert not passwords.verify(None, PASSWORD)  # no account: the stand-in never matches
    assert not passwords.verify("not a hash", PASSWORD)


def test_a_hash_made_with_other_parameters_still_verifies_and_asks_to_be_redone():
    from argon2 import PasswordHasher

    older = PasswordHasher(time_cost=3, memory_cost=65536, parallelism=4).hash(PASSWORD)
    assert passwords.verify(older, PASSWORD) and passwords.needs_rehash(older)
    assert not passwords.needs_rehash(passwords.hash_password(PASSWORD))


@pytest.mark.parametrize(
    "password, message",
    [
        ("Ab1", "Password must be 8 to 64 characters long."),
        ("A1" + "x" * 63, "Password must be 8 to 64 characters long."),
        ("NoNumbersHere", "Password must contain at least 1 number."),
        ("lowercase-42", "Password must contain at least 1 uppercase letter."),
        (None, "Password must be 8 to 64 characters long."),
    ],
)
def test_a_new_password_follows_n8ns_rule(password, message):
    with pytest.raises(passwords.PasswordRefused) as refused:
        passwords.check_new_password(password)
    assert str(refused.value) == message


def test_a_user_is_kept_by_lower_cased_email_with_role_names_and_no_hash_in_public(store):
    user = store.add(" Ada@Example.COM ", PASSWORD, "chat", "Ada", "Lovelace")
    assert user.email == "ada@example.com" and user.role is Role.CHAT_USER
    assert store.by_email("ADA@example.com") == user and store.get(user.id) == user
    public = user.public()
    assert public["role"] == "global:chatUser" and public["email"] == "ada@example.com"
    assert {"id", "firstName", "lastName", "isPending", "signInType"} <= set(public)
    assert "passwordHash" not in public and user.password_hash not in repr(user)
    assert User.from_json(user.to_json()) == user


def test_n8ns_role_names_and_the_clis_short_ones_are_both_taken(store):
    assert store.add("o@example.com", PASSWORD, "global:owner").role is Role.OWNER
    assert store.add("m@example.com", PASSWORD, "member").role is Role.MEMBER
    with pytest.raises(UserError, match="role must be one of"):
        store.add("x@example.com", PASSWORD, "global:admin")


def test_an_email_names_one_user_even_when_two_add_it_at_once(store):
    results: list[object] = []

    def add(password: str) -> None:
        try:
            results.append(store.add("ada@example.com", password, "member"))
        except UserExists as err:
            results.append(err)

    threads = [threading.Thread(target=add, args=(f"Password-{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    added = [r for r in results if isinstance(r, User)]
    assert len(added) == 1 and store.list() == added


def test_a_refused_user_writes_nothing(store, redis_client, keys):
    for args in [("bad", PASSWORD, "member"), ("a@example.com", "weak", "member")]:
        with pytest.raises(UserError):
            store.add(*args)
    assert redis_client.keys(f"{keys.prefix}*") == []


def test_a_session_stands_for_its_user_until_it_is_closed(store, sessions):
    user = store.add("ada@example.com", PASSWORD, "member")
    token = sessions.open(user)
    assert sessions.user(token) == user
    sessions.close(token)
    assert sessions.user(token) is None


def test_redis_holds_a_digest_of_the_token_never_the_token(store, sessions, redis_client, keys):
    token = sessions.open(store.add("ada@example.com", PASSWORD, "member"))
    names = redis_client.keys(f"{keys.prefix}signin:session:*")
    assert len(names) == 1 and token not in names[0]
    assert 0 < redis_client.ttl(names[0]) <= 3600


def test_a_new_password_ends_every_session_and_removing_the_user_ends_them_too(store, sessions):
    user = store.add("ada@example.com", PASSWORD, "member")
    first, second = sessions.open(user), sessions.open(user)
    user = store.set_password(user, "Rainy-Day-43")
    assert sessions.user(first) is None and sessions.user(second) is None
    third = sessions.open(user)
    assert sessions.user(third) == user
    store.remove(user)
    assert sessions.user(third) is None and store.by_email("ada@example.com") is None


def test_changing_a_removed_user_is_refused_and_brings_nothing_back(store):
    user = store.add("ada@example.com", PASSWORD, "member")
    store.remove(user)
    with pytest.raises(UserNotFound):
        store.set_role(user, "owner")
    assert store.get(user.id) is None
