"""The quiet-stream checks of one api process, batched.

Every stream that hears nothing for a keepalive interval asks whether its execution is still
alive (core/executions.py, `mark_crashed_if_lost`): its record, and its lease if it runs. With
thousands of open streams behind a slow model that was two Redis round trips per stream every
few seconds, a fifth of the api's CPU at 4,000 streams, and it contended with new requests for
the small Redis pool. Checks that arrive within WINDOW seconds of each other now share one
pipeline (a GET and a ZSCORE per execution); only an execution that looks lost takes the
per-execution path, which marks it crashed.

The same pipeline tells whether a worker holds the execution's lease: a finished execution's
worker keeps it until its final event is published (worker/execution_run.py).
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from core.clock import now_ms
from core.executions import FINISHED, ExecutionStore, Status

WINDOW = 0.05  # seconds: short beside a keepalive interval, long enough to gather a crowd


class _Check:
    def __init__(self, execution_id: str):
        self.execution_id = execution_id
        self.done = threading.Event()
        self.record: dict[str, Any] | None = None
        self.leased = False  # a worker holds the execution's lease (it has not expired)
        self.error: Exception | None = None


class LivenessChecks:
    def __init__(self, store: ExecutionStore, queue_timeout_seconds: float):
        self.store = store
        self.queue_timeout = queue_timeout_seconds
        self._lock = threading.Lock()
        self._pending: list[_Check] = []

    def check(self, execution_id: str) -> dict[str, Any] | None:
        """What `mark_crashed_if_lost` answers (the record as it now stands, None if gone);
        raises what Redis raised."""
        return self._submit(execution_id).record

    def leased(self, execution_id: str) -> bool:
        """Whether a worker holds the execution's lease; raises what Redis raised."""
        return self._submit(execution_id).leased

    def _submit(self, execution_id: str) -> _Check:
        """Join (or start) the batch being gathered and wait for its answers."""
        check = _Check(execution_id)
        with self._lock:
            self._pending.append(check)
            first = len(self._pending) == 1
        if first:
            threading.Thread(target=self._flush, daemon=True).start()
        check.done.wait()
        if check.error is not None:
            raise check.error
        return check

    def _flush(self) -> None:
        time.sleep(WINDOW)
        with self._lock:
            batch, self._pending = self._pending, []
        try:
            self._answer(batch)
        except Exception as err:  # every waiter hears it, none hangs
            for check in batch:
                check.error = check.error or err
        finally:
            for check in batch:
                check.done.set()

    def _answer(self, batch: list[_Check]) -> None:
        ids = list(dict.fromkeys(c.execution_id for c in batch))
        keys = self.store.keys
        pipe = self.store.client.pipeline(transaction=False)
        for execution_id in ids:
            pipe.get(keys.execution(execution_id))
            pipe.zscore(keys.running(), execution_id)
        replies = pipe.execute()
        answers: dict[str, tuple[dict[str, Any] | None, bool]] = {}
        for i, execution_id in enumerate(ids):
            raw, deadline = replies[2 * i], replies[2 * i + 1]
            record = json.loads(raw) if raw else None
            if not self._alive(record, deadline):
                record = self.store.mark_crashed_if_lost(execution_id, self.queue_timeout)
            answers[execution_id] = record, deadline is not None and deadline >= now_ms()
        for check in batch:
            check.record, check.leased = answers[check.execution_id]

    def _alive(self, record: dict[str, Any] | None, deadline: float | None) -> bool:
        """True when the record shows no loss (gone or finished counts: nothing to mark)."""
        if record is None or record["status"] in FINISHED:
            return True
        if record["status"] == Status.RUNNING:
            return deadline is not None and deadline >= now_ms()
        waited = (now_ms() - int(record.get("createdAt", now_ms()))) / 1000
        return waited < self.queue_timeout
