"""Save settings (core/retention.py): n8n's rules for which finished executions are kept, what
an unsaved one keeps for its readers, and the settings that map n8n's names."""

from __future__ import annotations

import pytest

from core.chat_node_message import ChatNodeMessage
from core.execution_record import ExecutionRecord, Status
from core.executions import ExecutionStore
from core.results import FinalResult
from core.retention import UNSAVED_GRACE_SECONDS, Retention, SaveSettings
from core.settings import Settings
from core.waiting import WaitingStore

ALL = SaveSettings()


@pytest.mark.parametrize(
    ("workflow_settings", "expected"),
    [
        (None, SaveSettings(True, True, True)),
        ({}, SaveSettings(True, True, True)),
        ({"saveDataSuccessExecution": "none"}, SaveSettings(False, True, True)),
        ({"saveDataErrorExecution": "none"}, SaveSettings(True, False, True)),
        ({"saveDataSuccessExecution": "DEFAULT"}, SaveSettings(True, True, True)),
        ({"saveDataSuccessExecution": "sometimes"}, SaveSettings(False, True, True)),
        ({"saveManualExecutions": False}, SaveSettings(True, True, False)),
        ({"saveManualExecutions": "DEFAULT"}, SaveSettings(True, True, True)),
    ],
)
def test_a_workflows_save_settings_are_read_as_n8n_reads_them(workflow_settings, expected):
    assert ALL.of_workflow(workflow_settings) == expected


def test_the_global_defaults_fill_in_what_a_workflow_leaves_to_them():
    defaults = SaveSettings(success=False, error=True, manual=False)
    assert defaults.of_workflow({"saveDataErrorExecution": "none"}) == SaveSettings(
        False, False, False
    )
    assert defaults.of_workflow({"saveDataSuccessExecution": "all"}).success


def test_a_manual_run_follows_the_manual_setting_only():
    kept = SaveSettings(success=False, error=False, manual=True)
    manual = ExecutionRecord("e1", "w1", status=Status.SUCCESS, mode="manual")
    assert kept.keeps(manual)
    assert not SaveSettings(manual=False).keeps(manual)


def test_n8ns_names_set_pruning_and_the_ttl_follows_the_max_age(monkeypatch):
    monkeypatch.setenv("EXECUTIONS_DATA_MAX_AGE", "2")
    monkeypatch.setenv("EXECUTIONS_DATA_PRUNE_MAX_COUNT", "50")
    monkeypatch.setenv("EXECUTIONS_DATA_SAVE_ON_SUCCESS", "none")
    settings = Settings.from_env()
    assert settings.executions_ttl == 7200
    assert settings.executions_prune_max_count == 50
    assert SaveSettings.defaults(settings) == SaveSettings(success=False)
    assert Settings().executions_ttl == 336 * 3600  # n8n's 336 hours by default


def test_mini_n8n_executions_ttl_still_sets_the_keys_time_to_live(monkeypatch):
    monkeypatch.setenv("MINI_N8N_EXECUTIONS_TTL", "600")
    monkeypatch.setenv("EXECUTIONS_DATA_MAX_AGE", "2")
    settings = Settings.from_env()
    assert (settings.executions_ttl, settings.executions_max_age_hours) == (600, 2.0)


@pytest.mark.parametrize(
    ("name", "value"),
    [("EXECUTIONS_DATA_SAVE_ON_ERROR", "some"), ("EXECUTIONS_DATA_MAX_AGE", "0")],
)
def test_a_bad_retention_setting_stops_the_start_saying_which(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=name):
        Settings.from_env()


# --- an unsaved execution's end, in Redis ------------------------------------------------------
@pytest.fixture
def store(redis_client, keys):
    return ExecutionStore(redis_client, keys, ttl_seconds=3600)


def ended(store: ExecutionStore, status: Status = Status.SUCCESS, mode: str = "webhook"):
    """A finished execution with run data of two nodes and a chat message sent."""
    record = ExecutionRecord("e1", "w1", mode=mode, created_at=1, queued_at=1)
    store.create(record)
    running = record.next(status=Status.RUNNING, claim="t1")
    assert store.claim(record, running)
    WaitingStore(store).send_message("e1", ChatNodeMessage("hi", False))
    store.client.set(store.keys.execution_token("e1"), "tok", ex=3600)
    run_data = {
        "Trigger": [{"data": {"main": [[{"json": {"chatInput": "x" * 2000}}]]}}],
        "Agent": [{"data": {"main": [[{"json": {"output": "the answer"}}]]}}],
    }
    final = running.next(status=status, stopped_at=2, last_node_executed="Agent",
                         run_data=run_data, events=3)  # fmt: skip
    assert store.finish(running, final, "").written
    return final


def test_an_unsaved_success_keeps_only_what_its_readers_need_for_a_short_while(store, keys):
    retention = Retention(store, Settings())
    final = ended(store)
    assert retention.ended(final, lambda: {"saveDataSuccessExecution": "none"})
    kept = store.get("e1")
    assert kept is not None and list(kept.run_data) == ["Agent"]
    assert FinalResult.from_record(kept, 2).output == {"output": "the answer"}
    for key in (keys.execution("e1"), keys.execution_messages("e1"), keys.execution_token("e1")):
        assert 0 < store.client.ttl(key) <= UNSAVED_GRACE_SECONDS
    assert store.list("w1") == []
    assert store.client.zcard(keys.executions_history()) == 0


def test_a_saved_end_is_left_as_it_is(store, keys):
    retention = Retention(store, Settings())
    final = ended(store, Status.ERROR)
    assert not retention.ended(final, lambda: {"saveDataSuccessExecution": "none"})
    assert store.get("e1") == final
    assert store.client.ttl(keys.execution("e1")) > 3000
    assert [r.id for r in store.list("w1")] == ["e1"]


def test_an_unsaved_manual_run_stays_whole_for_the_hard_delete_buffer(store, keys):
    retention = Retention(store, Settings(executions_hard_delete_buffer_hours=0.5))
    final = ended(store, mode="manual")
    assert retention.ended(final, lambda: {"saveManualExecutions": False})
    assert store.get("e1") == final
    assert 1700 < store.client.ttl(keys.execution("e1")) <= 1800
    assert store.list("w1") == []


def test_a_record_changed_since_the_end_is_not_touched(store, keys):
    retention = Retention(store, Settings())
    final = ended(store)
    retention.retire(final.next())  # a revision that is not the stored one
    assert store.get("e1") == final
    assert store.client.ttl(keys.execution("e1")) > 3000


def test_settings_that_cannot_be_read_keep_the_execution(store):
    retention = Retention(store, Settings())
    final = ended(store)

    def gone():
        raise LookupError("the workflow version this execution was started with is gone")

    assert not retention.ended(final, gone)
    assert store.get("e1") == final
