"""Workflow snapshots: a task names a stored version; the api writes each version once."""

from __future__ import annotations

import copy

import pytest
import redis

from core.workflow_snapshots import WorkflowSnapshots
from tests.workflows import REDIS_CHAT, example
from worker.workflow_cache import SnapshotGone, WorkflowCache


class CountingRedis(redis.Redis):
    sets = 0

    def set(self, *args, **kwargs):
        CountingRedis.sets += 1
        return super().set(*args, **kwargs)


@pytest.fixture
def snapshots(redis_url, keys):
    CountingRedis.sets = 0
    client = CountingRedis.from_url(redis_url, decode_responses=True)
    return WorkflowSnapshots(client, keys, ttl_seconds=60)


def test_a_version_is_stored_once_and_read_back_as_it_was(snapshots):
    raw = example(REDIS_CHAT)
    ref = snapshots.ref(raw)
    assert snapshots.ref(raw) == ref and CountingRedis.sets == 1
    assert snapshots.load(ref) == raw


def test_an_edited_version_gets_its_own_reference_and_the_old_one_still_loads(snapshots):
    raw = example(REDIS_CHAT)
    first = snapshots.ref(raw)
    edited = copy.deepcopy(raw)
    edited["name"] = "edited"
    second = snapshots.ref(edited)
    assert second["id"] == first["id"] and second["digest"] != first["digest"]
    assert snapshots.load(first) == raw and snapshots.load(second) == edited


def test_the_worker_loads_a_version_once_and_fails_clearly_when_it_is_gone(snapshots):
    raw = example(REDIS_CHAT)
    ref = snapshots.ref(raw)
    reads = []

    def read(r):
        reads.append(r)
        return snapshots.load(r)

    cache = WorkflowCache()
    assert cache.get_ref(ref, read) is cache.get_ref(ref, read)
    assert len(reads) == 1
    with pytest.raises(SnapshotGone):
        WorkflowCache().get_ref({"id": ref["id"], "digest": "0" * 32}, read)


def test_a_worker_preloads_the_active_versions_under_the_references_the_api_sends(snapshots, keys):
    from core.executions import ExecutionStore
    from core.workflow_store import WorkflowStore
    from engine.workflow import load_workflow
    from worker.warmup import preload_workflows

    saved = WorkflowStore(snapshots.client, keys, load_workflow)
    saved.save(example(REDIS_CHAT))
    saved.activate(example(REDIS_CHAT)["id"])
    raw, _ = saved.load(example(REDIS_CHAT)["id"])  # what the api starts it with
    cache = WorkflowCache()
    preload_workflows(ExecutionStore(snapshots.client, keys), cache)

    def never_read(ref):
        raise AssertionError("a preloaded version was read again")

    assert cache.get_ref(snapshots.ref(raw), never_read).id == raw["id"]
