"""A workflows folder imported at every start (`mini-n8n up`, the api's MINI_N8N_WORKFLOWS_DIR)
keeps what people changed since: against a real valkey, with the store the api uses."""

from __future__ import annotations

import json

import pytest
import redis

from core.folder_import import import_folder
from core.workflow_store import WorkflowStore
from engine.workflow import load_workflow
from tests.workflows import GREETING, example


@pytest.fixture
def store(redis_url, keys):
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield WorkflowStore(client, keys, load_workflow)
    client.close()


@pytest.fixture
def greeting():
    workflow = example(GREETING)
    workflow["id"], workflow["name"] = "greet01", "Greeting"
    workflow["nodes"][0]["parameters"]["path"] = "greet01"
    return workflow


def write(folder, workflow) -> None:
    (folder / "greeting.json").write_text(json.dumps(workflow))


def run(store, folder) -> list[str]:
    return list(import_folder(store, folder))


def edited(store, workflow_id: str, name: str) -> dict:
    """A save as the editor makes it: the stored JSON with a change, its versionId named."""
    data = store.get_json(workflow_id)
    data["name"] = name
    store.save(data, expected_version=data["versionId"])
    return store.get_json(workflow_id)


def test_the_first_start_imports_and_activates_and_the_next_writes_nothing(
    store, greeting, tmp_path
):
    write(tmp_path, greeting)
    assert run(store, tmp_path) == ['imported "Greeting" as greet01', "activated greet01"]
    first = store.get_json("greet01")
    assert first["active"] is True
    assert run(store, tmp_path) == ['unchanged: "Greeting" (greet01)']
    assert store.get_json("greet01") == first  # the same versionId: an open editor can save


def test_a_workflow_edited_after_its_import_is_kept_and_the_line_says_how_to_take_the_file(
    store, greeting, tmp_path
):
    write(tmp_path, greeting)
    run(store, tmp_path)
    mine = edited(store, "greet01", "Greeting (mine)")
    assert run(store, tmp_path) == [
        'kept "Greeting" (greet01) as it was changed after its import; '
        f"`mini-n8n import {tmp_path / 'greeting.json'}` imports the file over it"
    ]
    assert store.get_json("greet01") == mine
    greeting["nodes"][0]["parameters"]["responseMode"] = "onReceived"  # the file changes too
    write(tmp_path, greeting)
    assert run(store, tmp_path)[0].startswith('kept "Greeting" (greet01)')
    assert store.get_json("greet01") == mine


def test_a_changed_file_replaces_a_workflow_nobody_edited_and_keeps_it_deactivated(
    store, greeting, tmp_path
):
    write(tmp_path, greeting)
    run(store, tmp_path)
    store.deactivate("greet01")  # the active state is not an edit of the workflow
    greeting["name"] = "Greeting v2"
    write(tmp_path, greeting)
    assert run(store, tmp_path) == ['updated "Greeting v2" (greet01) from greeting.json']
    stored = store.get_json("greet01")
    assert stored["name"] == "Greeting v2" and stored["active"] is False
    assert run(store, tmp_path) == ['unchanged: "Greeting v2" (greet01)']


def test_the_file_imported_again_by_hand_counts_as_imported(store, greeting, tmp_path):
    write(tmp_path, greeting)
    run(store, tmp_path)
    edited(store, "greet01", "Greeting (mine)")
    store.import_file(tmp_path / "greeting.json")  # what the kept line says to run
    assert run(store, tmp_path) == ['unchanged: "Greeting" (greet01)']
    greeting["name"] = "Greeting v2"
    write(tmp_path, greeting)
    assert run(store, tmp_path) == ['updated "Greeting v2" (greet01) from greeting.json']


def test_a_workflow_deleted_after_its_import_stays_deleted(store, greeting, tmp_path):
    write(tmp_path, greeting)
    run(store, tmp_path)
    store.delete("greet01")
    assert run(store, tmp_path) == [
        'not imported "Greeting" (greet01) again: it was deleted since its import '
        f"(`mini-n8n import {tmp_path / 'greeting.json'}` imports the file over it)"
    ]
    assert store.get_json("greet01") is None


def test_a_workflow_without_an_id_is_found_again_instead_of_copied(store, greeting, tmp_path):
    del greeting["id"]
    write(tmp_path, greeting)
    first = run(store, tmp_path)
    assert first[0].startswith('imported "Greeting" as ')
    workflow_id = first[0].rsplit(" ", 1)[1]
    assert run(store, tmp_path) == [f'unchanged: "Greeting" ({workflow_id})']
    assert [w["id"] for w in store.list()] == [workflow_id]


def test_a_workflow_stored_before_imports_were_noted_is_kept_unless_it_is_the_files(
    store, greeting, tmp_path
):
    """What an earlier `up` stored (it noted nothing): the file's content is adopted as
    imported; anything else is somebody's and stays."""
    store.save(dict(greeting))
    write(tmp_path, greeting)
    assert run(store, tmp_path) == ['unchanged: "Greeting" (greet01)']
    other = dict(greeting, id="other01", name="Other")
    other["nodes"] = json.loads(json.dumps(greeting["nodes"]))
    other["nodes"][0]["parameters"]["path"] = "other01"
    store.save(dict(other, name="Other (changed)"))
    (tmp_path / "other.json").write_text(json.dumps(other))
    assert run(store, tmp_path)[1].startswith('kept "Other" (other01) as it was changed')
