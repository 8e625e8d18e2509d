"""A webhook's route and its workflow, read together (core/workflow_store.py `route`), against
a real Redis: what `lookup` and `load` answer one after the other, in one round trip; and a route
the api remembers, which the execution's create confirms in its own step."""

from __future__ import annotations

import pytest
import redis

from core.execution_outcomes import RouteChanged
from core.execution_record import ExecutionRecord
from core.executions import ExecutionStore
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
    found_id, allowed, loaded, check = store.route(method, path)
    assert check is None  # read just now: nothing to confirm
    assert (found_id, allowed) == store.lookup(method, path) == (workflow_id, [method])
    assert loaded is not None and loaded[1] is store.load(workflow_id)[1]  # one parse per version


def test_a_route_nobody_registered_loads_nothing(store):
    _, path = active(store)
    method = store.lookup("GET", path)[1][0]
    other = next(m for m in ("GET", "POST") if m != method)
    assert store.route(other, path) == (None, [method], None, None)
    assert store.route("OPTIONS", path) == (None, [method], None, None)
    assert store.route("GET", "no/such/path") == (None, [], None, None)


def test_a_route_whose_workflow_is_gone_says_so(store, redis_client, keys):
    workflow_id, path = active(store)
    method = store.lookup("GET", path)[1][0]
    redis_client.delete(keys.workflow(workflow_id))
    with pytest.raises(WorkflowNotFound):
        store.route(method, path)


def sent_by(client, name: str) -> int:
    """Commands the connections named `name` have sent (CLIENT LIST's tot-cmds): the test
    session's Redis is shared, so the server's own counts move with other tests' processes."""
    return sum(int(c["tot-cmds"]) for c in client.client_list() if c["name"] == name)


def remembered(store: WorkflowStore, method: str, path: str):
    """The route as the api's next request finds it: from memory, with what it assumed."""
    store.route(method, path)
    route = store.route(method, path, remembered=True)
    assert route.check is not None
    return route


def test_a_remembered_route_costs_no_round_trip_and_names_what_it_assumed(
    redis_url, redis_client, keys
):
    name = f"routes-{keys.prefix.strip(':')}"
    store = WorkflowStore(
        redis.Redis.from_url(redis_url, decode_responses=True, client_name=name),
        keys,
        load_workflow,
    )
    workflow_id, path = active(store)
    method = store.lookup("GET", path)[1][0]
    first = store.route(method, path)
    before = sent_by(redis_client, name)
    assert before > 0  # what the store sent so far is counted
    found_id, allowed, loaded, check = store.route(method, path, remembered=True)
    assert sent_by(redis_client, name) == before  # nothing was sent
    assert (found_id, allowed, loaded) == first[:3]
    assert (check.workflow_id, check.field) == (workflow_id, f"{method} {path}")
    assert store.confirm(check)


@pytest.mark.parametrize("change", ["saved", "deactivated", "moved", "written elsewhere"])
def test_a_create_on_a_stale_route_creates_nothing_and_says_so(store, redis_client, keys, change):
    workflow_id, path = active(store)
    method = store.lookup("GET", path)[1][0]
    check = remembered(store, method, path)[3]
    other = WorkflowStore(redis_client, keys, store.parse)  # another api, or the CLI
    data = other.get_json(workflow_id)
    if change == "saved":
        other.save({**data, "name": "renamed"})
    elif change == "deactivated":
        other.deactivate(workflow_id)
    elif change == "moved":
        redis_client.hset(keys.webhooks(), f"{method} {path}", "someone-else")
    else:
        redis_client.set(keys.workflow(workflow_id), '{"edited": "by hand"}')
    assert not store.confirm(check)
    executions = ExecutionStore(redis_client, keys, 60)
    record = ExecutionRecord("e-stale", workflow_id, mode="webhook")
    with pytest.raises(RouteChanged):
        executions.create(record, route=check)
    assert executions.get("e-stale") is None
    assert redis_client.zscore(keys.queued(), "e-stale") is None


def test_a_create_on_a_route_that_holds_creates_the_execution(store, redis_client, keys):
    workflow_id, path = active(store)
    method = store.lookup("GET", path)[1][0]
    check = remembered(store, method, path)[3]
    executions = ExecutionStore(redis_client, keys, 60)
    assert executions.create(ExecutionRecord("e-fresh", workflow_id), route=check) is None
    assert executions.get("e-fresh") is not None


def test_a_change_made_through_this_store_forgets_what_it_remembered(store):
    workflow_id, path = active(store)
    method = store.lookup("GET", path)[1][0]
    remembered(store, method, path)
    store.deactivate(workflow_id)
    assert store.route(method, path, remembered=True)[:3] == (None, [], None)
