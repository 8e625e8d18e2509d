"""Batched quiet-stream checks against a real Redis: the same answers as one check per stream,
a lost execution reaped (once its loss is confirmed), a Redis failure heard by every check."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

import api.liveness as api_liveness
from api.liveness import LivenessChecks
from core import liveness
from core.execution_record import ExecutionRecord, Status
from core.executions import ExecutionStore


def create(store: ExecutionStore, execution_id: str, status: Status) -> None:
    record = ExecutionRecord(execution_id, "w")
    store.create(record)
    if status == Status.NEW:
        return
    running = record.next(status=Status.RUNNING, claim="t")
    assert store.claim(record, running)
    if status != Status.RUNNING:
        assert store.finish(running, running.next(status=status), "").written


def test_checks_at_once_share_a_pipeline_and_each_gets_its_own_answer(redis_url, keys, monkeypatch):
    monkeypatch.setattr(liveness, "CONFIRM_MS", 0)
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    store = ExecutionStore(client, keys)
    for execution_id, status in (("fresh", Status.NEW), ("alive", Status.RUNNING),
                                 ("lost", Status.RUNNING), ("done", Status.SUCCESS)):  # fmt: skip
        create(store, execution_id, status)
    client.delete(keys.execution_lease("lost"))
    client.set(keys.execution_suspect("lost"), 0)  # seen lost once already
    checks = LivenessChecks(store)
    ids = ["fresh", "alive", "lost", "done", "gone", "alive"]
    # The batch's window closes once every check has asked, however slowly the threads start
    # on a busy machine: the window's length is not what this test is about.
    all_asked = threading.Event()

    class Pending(list):
        def append(self, check) -> None:
            super().append(check)
            if len(self) == len(ids):
                all_asked.set()

    checks._pending = Pending()
    monkeypatch.setattr(api_liveness, "time", SimpleNamespace(sleep=lambda _s: all_asked.wait(10)))
    answers: dict[int, ExecutionRecord | None] = {}
    pipelines = []
    real_verdicts = store.verdicts
    monkeypatch.setattr(store, "verdicts", lambda ids: pipelines.append(ids) or real_verdicts(ids))

    def ask(i: int) -> None:
        answers[i] = checks.check(ids[i])

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(ids))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    statuses = [answers[i] and answers[i].status for i in range(len(ids))]
    assert statuses == ["new", "running", "crashed", "success", None, "running"]
    assert store.get("lost").status == Status.CRASHED  # ended, as one check alone does
    assert len(pipelines) == 1 and sorted(pipelines[0]) == [
        "alive",
        "done",
        "fresh",
        "gone",
        "lost",
    ]


def test_a_redis_failure_reaches_every_waiting_check(keys):
    # Nothing listens on port 1; no retries, so the failure comes at once (redis-py's default
    # retries with backoff would only make the test wait).
    client = redis.Redis(port=1, socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0))
    checks = LivenessChecks(ExecutionStore(client, keys))
    answers = []

    def ask() -> None:
        with pytest.raises(redis.ConnectionError):
            checks.check("x")
        answers.append(True)

    threads = [threading.Thread(target=ask) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert answers == [True, True, True]
