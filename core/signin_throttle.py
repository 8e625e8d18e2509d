"""Failed sign-ins slow the next ones down, per account and per address, counted in Redis.

Each subject (an account: the email tried, whether a user has it or not; an address: the client's
IP as the api sees it) has a count of failures, `signin:failures:<kind>:<subject>`, kept for
FORGET_SECONDS after the last one. Past its free failures, each failure makes the subject wait
before its next try, `signin:wait:<kind>:<subject>`, a key whose TTL is the wait: one second,
doubling with each further failure, up to MAX_WAIT_SECONDS. A try while a wait runs is refused
at once (the api answers 429 with Retry-After) without checking the password, so a guesser
learns nothing from it, and it does not count. Redis expires both keys: the process keeps no
clock of its own, and every api process sees the same counts.

A success forgets the account's failures, never the address's: signing in to one's own account
between guesses at others' must not reset the address's count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import redis

from core.keys import Keys

ACCOUNT = "account"
ADDRESS = "address"
# n8n lets 5 sign-ins a minute through per email; an address is shared by a whole office behind
# one NAT (or every client, behind a proxy that does not forward addresses), so it gets more.
FREE_FAILURES = {ACCOUNT: 5, ADDRESS: 50}
FORGET_SECONDS = 15 * 60
MAX_WAIT_SECONDS = 15 * 60


def wait_seconds(failures: int, free: int) -> int:
    """How long a subject with `failures` waits before its next try: none up to `free`, then
    1 s, doubling per failure, at most MAX_WAIT_SECONDS."""
    if failures <= free:
        return 0
    return min(2 ** min(failures - free - 1, 20), MAX_WAIT_SECONDS)


@dataclass(frozen=True)
class Subject:
    kind: str
    name: str


class SigninThrottle:
    def __init__(self, client: redis.Redis, keys: Keys):
        self.redis = client
        self.keys = keys

    def retry_after(self, subjects: list[Subject]) -> int:
        """Seconds until the longest running wait of these subjects ends; 0 when none runs."""
        with self.redis.pipeline(transaction=False) as pipe:
            for s in subjects:
                pipe.pttl(self.keys.signin_wait(s.kind, s.name))
            left = pipe.execute()
        return max([math.ceil(ms / 1000) for ms in left if ms and ms > 0] or [0])

    def failed(self, subjects: list[Subject]) -> None:
        """Count one failure for each subject, and start its wait if it is past its free ones.
        One subject's keys at a time: in a cluster each is a slot of its own."""
        for s in subjects:
            failures_key = self.keys.signin_failures(s.kind, s.name)
            with self.redis.pipeline(transaction=True) as pipe:
                pipe.incr(failures_key)
                pipe.expire(failures_key, FORGET_SECONDS)
                failures, _ = pipe.execute()
            wait = wait_seconds(int(failures), FREE_FAILURES[s.kind])
            if wait:
                self.redis.set(self.keys.signin_wait(s.kind, s.name), "1", ex=wait)

    def succeeded(self, account: Subject) -> None:
        self.redis.delete(self.keys.signin_failures(account.kind, account.name))
        self.redis.delete(self.keys.signin_wait(account.kind, account.name))

    def failures(self, subject: Subject) -> int:
        value = self.redis.get(self.keys.signin_failures(subject.kind, subject.name))
        return int(value or 0)
