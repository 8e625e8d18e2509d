"""Every execution store passes the same conformance suite: the reference in `make test-fast`,
Redis in `make test` (tests/core/test_executions.py holds its Redis-only parts)."""

from __future__ import annotations

import pytest

from tests.core.store_conformance import StoreConformance
from tests.core.store_probes import RedisProbe, ReferenceProbe


class TestReferenceStore(StoreConformance):
    @pytest.fixture
    def probe(self):
        return ReferenceProbe(queue_timeout_seconds=300, lease_seconds=5)


@pytest.mark.slow
class TestRedisStore(StoreConformance):
    """The real server, a client decoding responses (as the app uses it)."""

    @pytest.fixture
    def probe(self, redis_client, keys):
        probe = RedisProbe(
            redis_client, keys, listen=True, queue_timeout_seconds=300, lease_seconds=5
        )
        yield probe
        probe.close()
