"""The Celery app: building one (as the api does to send tasks) connects no worker signal; the
worker connects them, and its task and signals reach the runtime kept on the app."""

from __future__ import annotations

import subprocess
import sys

import pytest
from celery import signals

from core.settings import Settings
from worker.celery_app import TASK_NAME, connect_worker_signals, create_celery

WORKER_SIGNALS = (signals.worker_ready, signals.worker_shutting_down, signals.worker_shutdown)


class FakeRuntime:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def run(self, payload):
        self.calls.append(("run", payload))
        return "success"

    def warm(self):
        self.calls.append(("warm",))

    def start_background(self):
        self.calls.append(("start_background",))

    def stop_all_after(self, grace_seconds):
        self.calls.append(("stop_all_after", grace_seconds))

    def close(self):
        self.calls.append(("close",))


@pytest.fixture
def app():
    return create_celery(Settings(broker_url="memory://", shutdown_grace_seconds=3.0))


@pytest.fixture
def restore_signals(monkeypatch):
    """Whatever a test connects is gone after it: Celery's signals are process-wide."""
    for signal in WORKER_SIGNALS:
        monkeypatch.setattr(signal, "receivers", list(signal.receivers))


def test_building_the_app_connects_no_worker_signal():
    before = [len(s.receivers) for s in WORKER_SIGNALS]
    create_celery(Settings(broker_url="memory://"))
    assert [len(s.receivers) for s in WORKER_SIGNALS] == before


def test_building_the_app_builds_no_runtime(app):
    assert app.runtime is None


def test_the_task_hands_its_payload_to_the_runtime_on_the_app(app):
    app.runtime = FakeRuntime()
    assert app.tasks[TASK_NAME]({"record": {"id": "e1"}}) == "success"
    assert app.runtime.calls == [("run", {"record": {"id": "e1"}})]


def test_the_worker_signals_start_stop_and_close_the_runtime(app, restore_signals):
    app.runtime = FakeRuntime()
    connect_worker_signals(app)
    signals.worker_ready.send(sender=None)
    signals.worker_shutting_down.send(sender=None, sig="SIGTERM", how="Warm", exitcode=0)
    signals.worker_shutdown.send(sender=None)
    assert app.runtime.calls == [
        ("warm",),
        ("start_background",),
        ("stop_all_after", 3.0),
        ("close",),
    ]


def test_a_shutdown_before_any_runtime_was_built_builds_none(app, restore_signals):
    connect_worker_signals(app)
    signals.worker_shutting_down.send(sender=None, sig="SIGTERM", how="Warm", exitcode=0)
    signals.worker_shutdown.send(sender=None)
    assert app.runtime is None


def test_importing_the_task_name_does_not_import_celery():
    # The api imports TASK_NAME; only a process that sends or runs tasks needs Celery.
    code = "import sys, worker.celery_app; assert 'celery' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
