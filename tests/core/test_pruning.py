"""Pruning the execution history (core/pruning.py) against a real Redis: n8n's count and age
rules, finished executions only, every key of a pruned execution gone, bounded rounds."""

from __future__ import annotations

import pytest
from redis.crc import key_slot

from core.chat_node_message import ChatNodeMessage
from core.clock import now_ms
from core.execution_record import ExecutionRecord, Status, header
from core.executions import ExecutionStore
from core.keys import Keys, history_member
from core.pruning import BACKLOG_EVERY_SECONDS, PRUNE_EVERY_SECONDS, Pruner, Rules, execution_keys
from core.waiting import WaitingStore

HOUR_MS = 3600 * 1000


def ago(ms: int) -> int:
    """A time `ms` before now (ms since the epoch)."""
    return now_ms() - ms


@pytest.fixture
def store(redis_client, keys):
    return ExecutionStore(redis_client, keys, queue_timeout_seconds=300, lease_seconds=5)


def created(store: ExecutionStore, execution_id: str, at: int) -> ExecutionRecord:
    """A new execution created `at` ms into the last minute (or at `at`, a time since the epoch),
    as the history's index says."""
    at = at if at > HOUR_MS else ago(60_000) + at
    record = ExecutionRecord(execution_id, "w1", created_at=at, queued_at=at)
    store.create(record)
    store.client.zadd(store.keys.executions_history(), {history_member(execution_id, "w1"): at})
    store.client.zadd(store.keys.workflow_executions("w1"), {execution_id: at})
    return record


def running(store: ExecutionStore, execution_id: str, at: int = 1) -> ExecutionRecord:
    record = created(store, execution_id, at)
    claimed = record.next(status=Status.RUNNING, claim="t1", started_at=at)
    assert store.claim(record, claimed)
    return claimed


def finished(store: ExecutionStore, execution_id: str, at: int = 1, stopped: int | None = None):
    """A successful execution created at `at` (see `created`) that stopped at `stopped` (now
    unless given), with a message sent (a key beside its record)."""
    claimed = running(store, execution_id, at)
    WaitingStore(store).send_message(execution_id, ChatNodeMessage("hi", False))
    final = claimed.next(status=Status.SUCCESS, stopped_at=stopped or now_ms())
    assert store.finish(claimed, final, "").written
    return final


def waiting(store: ExecutionStore, execution_id: str, at: int = 1) -> ExecutionRecord:
    claimed = running(store, execution_id, at)
    paused = claimed.next(status=Status.WAITING)
    assert store.pause(claimed, paused, "{}", "a1")[0] == "paused"
    return paused


def pruner(store: ExecutionStore, batch: int = 500, **rules) -> Pruner:
    return Pruner(store, Rules(**rules), batch=batch)


def history(store: ExecutionStore) -> list[str]:
    members = store.client.zrange(store.keys.executions_history(), 0, -1)
    return [m.split(" ")[0] for m in members]


def listed(store: ExecutionStore) -> list[str]:
    return sorted(r.id for r in store.list("w1", 1000))


def test_a_create_enters_the_execution_in_the_history_with_its_workflow(store, keys, redis_client):
    store.create(ExecutionRecord("e1", "wf:1", created_at=5, queued_at=5))
    assert redis_client.zrange(keys.executions_history(), 0, -1) == ["e1 wf:1"]


def test_beyond_the_max_count_the_oldest_finished_executions_go_with_every_key(store, keys):
    for i in range(5):
        finished(store, f"e{i}", at=i + 1)
    done = pruner(store, max_count=3).run()
    assert (done.deleted, done.gone) == (2, 0)
    assert history(store) == ["e2", "e3", "e4"]
    assert listed(store) == ["e2", "e3", "e4"]
    for gone in ("e0", "e1"):
        assert not store.client.exists(*execution_keys(keys, gone))
    assert store.client.exists(keys.execution_messages("e2"))


def test_unfinished_executions_count_but_are_never_pruned(store, keys):
    waiting(store, "old-wait", at=1)
    finished(store, "f0", at=2)
    running(store, "old-run", at=3)
    created(store, "old-new", at=4)
    finished(store, "f1", at=5)
    finished(store, "f2", at=6)
    pruner(store, max_count=3).run()
    # six executions, three may stay: of the three oldest, only f0 finished (n8n's rule too)
    assert history(store) == ["old-wait", "old-run", "old-new", "f1", "f2"]
    assert store.client.exists(keys.execution_resume("old-wait"), keys.execution_lease("old-run"))
    assert store.get("old-wait").status == Status.WAITING


def test_the_delete_step_itself_leaves_an_unfinished_execution_alone(store, keys, monkeypatch):
    """The step that deletes reads the record again, in the same Redis step as the delete: an
    execution still new, running or waiting keeps every key even when a round chose it."""
    waiting(store, "old-wait", at=1)
    running(store, "old-run", at=2)
    created(store, "old-new", at=3)
    careless = pruner(store, max_count=1)
    monkeypatch.setattr(careless, "_selected", lambda raw, over_count, cutoff_ms: header(raw).rev)
    careless.run()
    assert history(store) == ["old-wait", "old-run", "old-new"]
    assert [store.get(e).status for e in ("old-wait", "old-run", "old-new")] == [
        Status.WAITING,
        Status.RUNNING,
        Status.NEW,
    ]
    assert (
        store.client.exists(
            keys.execution_resume("old-wait"),
            keys.execution_lease("old-run"),
            keys.execution_queued("old-new"),
        )
        == 3
    )


def test_finished_executions_older_than_the_max_age_go_counted_from_when_they_stopped(store):
    finished(store, "stopped-long-ago", at=ago(5 * HOUR_MS), stopped=ago(3 * HOUR_MS))
    finished(store, "created-long-ago", at=ago(5 * HOUR_MS), stopped=ago(HOUR_MS // 2))
    finished(store, "recent", at=ago(1000), stopped=ago(500))
    pruner(store, max_age_ms=2 * HOUR_MS, max_count=0).run()
    assert history(store) == ["created-long-ago", "recent"]


def test_an_entry_whose_record_expired_only_leaves_the_indexes(store, keys):
    finished(store, "e1")
    finished(store, "e2")
    store.client.delete(keys.execution("e1"))  # its time to live ran out
    done = pruner(store, max_count=1).run()
    assert (done.deleted, done.gone) == (0, 1)
    assert history(store) == listed(store) == ["e2"]


def test_with_pruning_off_nothing_is_deleted_but_entries_of_expired_records_go(store, keys):
    for i in range(3):
        finished(store, f"e{i}", at=ago(3 * HOUR_MS) + i, stopped=ago(3 * HOUR_MS))
    store.client.delete(keys.execution("e0"))
    done = pruner(store, prune=False, max_count=1, ttl_ms=HOUR_MS).run()
    assert (done.deleted, done.gone) == (0, 1)
    assert history(store) == ["e1", "e2"]


def test_a_round_examines_at_most_its_batch_and_a_backlog_takes_the_next_rounds(store):
    for i in range(7):
        finished(store, f"e{i}", at=i + 1)
    prunes = pruner(store, batch=2, max_count=2)
    assert [prunes.run().deleted for _ in range(4)] == [2, 2, 1, 0]
    assert history(store) == ["e5", "e6"]


def test_waits_at_the_head_of_the_history_do_not_hold_the_rest_back(store):
    waiting(store, "w0", at=1)
    waiting(store, "w1", at=2)
    for i in range(3):
        finished(store, f"f{i}", at=10 + i)
    prunes = pruner(store, batch=2, max_count=1)
    rounds = [prunes.run() for _ in range(3)]
    assert [(r.deleted, r.passed) for r in rounds] == [(0, 2), (2, 0), (0, 2)]
    assert history(store) == ["w0", "w1", "f2"]


def test_a_round_runs_every_ten_seconds_and_each_second_while_a_backlog_lasts(store):
    for i in range(4):
        finished(store, f"e{i}", at=i + 1)
    prunes = pruner(store, batch=2, max_count=1)
    clock = [100.0]
    assert prunes.run_if_due(lambda: clock[0]).deleted == 2  # a full window: a backlog
    clock[0] += BACKLOG_EVERY_SECONDS - 0.01
    assert prunes.run_if_due(lambda: clock[0]) is None
    clock[0] += 0.01
    assert prunes.run_if_due(lambda: clock[0]).deleted == 1
    finished(store, "e4", at=5)
    clock[0] += BACKLOG_EVERY_SECONDS
    assert prunes.run_if_due(lambda: clock[0]) is None  # no backlog any more
    clock[0] += PRUNE_EVERY_SECONDS
    assert prunes.run_if_due(lambda: clock[0]).deleted == 1


def test_a_round_with_nothing_to_prune_writes_nothing(store, keys):
    finished(store, "e1")
    before = set(store.client.scan_iter(match=f"{keys.prefix}*"))
    assert pruner(store, max_count=5).run_if_due() is None
    assert set(store.client.scan_iter(match=f"{keys.prefix}*")) == before


def test_one_worker_prunes_at_a_time_and_two_rounds_at_once_delete_each_execution_once(store):
    for i in range(4):
        finished(store, f"e{i}", at=i + 1)
    first, second = pruner(store, max_count=2), pruner(store, max_count=2)
    assert first.run_if_due().deleted == 2
    for i in range(4, 6):
        finished(store, f"e{i}", at=i + 1)
    assert second.run_if_due() is None  # work to do, but the lock is the first one's
    assert len(history(store)) == 4
    rounds = [first.run(), second.run()]
    assert sum(r.deleted for r in rounds) == 2
    assert history(store) == ["e4", "e5"]


def test_a_pruned_executions_keys_share_one_slot_in_a_cluster():
    keys = Keys(prefix="p:", cluster=True)
    slots = {key_slot(k.encode()) for k in execution_keys(keys, "e1")}
    assert slots == {key_slot(keys.execution("e1").encode())}
