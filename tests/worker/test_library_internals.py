"""The fence around Celery's and kombu's internals (worker/library_internals.py): the installed
libraries are the ones it was written against, its request is the one Celery builds itself, and
outside those versions (or switched off) every shortcut gives way to the libraries' own path."""

from __future__ import annotations

import json
import logging

import pytest
from celery.concurrency.gevent import TaskPool
from celery.worker.request import Request
from kombu import Connection
from kombu.transport import redis as kombu_redis

from core.execution_record import ExecutionRecord
from core.settings import Settings
from core.task import TaskPayload
from worker import library_internals
from worker.celery_app import TASK_NAME, create_celery, writes_own_messages
from worker.library_internals import (
    REQUEST_SLOTS,
    SUPPORTED,
    fits,
    lean_request_class,
    redis_message,
    why_off,
)


@pytest.fixture
def fresh_switch(monkeypatch):
    """why_off is read once per process: each test reads it anew, and leaves it as it was."""
    why_off.cache_clear()
    monkeypatch.setattr(library_internals, "_told_reasons", set())
    yield monkeypatch
    why_off.cache_clear()


def messages(n: int) -> list:
    """One task message as the api writes it, as kombu's Redis transport hands it to the worker,
    n times."""
    record = ExecutionRecord("e1", "wf1", session_id="s1", mode="webhook")
    payload = TaskPayload(record=record, start_node="Trigger", items=[{"json": {"chatInput": "hi"}}],
                          streaming=True, response_mode="streaming", workflow_ref="v1")  # fmt: skip
    raw = redis_message(payload, "queue")
    with Connection("memory://") as connection:
        channel = connection.default_channel
        return [channel.message_to_python(json.loads(raw)) for _ in range(n)]


def attributes(request) -> dict:
    """Every attribute set on a request: its slots (mangled as Python stores them) and its dict."""
    names = [
        f"_Request{name}" if name.startswith("__") else name
        for name in Request.__slots__
        if name not in ("__weakref__", "__dict__")
    ]
    found = {name: getattr(request, name) for name in names if hasattr(request, name)}
    return {**found, **vars(request)}


def test_the_installed_celery_and_kombu_are_the_ones_the_shortcuts_were_written_against(
    fresh_switch,
):
    fresh_switch.delenv(library_internals.SWITCH, raising=False)
    assert why_off() is None
    assert tuple(Request.__slots__) == REQUEST_SLOTS
    pool = TaskPool(limit=1)
    pool.on_start()
    assert fits(lean_request_class(), pool) is None
    assert callable(kombu_redis.Channel._create_client)


def test_the_short_paths_request_is_the_one_celery_builds_from_the_same_message():
    """Every slot and attribute Celery's own __init__ sets, with the same values: a Celery that
    adds one, or sets one otherwise, fails here before it meets a consumer restart."""
    app = create_celery(Settings(broker_url="memory://"))
    task = app.tasks[TASK_NAME]
    options = {"hostname": "w@h", "app": app, "task": task, "connection_errors": (OSError,)}
    first, second = messages(2)
    celerys = Request(first, **options)
    ours = lean_request_class()(second, json.loads(second.body), **options)
    expected = attributes(celerys)
    got = attributes(ours)
    assert got.pop("received_told") is False
    del expected["_message"], got["_message"]  # two decodings of one message
    assert got == expected
    assert ours.info() == celerys.info() and str(ours) == str(celerys)


@pytest.mark.parametrize(
    ("package", "installed"), [("celery", "5.8.0"), ("kombu", "5.6.1"), ("celery", "6.0.0")]
)
def test_another_version_turns_every_shortcut_off_and_says_why_once(
    fresh_switch, caplog, package, installed
):
    real = library_internals.metadata.version
    fresh_switch.setattr(
        library_internals.metadata,
        "version",
        lambda name: installed if name == package else real(name),
    )
    url = "redis://redis:6379/0"
    with caplog.at_level(logging.WARNING, logger="mini_n8n.worker"):
        assert not writes_own_messages(Settings(redis_url=url, broker_url=url))
        assert library_internals.install_broker_client() is False
    reason = (
        f"{package} {installed} is installed; they were written against {SUPPORTED[package][0]}.x"
    )
    assert why_off() == reason
    assert [r.getMessage() for r in caplog.records] == [
        f"library shortcuts off, the libraries' own paths run: {reason}"
    ]


def test_the_switch_turns_the_shortcuts_off(fresh_switch):
    fresh_switch.setenv(library_internals.SWITCH, "off")
    url = "redis://redis:6379/0"
    assert not writes_own_messages(Settings(redis_url=url, broker_url=url))
    assert why_off() == "MINI_N8N_LIBRARY_SHORTCUTS is off"
