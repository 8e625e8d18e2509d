"""The Celery app factory, the run_execution task, and the worker process's signal handlers.

The task is thin: it hands its plain-data payload to the worker process's WorkerRuntime, kept on
the app (`app.runtime`) and built on first use, so the api's producer app (which only sends
tasks) never builds one. Results are never stored in Celery (the execution record in Redis is
the result), and tasks are acknowledged when they start: together with the `new -> running`
claim this gives at-most-once execution (see core/executions.py).

Celery is imported when an app is built, not with this module: the api imports send_execution from
here, and only a process that sends or runs tasks needs Celery.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from core import heap, logs
from core.settings import Settings

# The api's own task message lives with the other library internals (worker/library_internals.py).
from worker.library_internals import TASK_NAME, shortcuts_on
from worker.library_internals import redis_message as redis_message

if TYPE_CHECKING:
    from celery import Celery

    from core.task import TaskPayload
    from worker.runtime import WorkerRuntime


def create_celery(settings: Settings | None = None) -> Celery:
    """The app and its task; no signal handlers (see connect_worker_signals)."""
    from celery import Celery

    from worker import library_internals

    library_internals.install_broker_client()
    settings = settings or Settings.from_env()
    app = Celery("mini_n8n", broker=settings.broker_url, set_as_current=False)
    app.conf.update(
        task_ignore_result=True,
        task_acks_late=False,
        task_default_queue=settings.task_queue,
        task_serializer="json",
        accept_content=["json"],
        worker_prefetch_multiplier=1,
        worker_hijack_root_logger=False,
        broker_connection_retry_on_startup=True,
        broker_pool_limit=10,
        # No ack bookkeeping in Redis (kombu's unacked hash and index, two transactions per task
        # and a JSON copy of every message): tasks are acknowledged as they start, and what
        # that bookkeeping restores, a message its dead worker had received but not started,
        # would come back after the visibility timeout, long past the queue timeout after which
        # the workers' reapers end the execution anyway (core/executions.py). A worker that
        # stops warm still puts back what it had received and not started, from memory.
        broker_transport_options={"ack_emulation": False},
        # No AMQP heartbeats (RabbitMQ; the Redis transport has none). With them on, Celery's
        # loop for gevent workers drains its event connection for up to 0.1 s after each read of
        # the task connection (celery/worker/loops.py `_quick_drain`): every task waited that
        # long before its worker took it (docs/performance.md). A dead peer is
        # still noticed: py-amqp's sockets keep TCP keepalive and TCP_USER_TIMEOUT on.
        broker_heartbeat=0,
        # Celery's coming default, said now so a lost connection logs no deprecation warning: it
        # cancels only acks_late tasks on connection loss, and ours acknowledge as they start.
        worker_cancel_long_running_tasks_on_connection_loss=True,
    )
    app.settings = settings
    app.runtime = None
    app.runtime_lock = threading.Lock()

    # Not shared: a shared task joins every app built later in the process, still bound to
    # the app (and runtime) that defined it first.
    @app.task(name=TASK_NAME, shared=False, Strategy="worker.library_internals:strategy")
    def run_execution(payload: dict) -> str:
        # The task id is the execution id (api/launcher.py); the record says so too, and is
        # what an older message without that id carries.
        with logs.execution((payload.get("record") or {}).get("id")):
            return runtime(app).run(payload)

    return app


def connect_worker_signals(app: Celery) -> None:
    """Tie the app's runtime to the worker process's life. Only the worker calls this: Celery's
    signals are process-wide, and the api's producer app has no worker to follow."""
    from celery import signals

    link = BrokerLink()
    app.steps["consumer"].add(link.step())

    def ready(**_):
        # The task's (disabled) result backend, built once: Celery keeps the app's per thread,
        # which under gevent is per greenlet, so every task built and looked one up anew.
        app.tasks[TASK_NAME].backend = app.backend
        # Warm start: load and build what the first execution needs before taking a task. Then
        # start the runtime's background threads now, not lazily: they renew leases, reap
        # executions of lost workers, and watch over this worker's own shutdown. Then /metrics.
        runtime(app).warm()
        runtime(app).start_background()
        readiness(app, link)
        runtime(app).serve_metrics()
        heap.settle()

    def shutting_down(**_):
        # Runs inside a signal handler: only set deadlines, the background thread acts on them.
        if app.runtime is not None:
            app.runtime.stop_all_after(app.settings.shutdown_grace_seconds)

    def shut_down(**_):
        if app.runtime is not None:
            app.runtime.close()

    _register_modules_command()
    # weak=False: Celery holds receivers weakly by default, and nothing else holds these.
    signals.worker_ready.connect(ready, weak=False)
    signals.worker_shutting_down.connect(shutting_down, weak=False)
    signals.worker_shutdown.connect(shut_down, weak=False)


class BrokerLink:
    """Whether this worker's Celery consumer is connected to the broker and consuming: a consumer
    bootstep (Celery's extension point) started once it is, and stopped when the connection is
    lost (the consumer restarts its steps) or the worker stops."""

    def __init__(self) -> None:
        self.connected = False

    def step(self) -> type:
        from celery import bootsteps

        link = self

        class Linked(bootsteps.StartStopStep):
            requires = ("celery.worker.consumer.tasks:Tasks",)

            def start(self, c) -> None:
                link.connected = True

            def stop(self, c) -> None:
                link.connected = False

            shutdown = stop

        return Linked


def readiness(app: Celery, link: BrokerLink) -> None:
    """The worker's /readyz (worker/metrics.py): connected, and its lease heartbeat beating."""
    from worker.metrics import Readiness

    worker = runtime(app)
    worker.metrics.readiness = Readiness(
        connected=lambda: link.connected,
        beats=lambda: worker.heartbeat.beats,
        stale_after=app.settings.lease_seconds,
    )


MODULES_COMMAND = "mini_n8n_modules"


def _register_modules_command() -> None:
    """A remote-control answer naming the modules this worker process has loaded, so one can
    check from outside (`celery inspect`, a test) that a worker which reports ready already
    holds everything an execution imports (warm start)."""
    import sys

    from celery.worker.control import inspect_command

    @inspect_command(name=MODULES_COMMAND)
    def loaded_modules(state, **_) -> list[str]:
        return sorted(sys.modules)


def connect_worker_logging(settings: Settings) -> None:
    """Our logging in place of Celery's (core/logs.py), from now on (Celery warns before its
    worker starts) and when the worker sets up logging: a `setup_logging` receiver makes Celery
    leave the root logger, its task loggers and stdout alone. Only the worker calls this."""
    from celery import signals

    def setup(loglevel=None, **_):
        logs.configure(settings.log_format, loglevel or logs.env_level(), [CeleryTaskIds()])

    setup()
    signals.setup_logging.connect(setup, weak=False)


class CeleryTaskIds(logging.Filter):
    """Celery's own lines about a task ("received", "succeeded", a failure) are written outside
    the task, where no execution is current; they carry the task id, which is the execution's."""

    def filter(self, record: logging.LogRecord) -> bool:
        data = getattr(record, "data", None)
        if getattr(record, "execution_id", None) is None and isinstance(data, dict):
            record.execution_id = data.get("id")
        return True


def send_execution(app: Celery, payload: TaskPayload, producer=None) -> None:
    """Send an execution's task: from the api (with its one shared producer), or from a worker
    (the session's next execution, started by messages a conversation left over)."""
    record = payload.record
    app.send_task(
        TASK_NAME,
        args=[payload.encode()],
        # What Celery logs and shows (Flower) as the arguments: not a repr of the whole payload
        # and its workflow, which cost a few percent of the api's CPU per message.
        argsrepr=f"[execution {record.id} of workflow {record.workflow_id}]",
        kwargsrepr="{}",
        # The task id is the execution id: Celery's lines, Flower and the worker's logs
        # (core/logs.py) all name the execution by it.
        task_id=record.id,
        queue=app.settings.task_queue,
        producer=producer,
    )


def runtime(app: Celery) -> WorkerRuntime:
    """The app's WorkerRuntime, built on first use (in the worker process only)."""
    with app.runtime_lock:
        if app.runtime is None:
            from worker.runtime import WorkerRuntime

            app.runtime = WorkerRuntime(app.settings, send_task=lambda p: send_execution(app, p))
        return app.runtime


def writes_own_messages(settings: Settings) -> bool:
    """Whether the api writes an execution's task message itself (`redis_message`), in the
    transaction that records the execution: when the broker is the store's own Redis, as
    `mini-n8n up` and compose run it, and the library shortcuts are on. RabbitMQ, another Redis
    or a cluster go through Celery."""
    return (
        settings.executions_mode != "regular"
        and not settings.redis_cluster
        and settings.broker_url == settings.redis_url
        and settings.broker_url.startswith(("redis://", "rediss://"))
        and shortcuts_on()
    )
