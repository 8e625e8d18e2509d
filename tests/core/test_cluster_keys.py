"""Keys in a Redis Cluster (`Keys(cluster=True)`): what one command, script or transaction
touches together hashes to one slot; chat memory keeps n8n's names; the default layout is
unchanged; the setting needs a broker of its own."""

from __future__ import annotations

import pytest
from redis.crc import key_slot

from core.keys import Keys, ReservedKeyError
from core.settings import Settings


def slot(key: str) -> int:
    return key_slot(key.encode())


def test_an_executions_keys_share_one_slot():
    keys = Keys(prefix="p:", cluster=True)
    together = [
        keys.execution("e1"),
        keys.execution_events("e1"),
        keys.execution_turn("e1"),
        keys.execution_stop("e1"),
        keys.execution_resume("e1"),
        keys.execution_messages("e1"),
        keys.execution_delivered("e1"),
    ]
    assert {slot(k) for k in together} == {slot(keys.execution("e1"))}
    assert keys.execution_events("e1") == "p:execution:{e1}:events"


def test_the_workflows_and_the_webhook_table_share_one_slot():
    keys = Keys(cluster=True)
    together = [
        keys.workflows(),
        keys.webhooks(),
        keys.workflow("a"),
        keys.workflow("b"),
        keys.workflow_snapshot("a", "d1"),
    ]
    assert len({slot(k) for k in together}) == 1
    assert keys.workflow("a") == "{w}:workflow:a"


def test_executions_spread_over_slots():
    keys = Keys(cluster=True)
    assert len({slot(keys.execution(f"e{i}")) for i in range(100)}) > 90


def test_a_sessions_line_is_tagged_and_memory_keeps_n8ns_names():
    keys = Keys(cluster=True)
    assert keys.session_queue("wf", "s1") == "session:{wf:s1}"
    assert keys.chat("s1") == "chat:s1"
    assert Keys(memory_prefix="", cluster=True).chat("s1") == "s1"
    with pytest.raises(ReservedKeyError):  # a bare session key may not name a workflow key
        Keys(memory_prefix="", cluster=True).chat("{w}:workflows")


def test_one_redis_keeps_the_documented_names():
    keys = Keys(prefix="p:")
    assert keys.execution_events("e1") == "p:execution:e1:events"
    assert keys.workflow("a") == "p:workflow:a"
    assert keys.session_queue("wf", "s1") == "p:session:wf:s1"


def test_a_prefix_with_a_brace_is_refused_in_a_cluster():
    with pytest.raises(ValueError, match="brace"):
        Keys(prefix="{x}:", cluster=True)


def test_the_cluster_setting_needs_a_broker_of_its_own(monkeypatch):
    monkeypatch.setenv("MINI_N8N_REDIS_CLUSTER", "true")
    monkeypatch.setenv("REDIS_URL", "redis://node1:6379/0")
    monkeypatch.delenv("CELERY_BROKER_URL", raising=False)
    with pytest.raises(ValueError, match="CELERY_BROKER_URL"):
        Settings.from_env()
    monkeypatch.setenv("CELERY_BROKER_URL", "amqp://guest:guest@rabbitmq//")
    settings = Settings.from_env()
    assert settings.redis_cluster and Keys.from_settings(settings).cluster


def test_a_hub_conversations_keys_share_one_slot_and_a_hub_runs_too():
    keys = Keys(prefix="p:", cluster=True)
    together = [
        keys.hub_conversation("s1"), keys.hub_messages("s1"), keys.hub_text("s1", "m1"),
        keys.hub_files("s1"), keys.hub_seq("s1"), keys.hub_events("s1"), keys.hub_active("s1"),
        keys.hub_memory("s1"),
    ]  # fmt: skip
    assert {slot(k) for k in together} == {slot(keys.hub_conversation("s1"))}
    assert keys.hub_events("s1") == "p:hub:conversation:{s1}:events"
    assert slot(keys.hub_run("e1")) == slot(keys.hub_relay("e1"))
    assert Keys(prefix="p:").hub_events("s1") == "p:hub:conversation:s1:events"


def test_a_public_session_key_never_names_a_hub_key():
    with pytest.raises(ReservedKeyError):
        Keys(memory_prefix="").chat("hub:conversation:s1")


def test_the_users_and_their_email_index_share_one_slot():
    keys = Keys(cluster=True)
    together = [keys.users(), keys.user("a"), keys.user("b")]
    assert len({slot(k) for k in together}) == 1
    assert keys.user("a") == "{u}:user:a" and Keys().user("a") == "user:a"


@pytest.mark.parametrize("name", ["users", "user:a", "signin:session:x", "{u}:users"])
def test_a_session_key_may_not_name_a_users_key(name):
    with pytest.raises(ReservedKeyError):
        Keys(memory_prefix="").chat(name)
