"""Signed-in browsers: a random token in the browser's cookie, its digest in Redis.

`signin:session:<sha256 of the token>` holds `"<userId> <epoch>"` and expires with the cookie.
Redis never holds a token a browser could present (only its digest), and the cookie holds
nothing but the token. A session counts while its user exists and its epoch is the user's:
a new password bumps the epoch (core/users.py), which signs every other browser out at once,
and removing the user signs all of them out.
"""

from __future__ import annotations

import hashlib
import secrets

import redis

from core.keys import Keys
from core.users import User, UserStore

TOKEN_BYTES = 32


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class UserSessions:
    def __init__(self, client: redis.Redis, keys: Keys, users: UserStore, seconds: int):
        self.redis = client
        self.keys = keys
        self.users = users
        self.seconds = seconds

    def open(self, user: User) -> str:
        """A new session of `user`: the token for the browser's cookie."""
        token = secrets.token_urlsafe(TOKEN_BYTES)
        value = f"{user.id} {user.session_epoch}"
        self.redis.set(self.keys.signin_session(_digest(token)), value, ex=self.seconds)
        return token

    def user(self, token: str) -> User | None:
        """The user a token stands for, or None (unknown, expired, signed out, or the user's
        password changed or the user is gone since)."""
        if not token or len(token) > 128:
            return None
        value = self.redis.get(self.keys.signin_session(_digest(token)))
        if not value:
            return None
        user_id, _, epoch = str(value).partition(" ")
        user = self.users.get(user_id)
        if user is None or str(user.session_epoch) != epoch:
            return None
        return user

    def close(self, token: str) -> None:
        if token and len(token) <= 128:
            self.redis.delete(self.keys.signin_session(_digest(token)))
