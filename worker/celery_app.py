"""The Celery app factory and the run_execution task.

The task is thin: it hands its plain-data payload to the process's WorkerRuntime. Results are
never stored in Celery (the execution record in Redis is the result), and tasks are acknowledged
when they start: together with the `new -> running` claim this gives at-most-once execution
(see core/executions.py).
"""

from __future__ import annotations

import threading

from celery import Celery, signals

from core.settings import Settings

TASK_NAME = "mini_n8n.run_execution"

_runtime = None
_runtime_lock = threading.Lock()


def create_celery(settings: Settings | None = None) -> Celery:
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
        # A reserved but unstarted message returns to the queue after this long if its worker
        # died; the claim drops it if the execution was meanwhile marked crashed.
        broker_transport_options={"visibility_timeout": 3600},
    )
    app.settings = settings

    @app.task(name=TASK_NAME)
    def run_execution(payload: dict) -> str:
        return runtime(app.settings).run(payload)

    def ready(**_):
        # Start the runtime's background thread now, not lazily: it renews leases, reaps
        # executions of lost workers, and watches over this worker's own shutdown.
        runtime(app.settings).start_background()

    def shutting_down(**_):
        # Runs inside a signal handler: only set deadlines, the background thread acts on them.
        if _runtime is not None:
            _runtime.stop_all_after(settings.shutdown_grace_seconds)

    def shut_down(**_):
        if _runtime is not None:
            _runtime.close()

    # Kept on the app: Celery holds signal receivers weakly.
    app._mini_n8n_receivers = (ready, shutting_down, shut_down)
    signals.worker_ready.connect(ready, weak=False)
    signals.worker_shutting_down.connect(shutting_down, weak=False)
    signals.worker_shutdown.connect(shut_down, weak=False)
    return app


def runtime(settings: Settings):
    global _runtime
    with _runtime_lock:
        if _runtime is None:
            from worker.runtime import WorkerRuntime

            _runtime = WorkerRuntime(settings)
        return _runtime
