"""Sending tasks from one long-lived thread (a greenlet under gevent) of the api process.

Celery and kombu keep per-thread state (the app's thread id, the producer's per-thread caches)
that lives as long as the thread: sent from each request's own greenlet, that state stayed with
every open stream (docs/performance.md, "Figures behind the code"). Requests hand
their payload to this one sender and wait for it to be sent; a failure is raised in the request,
as if it had sent the task itself.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

from core.task import TaskPayload
from runtime.background import Background


class _Job:
    def __init__(self, work: Callable[[], None]):
        self.work = work
        self.sent = threading.Event()
        self.error: BaseException | None = None


class TaskSender:
    def __init__(self, send: Callable[[TaskPayload], None]):
        self._send = send
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._thread = Background(self._serve, "task-sender")

    def send(self, payload: TaskPayload) -> None:
        self.call(lambda: self._send(payload))

    def call(self, work: Callable[[], None]) -> None:
        """Run `work` on the sender's thread and wait for it; what it raises is raised here.
        Also how a warm start builds the sender's per-thread state before the first task."""
        job = _Job(work)
        self._jobs.put(job)
        self._thread.ensure()
        job.sent.wait()
        if job.error is not None:
            raise job.error

    def _serve(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                job.work()
            except Exception as err:  # the request that asked hears it; the sender goes on
                job.error = err
            finally:
                job.sent.set()
