"""The quiet-stream checks of one api process, batched.

Every stream (and chat socket) that hears nothing for a keepalive interval asks whether its
execution is still alive (core/liveness.py). With thousands of open streams behind a slow model that
was a few Redis round trips per stream every few seconds, a large share of the api's CPU
(docs/performance.md), and it contended with new requests for the small Redis pool. Checks that
arrive within WINDOW seconds of each other now share one pipeline (the record and its liveness keys,
per execution); only an execution that looks lost takes the per-execution path, `reap`, which ends
it once its loss is confirmed.
"""

from __future__ import annotations

import logging
import threading
import time

import redis

from core.execution_record import ExecutionRecord
from core.executions import ExecutionStore
from core.liveness import Verdict
from core.presence import Presence, reap_the_dead

log = logging.getLogger("mini_n8n.api")

WINDOW = 0.05  # seconds: short beside a keepalive interval, long enough to gather a crowd
DEAD_WORKERS_EVERY_SECONDS = 0.5


class _Check:
    __slots__ = ("execution_id", "done", "record", "error")

    def __init__(self, execution_id: str):
        self.execution_id = execution_id
        self.done = threading.Event()
        self.record: ExecutionRecord | None = None
        self.error: Exception | None = None


class LivenessChecks:
    def __init__(self, store: ExecutionStore):
        self.store = store
        self._lock = threading.Lock()
        self._pending: list[_Check] = []

    def check(self, execution_id: str) -> ExecutionRecord | None:
        """The execution's record as it now stands (None if gone), a lost one reaped first;
        raises what Redis raised."""
        check = _Check(execution_id)
        with self._lock:
            self._pending.append(check)
            first = len(self._pending) == 1
        if first:
            threading.Thread(target=self._flush, daemon=True).start()
        check.done.wait()
        if check.error is not None:
            raise check.error
        return check.record

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
        answers: dict[str, ExecutionRecord | None] = {}
        for execution_id, (record, verdict) in self.store.verdicts(ids).items():
            answers[execution_id] = (
                self.store.reap(execution_id) if verdict == Verdict.LOST else record
            )
        for check in batch:
            check.record = answers[check.execution_id]


class DeadWorkerWatch:
    """Twice a second, the executions of workers whose process is gone are reaped
    (core/presence.py). The workers look too, but the one worker of a small deployment cannot
    reap its own: its streams end within two seconds all the same."""

    def __init__(self, store: ExecutionStore, presence: Presence):
        self.store = store
        self.presence = presence
        self._closing = threading.Event()
        self._started = False
        self._lock = threading.Lock()

    def start(self) -> None:
        with self._lock:
            if self._started or not self.presence.enabled:
                return
            self._started = True
        threading.Thread(target=self._loop, name="dead-workers", daemon=True).start()

    def close(self) -> None:
        self._closing.set()

    def _loop(self) -> None:
        while not self._closing.wait(DEAD_WORKERS_EVERY_SECONDS):
            try:
                reap_the_dead(self.store, self.presence)
            except redis.RedisError as err:
                log.debug("could not look for dead workers: %s", err)
            except Exception:  # never stop looking
                log.exception("looking for dead workers failed")
