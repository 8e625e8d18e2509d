"""People who sign in: their records in Redis and the store that reads and changes them.

A user is `user:<id>` (a JSON record, one codec: `User.to_json` / `User.from_json`) and an entry
of the `users` hash (lower-cased email -> id), written together in one transaction, so an email
names at most one user. Roles are n8n's global roles, under n8n's names:

| role              | may                                                          |
|-------------------|--------------------------------------------------------------|
| `global:owner`    | everything, and manage users                                 |
| `global:member`   | the editor, REST and chat; not manage users                  |
| `global:chatUser` | the Chat Hub only (api/access.py keeps them there)           |

The record holds the password's argon2 hash (core/passwords.py) and a session epoch: changing
the password or removing the user bumps or drops it, which signs every browser of that user out
(core/user_sessions.py). The hash never leaves this module's records: `User.public()` (what REST
answers) and `repr` leave it out.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import redis

from core import passwords
from core.keys import Keys


class Role(StrEnum):
    OWNER = "global:owner"
    MEMBER = "global:member"
    CHAT_USER = "global:chatUser"


# The CLI's short names (`mini-n8n users add EMAIL --role owner|member|chat`).
ROLE_NAMES = {"owner": Role.OWNER, "member": Role.MEMBER, "chat": Role.CHAT_USER}
MAX_EMAIL = 254  # RFC 5321's longest path
MAX_NAME = 32  # n8n's firstName / lastName limit
_EMAIL = re.compile(r"^[^@\s\x00-\x1f\x7f]+@[^@\s\x00-\x1f\x7f]+\.[^@\s\x00-\x1f\x7f]+$")


class UserError(ValueError):
    """A user that cannot be added or changed as asked; the message says why."""


class UserExists(UserError):
    pass


class UserNotFound(UserError):
    pass


def normalize_email(email: object) -> str:
    """The email as it is stored and looked up (trimmed, lower case), or UserError."""
    text = email.strip().lower() if isinstance(email, str) else ""
    if not text or len(text) > MAX_EMAIL or not _EMAIL.match(text):
        raise UserError("Invalid email address")
    return text


def parse_role(value: object) -> Role:
    """n8n's role name, or the CLI's short one."""
    if isinstance(value, str):
        if value in ROLE_NAMES:
            return ROLE_NAMES[value]
        try:
            return Role(value)
        except ValueError:
            pass
    names = ", ".join(r.value for r in Role)
    raise UserError(f"role must be one of {names}")


def _name(value: object, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > MAX_NAME:
        raise UserError(f"{what} must be a string of at most {MAX_NAME} characters")
    return value.strip()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class User:
    id: str
    email: str
    role: Role
    password_hash: str = field(repr=False)
    first_name: str = ""
    last_name: str = ""
    session_epoch: int = 0
    created_at: str = ""
    updated_at: str = ""

    def to_json(self) -> str:
        return json.dumps(
            {
                "id": self.id,
                "email": self.email,
                "firstName": self.first_name,
                "lastName": self.last_name,
                "role": self.role.value,
                "passwordHash": self.password_hash,
                "sessionEpoch": self.session_epoch,
                "createdAt": self.created_at,
                "updatedAt": self.updated_at,
            }
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> User:
        data = json.loads(text)
        return cls(
            id=data["id"],
            email=data["email"],
            role=Role(data["role"]),
            password_hash=data["passwordHash"],
            first_name=data.get("firstName", ""),
            last_name=data.get("lastName", ""),
            session_epoch=int(data.get("sessionEpoch", 0)),
            created_at=data.get("createdAt", ""),
            updated_at=data.get("updatedAt", ""),
        )

    def public(self) -> dict[str, Any]:
        """n8n's PublicUser fields that mean something here; never the hash."""
        return {
            "id": self.id,
            "email": self.email,
            "firstName": self.first_name,
            "lastName": self.last_name,
            "role": self.role.value,
            "isOwner": self.role is Role.OWNER,
            "isPending": False,
            "disabled": False,
            "mfaEnabled": False,
            "signInType": "email",
            "createdAt": self.created_at,
        }

    def identity(self) -> dict[str, str]:
        """Who sent a chat message, as n8n's Chat Trigger puts it in its output (`user`)."""
        return {
            "id": self.id,
            "email": self.email,
            "firstName": self.first_name,
            "lastName": self.last_name,
        }


class UserStore:
    def __init__(self, client: redis.Redis, keys: Keys):
        self.redis = client
        self.keys = keys

    def add(
        self,
        email: object,
        password: object,
        role: object,
        first_name: object = "",
        last_name: object = "",
    ) -> User:
        """A new user; UserExists if the email has one, UserError/PasswordRefused if a field
        is wrong (checked before anything is hashed or written)."""
        now = _now()
        user = User(
            id=str(uuid.uuid4()),
            email=normalize_email(email),
            role=parse_role(role),
            password_hash="",
            first_name=_name(first_name, "firstName"),
            last_name=_name(last_name, "lastName"),
            created_at=now,
            updated_at=now,
        )
        user = replace(user, password_hash=passwords.hash_password(check_password(password)))

        def create(pipe) -> None:
            if pipe.hexists(self.keys.users(), user.email):
                raise UserExists(f"There is already a user with the email {user.email}")
            pipe.multi()
            pipe.hset(self.keys.users(), user.email, user.id)
            pipe.set(self.keys.user(user.id), user.to_json())

        self.redis.transaction(create, self.keys.users())
        return user

    def get(self, user_id: str) -> User | None:
        text = self.redis.get(self.keys.user(user_id))
        return User.from_json(text) if text else None

    def by_email(self, email: object) -> User | None:
        try:
            address = normalize_email(email)
        except UserError:
            return None
        user_id = self.redis.hget(self.keys.users(), address)
        return self.get(str(user_id)) if user_id else None

    def find(self, email_or_id: str) -> User:
        """The user of an email or an id, or UserNotFound."""
        user = self.by_email(email_or_id) if "@" in email_or_id else self.get(email_or_id)
        if user is None:
            raise UserNotFound(f"There is no user {email_or_id}")
        return user

    def list(self) -> list[User]:
        """Every user, by email."""
        ids = sorted(self.redis.hgetall(self.keys.users()).items())
        texts = self.redis.mget([self.keys.user(str(user_id)) for _, user_id in ids]) if ids else []
        return [User.from_json(text) for text in texts if text]

    def count(self) -> int:
        return int(self.redis.hlen(self.keys.users()))

    def remove(self, user: User) -> None:
        """Drops the user: every browser signed in as them is signed out with them."""
        with self.redis.pipeline(transaction=True) as pipe:
            pipe.hdel(self.keys.users(), user.email)
            pipe.delete(self.keys.user(user.id))
            pipe.execute()

    def set_password(self, user: User, password: object) -> User:
        """A new password, and a new session epoch: every browser signed in as the user is
        signed out (the caller signs the one that asked back in)."""
        new_hash = passwords.hash_password(check_password(password))
        return self._update(user, password_hash=new_hash, session_epoch=user.session_epoch + 1)

    def rehash(self, user: User, password: str) -> User:
        """The same password under today's hash parameters; sessions stay."""
        return self._update(user, password_hash=passwords.hash_password(password))

    def set_role(self, user: User, role: object) -> User:
        return self._update(user, role=parse_role(role))

    def _update(self, user: User, **changes: Any) -> User:
        """Writes the changed record unless the user was removed meanwhile (UserNotFound)."""
        updated = replace(user, **changes, updated_at=_now())
        if not self.redis.set(self.keys.user(user.id), updated.to_json(), xx=True):
            raise UserNotFound(f"There is no user {user.email}")
        return updated


def check_password(password: object) -> str:
    """n8n's rule for a new password (core/passwords.py); PasswordRefused is a UserError."""
    try:
        return passwords.check_new_password(password)
    except passwords.PasswordRefused as err:
        raise UserError(str(err)) from None
