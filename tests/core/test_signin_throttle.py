"""Failed sign-ins slow the next ones (core/signin_throttle.py), counted in a real Redis: free
failures, then a wait that doubles per failure, per account and per address; a success forgets
the account's count, never the address's. The tests count attempts; Redis keeps the time."""

from __future__ import annotations

import pytest

from core.signin_throttle import (
    ACCOUNT,
    ADDRESS,
    FREE_FAILURES,
    MAX_WAIT_SECONDS,
    SigninThrottle,
    Subject,
    wait_seconds,
)

ADA = Subject(ACCOUNT, "ada@example.com")
HOME = Subject(ADDRESS, "192.0.2.7")


@pytest.fixture
def throttle(redis_client, keys):
    return SigninThrottle(redis_client, keys)


def test_the_wait_is_none_for_the_free_failures_then_doubles_up_to_its_bound():
    free = FREE_FAILURES[ACCOUNT]
    assert [wait_seconds(n, free) for n in range(free + 1)] == [0] * (free + 1)
    assert [wait_seconds(free + n, free) for n in (1, 2, 3, 4)] == [1, 2, 4, 8]
    assert wait_seconds(free + 1000, free) == MAX_WAIT_SECONDS


def test_an_account_past_its_free_failures_must_wait_and_the_address_not_yet(throttle):
    for _ in range(FREE_FAILURES[ACCOUNT]):
        assert throttle.retry_after([ADA, HOME]) == 0
        throttle.failed([ADA, HOME])
    assert throttle.retry_after([ADA, HOME]) == 0  # the free ones are free
    throttle.failed([ADA, HOME])
    assert throttle.retry_after([ADA]) == 1 and throttle.retry_after([HOME]) == 0
    assert throttle.failures(ADA) == FREE_FAILURES[ACCOUNT] + 1


def test_each_failure_past_the_free_ones_doubles_the_accounts_wait(throttle, redis_client, keys):
    for _ in range(FREE_FAILURES[ACCOUNT] + 3):
        throttle.failed([ADA])
    wait_key = keys.signin_wait(ACCOUNT, ADA.name)
    assert 2000 < redis_client.pttl(wait_key) <= 4000  # the third past the free ones: 4 s


def test_an_address_has_more_free_failures_than_an_account(throttle):
    others = [Subject(ACCOUNT, f"user{i}@example.com") for i in range(FREE_FAILURES[ADDRESS])]
    for account in others:
        throttle.failed([account, HOME])
    assert throttle.retry_after([Subject(ACCOUNT, "new@example.com"), HOME]) == 0
    throttle.failed([others[0], HOME])
    assert throttle.retry_after([Subject(ACCOUNT, "new@example.com"), HOME]) == 1


def test_a_success_forgets_the_accounts_failures_and_keeps_the_addresss(throttle):
    for _ in range(FREE_FAILURES[ACCOUNT] + 1):
        throttle.failed([ADA, HOME])
    throttle.succeeded(ADA)
    assert throttle.failures(ADA) == 0 and throttle.retry_after([ADA]) == 0
    assert throttle.failures(HOME) == FREE_FAILURES[ACCOUNT] + 1


def test_the_counts_expire_in_redis(throttle, redis_client, keys):
    throttle.failed([ADA])
    assert 0 < redis_client.ttl(keys.signin_failures(ACCOUNT, ADA.name)) <= 15 * 60
