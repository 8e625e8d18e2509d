"""Passwords: n8n's rules for a new one, and argon2id hashes (argon2-cffi) for what is stored.

Nothing here logs, and no error names or echoes a password. A hash is all that is kept
(core/users.py); checking a password against it costs the same whether the account exists or
not (`verify` takes a stand-in hash), so a sign-in's timing does not tell which emails have one.

The parameters are OWASP's for argon2id (19 MiB, 2 passes, 1 lane), not argon2-cffi's larger
default (64 MiB, 4 lanes): a sign-in runs inside an api process that serves streams meanwhile,
and a hash of 64 MiB for every attempt would let a burst of sign-ins hold that much each.
A stored hash made with other parameters still verifies, and is replaced at the next sign-in
(`needs_rehash`).
"""

from __future__ import annotations

import re
from functools import cache

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

# n8n's password rule (@n8n/api-types passwordSchema), with its messages.
MIN_LENGTH = 8
MAX_LENGTH = 64
_LENGTH = f"Password must be {MIN_LENGTH} to {MAX_LENGTH} characters long."
_DIGIT = "Password must contain at least 1 number."
_UPPER = "Password must contain at least 1 uppercase letter."


class PasswordRefused(ValueError):
    """A new password that breaks the rule; the message says which part, never the password."""


def check_new_password(password: object) -> str:
    """`password` if it may be set, else PasswordRefused."""
    if not isinstance(password, str) or not MIN_LENGTH <= len(password) <= MAX_LENGTH:
        raise PasswordRefused(_LENGTH)
    if not re.search(r"\d", password):
        raise PasswordRefused(_DIGIT)
    if not re.search(r"[A-Z]", password):
        raise PasswordRefused(_UPPER)
    return password


@cache
def _hasher() -> PasswordHasher:
    return PasswordHasher(time_cost=2, memory_cost=19 * 1024, parallelism=1)


def hash_password(password: str) -> str:
    return _hasher().hash(password)


def verify(stored_hash: str | None, password: str) -> bool:
    """Whether `password` is the one `stored_hash` was made from; None (no such account) is
    checked against a stand-in, so both answers take as long."""
    try:
        return _hasher().verify(stored_hash or _stand_in(), password) and stored_hash is not None
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


def needs_rehash(stored_hash: str) -> bool:
    try:
        return _hasher().check_needs_rehash(stored_hash)
    except InvalidHashError:
        return False


@cache
def _stand_in() -> str:
    return _hasher().hash("not the password of anyone")
