"""The leases of one worker's running executions, the reaping of everyone's lost ones, and the
worker's shutdown deadline.

A running execution holds a lease (`executions:running`, score = deadline) that its worker
renews every second; a lease that runs out means the worker was lost, and whoever looks first
(an api relay streaming the execution, or any worker's reaper here) marks it crashed, so its
stream ends with an error line (core/executions.py). The same once-a-second loop ends the waits
of Chat nodes whose time limit passed (core/waiting.py) and watches over a warm shutdown: it
stops what outlives the grace period and ends the process once idle.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Callable

import redis

from core.executions import ExecutionStore
from core.settings import Settings
from core.waiting import WaitingStore
from worker.stops import Stops

log = logging.getLogger("mini_n8n.worker")

RENEW_EVERY_SECONDS = 1.0
REAP_EVERY_SECONDS = 5.0
# After a shutdown began, how long the worker stays up at least, however idle it is.
EXIT_IDLE_AFTER_SECONDS = 1.0


def exit_process() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(0)


class Leases:
    def __init__(
        self,
        settings: Settings,
        store: ExecutionStore,
        stops: Stops,
        outbox,
        *,
        clock: Callable[[], float] = time.monotonic,
        end_process: Callable[[], None] = exit_process,
    ):
        self.store = store
        self.waits = WaitingStore(store)
        self.stops = stops  # which executions run here, and how to stop them all
        self.outbox = outbox  # a shutdown waits until it has published everything
        self.lease_ms = int(settings.lease_seconds * 1000)
        self.queue_timeout_seconds = settings.queue_timeout_seconds
        self._clock = clock  # monotonic seconds
        self._end_process = end_process  # tests pass their own
        self._last_reap: float | None = None
        self._stop_all_at: float | None = None
        self._exit_when_idle_after: float | None = None
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Start renewing in the background (once)."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="leases", daemon=True)
                self._thread.start()

    def close(self) -> None:
        self._closing.set()

    def _loop(self) -> None:
        while not self._closing.wait(RENEW_EVERY_SECONDS):
            self.tick()

    def tick(self) -> None:
        """One round: stop what outlived a shutdown's grace, exit if done, renew, reap, end
        expired waits."""
        try:
            if self._stop_all_at is not None and self._clock() >= self._stop_all_at:
                self.stops.stop_all()
            running = self.stops.running()
            self._exit_if_done(running)
            self.store.renew_leases(running, self.lease_ms)
            self._reap_if_due()
            self.waits.expire_due()
        except redis.RedisError as err:
            log.warning("could not renew execution leases: %s", err)
        except Exception:  # leases keep every running execution alive: never stop renewing
            log.exception("renewing leases failed")

    def _reap_if_due(self) -> None:
        now = self._clock()
        if self._last_reap is not None and now - self._last_reap <= REAP_EVERY_SECONDS:
            return
        self._last_reap = now
        self.store.reap_lost(self.queue_timeout_seconds)

    # --- shutdown -------------------------------------------------------------------------
    def stop_all_after(self, grace_seconds: float) -> None:
        """Warm shutdown: running executions may finish within the grace period; then the lease
        thread stops them, so their streams end with an error line instead of waiting on a dead
        worker. (Called from a signal handler: it only sets a deadline.)"""
        now = self._clock()
        self._stop_all_at = now + grace_seconds
        # Celery's own warm shutdown of a gevent worker can take seconds after the last task
        # (and occasionally far longer); once nothing runs and everything is published, there
        # is nothing left to protect: the lease thread then ends the process.
        self._exit_when_idle_after = now + EXIT_IDLE_AFTER_SECONDS

    def _exit_if_done(self, running: list[str]) -> None:
        exit_after = self._exit_when_idle_after
        if exit_after is None or running or self._clock() < exit_after:
            return
        if not self.outbox.idle():
            return
        log.warning("shutting down: no execution left, exiting")
        self._end_process()
