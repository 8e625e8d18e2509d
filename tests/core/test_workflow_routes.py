"""A webhook's route and its workflow, read together (core/workflow_store.py `route`), against
a real Redis: what `lookup` and `load` answer one after the other, in one round trip."""

from __future__ import annotations

import pytest

from core.workflow_store import WorkflowNotFound, WorkflowStore
from engine.workflow import load_workflow
from tests.e2e.deployment import fresh_ids
from tests.workflows import GREETING, example


@pytest.fixture
def store(redis_client, keys):
    return WorkflowStore(redis_client, keys, load_workflow)


def active(store: WorkflowStore) -> tuple[str, str]:
    workflow = fresh_ids(example(GREETING))
    store.save(workflow)
    store.activate(workflow["id"])
    webhook = next(n for n in workflow["nodes"] if n["type"].endswith(".webhook"))
    return workflow["id"], webhook["parameters"]["path"]


def test_a_route_answers_as_lookup_then_load(store):
    workflow_id, path = active(store)
    method = store.lookup("GET", path)[1][0]
    found_id, allowed, loaded = store.route(method, path)
    assert (found_id, allowed) == store.lookup(method, path) == (workflow_id, [method])
    assert loaded is not None and loaded[1] is store.load(workflow_id)[1]  # one parse per version


def test_a_route_nobody_registered_loads_nothing(store):
    _, path = active(store)
    method = store.lookup("GET", path)[1][0]
    other = next(m for m in ("GET", "POST") if m != method)
    assert store.route(other, path) == (None, [method], None)
    assert store.route("OPTIONS", path) == (None, [method], None)
    assert store.route("GET", "no/such/path") == (None, [], None)


def test_a_route_whose_workflow_is_gone_says_so(store, redis_client, keys):
    workflow_id, path = active(store)
    method = store.lookup("GET", path)[1][0]
    redis_client.delete(keys.workflow(workflow_id))
    with pytest.raises(WorkflowNotFound):
        store.route(method, path)
