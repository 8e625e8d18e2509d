"""What the api imports and activates at its start: the user's folder (MINI_N8N_WORKFLOWS_DIR)
always, the bundled examples only with MINI_N8N_DEMO. The Flask app against a real valkey; the
same through the real image is in tests/compose."""

from __future__ import annotations

import json

import pytest
import redis

from api.app import create_app
from core.keys import Keys
from core.settings import Settings
from core.workflow_store import WorkflowStore
from engine.workflow import load_workflow
from tests.workflows import EXAMPLES, GREETING, example


@pytest.fixture
def store(redis_url, keys):
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield WorkflowStore(client, keys, load_workflow)
    client.close()


def active_ids(store: WorkflowStore) -> set[str]:
    return {w["id"] for w in store.list() if w.get("active")}


def start_api(redis_url: str, keys: Keys, **settings) -> None:
    create_app(settings=Settings(redis_url=redis_url, key_prefix=keys.prefix, **settings))


def users_folder(tmp_path):
    workflow = example(GREETING)
    workflow["id"] = "mine"
    workflow["nodes"][0]["parameters"]["path"] = "mine"
    (tmp_path / "mine.json").write_text(json.dumps(workflow))
    return tmp_path


def test_without_demo_only_the_users_folder_is_imported_and_activated(
    redis_url, keys, store, tmp_path
):
    start_api(redis_url, keys, workflows_dir=str(users_folder(tmp_path)))
    assert active_ids(store) == {"mine"}


def test_without_demo_and_an_empty_folder_no_workflow_is_active(redis_url, keys, store, tmp_path):
    start_api(redis_url, keys, workflows_dir=str(tmp_path))
    assert store.list() == []


def test_demo_imports_and_activates_the_bundled_examples_beside_the_users_workflows(
    redis_url, keys, store, tmp_path
):
    start_api(
        redis_url,
        keys,
        workflows_dir=str(users_folder(tmp_path)),
        demo=True,
        examples_dir=str(EXAMPLES),
    )
    bundled = {json.loads(path.read_text())["id"] for path in EXAMPLES.glob("*.json")}
    assert active_ids(store) == bundled | {"mine"}


def test_demo_is_off_unless_the_environment_turns_it_on(monkeypatch):
    monkeypatch.delenv("MINI_N8N_DEMO", raising=False)
    assert Settings.from_env().demo is False
    monkeypatch.setenv("MINI_N8N_DEMO", "true")
    assert Settings.from_env().demo is True
    monkeypatch.setenv("MINI_N8N_DEMO", "ture")
    with pytest.raises(ValueError, match="MINI_N8N_DEMO must be true or false, not 'ture'"):
        Settings.from_env()
