"""Reading execution records in Redis: one record, a workflow's latest, the first items kept
beside a record. The base of the store (core/executions.py): what every step shares (the
client, the keys, the time limits) is set here."""

from __future__ import annotations

import builtins  # `list` below is a method name: annotations past it say builtins.list
import json
from typing import Any, Self

from core.execution_record import ExecutionRecord, RecordError
from core.keys import Keys
from core.redis_clients import is_cluster
from core.session_line import SessionLine


class ExecutionQueries:
    def __init__(
        self,
        client,
        keys: Keys,
        ttl_seconds: int = 7 * 24 * 3600,
        *,
        queue_timeout_seconds: float = 300.0,
        lease_seconds: float = 5.0,
    ):
        self.client = client
        self.keys = keys
        self.ttl = ttl_seconds
        self.queue_timeout_ms = int(queue_timeout_seconds * 1000)
        self.lease_ms = int(lease_seconds * 1000)
        self.cluster = is_cluster(client)
        self.lines = SessionLine(client, keys)

    @classmethod
    def from_settings(cls, client, keys: Keys, settings) -> Self:
        return cls(
            client,
            keys,
            settings.executions_ttl,
            queue_timeout_seconds=settings.queue_timeout_seconds,
            lease_seconds=settings.lease_seconds,
        )

    def get(self, execution_id: str) -> ExecutionRecord | None:
        return decoded(self.client.get(self.keys.execution(execution_id)))

    def list(self, workflow_id: str, limit: int = 50) -> builtins.list[ExecutionRecord]:
        """The workflow's latest executions, newest first."""
        ids = self.client.zrevrange(self.keys.workflow_executions(workflow_id), 0, limit - 1)
        if not ids:
            return []
        keys = [self.keys.execution(i) for i in ids]
        raws = self.client.mget_nonatomic(keys) if self.cluster else self.client.mget(keys)
        return [r for r in map(decoded, raws) if r is not None]

    def stored_items(self, execution_id: str) -> builtins.list[dict[str, Any]] | None:
        """The first items stored beside the record (core/task.py), None if they are gone."""
        raw = self.client.get(self.keys.execution_items(execution_id))
        return None if raw is None else json.loads(raw)

    def finished(self, execution_id: str) -> bool:
        """Whether the execution ended (or is gone)."""
        record = self.get(execution_id)
        return record is None or record.finished


def decoded(raw: str | bytes | None) -> ExecutionRecord | None:
    if not raw:
        return None
    try:
        return ExecutionRecord.decode(raw)
    except (RecordError, ValueError, KeyError, TypeError):
        return None  # not a record of ours (a version before this one): as if gone
