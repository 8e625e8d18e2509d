"""Batched quiet-stream checks against a real Redis: the same answers as one check per stream."""

from __future__ import annotations

import threading

import redis

from api.liveness import LivenessChecks
from core.clock import now_ms
from core.executions import ExecutionStore, Status


def record(execution_id: str, status: str, **extra) -> dict:
    return {"id": execution_id, "workflowId": "w", "status": status, "createdAt": now_ms(), **extra}


def test_checks_at_once_share_a_pipeline_and_each_gets_its_own_answer(redis_url, keys):
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    store = ExecutionStore(client, keys)
    store.create(record("fresh", Status.NEW))
    store.create(record("alive", Status.NEW))
    store.transition(record("alive", Status.RUNNING), {Status.NEW}, lease_ms=60_000)
    store.create(record("lost", Status.NEW))
    store.transition(record("lost", Status.RUNNING), {Status.NEW}, lease_ms=1)
    store.create(record("done", Status.NEW))
    store.transition(record("done", Status.SUCCESS), {Status.NEW})
    checks = LivenessChecks(store, queue_timeout_seconds=300)
    ids = ["fresh", "alive", "lost", "done", "gone", "alive"]
    answers: dict[int, dict | None] = {}

    def ask(i: int) -> None:
        answers[i] = checks.check(ids[i])

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(ids))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    statuses = [answers[i] and answers[i]["status"] for i in range(len(ids))]
    assert statuses == ["new", "running", "crashed", "success", None, "running"]
    assert store.get("lost")["status"] == Status.CRASHED  # marked, as one check alone does


def test_a_redis_failure_reaches_every_waiting_check(keys):
    client = redis.Redis(port=1, socket_connect_timeout=0.5)
    checks = LivenessChecks(ExecutionStore(client, keys), queue_timeout_seconds=300)
    try:
        checks.check("x")
    except redis.ConnectionError:
        return
    raise AssertionError("the check did not raise")
