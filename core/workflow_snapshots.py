"""Workflow snapshots: a queued task names the exact workflow version it runs instead of carrying
its JSON.

Every Celery message used to carry the whole workflow, and each process paid for it per message:
the api serialized it (JSON, then kombu's base64 envelope), the worker decoded it, kombu wrote the
whole message again to its unacked hash, and the worker's cache dumped it once more to compare
versions. Now the api stores each version it starts once, under a key named by its digest
(`workflow:<id>:snapshot:<digest>`, expiring after `ttl_seconds`, rewritten hourly while in use),
and the task carries `{"id", "digest"}`; a worker reads a version from Redis the first time it
sees it. A version that is edited after the message was sent still runs as it was sent.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from typing import Any

from core.keys import Keys

# Rewritten this often while in use (half the TTL when that is shorter): it never expires.
REWRITE_AFTER_SECONDS = 3600.0


class WorkflowSnapshots:
    def __init__(self, client, keys: Keys, ttl_seconds: int):
        self.client = client
        self.keys = keys
        self.ttl = ttl_seconds
        self._lock = threading.Lock()
        # workflow id -> (the JSON object last seen, its digest, when it was written)
        self._written: dict[str, tuple[dict[str, Any], str, float]] = {}

    def ref(self, raw: dict[str, Any]) -> dict[str, str]:
        """The reference a task carries for this version (api side). The workflow store hands
        out one JSON object per version, so an unchanged version costs no encoding."""
        workflow_id = str(raw.get("id", ""))
        with self._lock:
            seen = self._written.get(workflow_id)
        if (
            seen is not None
            and seen[0] is raw
            and time.monotonic() - seen[2] < min(REWRITE_AFTER_SECONDS, self.ttl / 2)
        ):
            return {"id": workflow_id, "digest": seen[1]}
        text = _canonical(raw)
        digest = _digest(text)
        self.client.set(self.keys.workflow_snapshot(workflow_id, digest), text, ex=self.ttl)
        with self._lock:
            self._written[workflow_id] = (raw, digest, time.monotonic())
        return {"id": workflow_id, "digest": digest}

    def load(self, ref: dict[str, str]) -> dict[str, Any] | None:
        """The JSON of a referenced version (worker side); None once it expired."""
        text = self.client.get(self.keys.workflow_snapshot(ref["id"], ref["digest"]))
        return json.loads(text) if text else None


def ref_of(raw: dict[str, Any]) -> dict[str, str]:
    """The reference `WorkflowSnapshots.ref` hands out for this version, computed without
    storing it: a worker that preloads a version files it under the name tasks will use."""
    return {"id": str(raw.get("id", "")), "digest": _digest(_canonical(raw))}


def _canonical(raw: dict[str, Any]) -> str:
    return json.dumps(raw, sort_keys=True, separators=(",", ":"))


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]
