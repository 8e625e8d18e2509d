"""The leases of one worker's executions, the reaping of everyone's lost ones, the sweep of
Chat-node waits whose time ran out, and the worker's shutdown deadline.

Two loops:
- **The heartbeat**, twice a second, renews the lease of every execution this worker holds
  (core/leases.py) and announces the worker's presence (core/presence.py), naming the connection
  it renews on. It runs on an OS thread of its own with its own Redis connection, not a
  greenlet: a greenlet runs only when the others yield, and a node that computes (a long
  expression, a large JSON) or a pool of executions waiting for connections would hold it back
  until the lease ran out, and a living worker would be called lost. An OS thread gets the
  interpreter every few milliseconds whatever the greenlets do.
- **The watch** (a greenlet under gevent), twice a second, reaps the executions of workers whose
  process is gone (their heartbeat connection closed); once a second, what looks lost otherwise
  (core/execution_reaping.py `reap`: an execution whose worker stopped renewing, or that no worker
  started within the queue timeout); it ends the waits whose time limit passed
  (core/waiting.py), and watches over a warm shutdown: it stops what outlives the grace period
  and ends the process once idle.
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

from core.execution_record import Status
from core.executions import ExecutionStore
from core.leases import LeaseStore
from core.presence import Presence, reap_the_dead
from core.pruning import prune_if_due
from core.settings import Settings
from core.waiting import WaitingStore
from runtime.spawn import start_os_thread
from worker.stops import Stops

log = logging.getLogger("mini_n8n.worker")

RENEW_EVERY_SECONDS = 0.5
WATCH_EVERY_SECONDS = 0.5
REAP_EVERY_SECONDS = 1.0
# After a shutdown began, how long the worker stays up at least, however idle it is.
EXIT_IDLE_AFTER_SECONDS = 1.0


def exit_process() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(0)


class Heartbeat:
    """Renews this worker's leases and presence twice a second, on an OS thread with its own
    connection."""

    def __init__(
        self,
        stops: Stops,
        connect: Callable[[], tuple[LeaseStore, Presence]],
        worker_id: str,
    ):
        self.stops = stops
        # builds the thread's own LeaseStore and Presence (on one Redis connection of its own)
        self._connect = connect
        self.worker_id = worker_id
        self._closing = False
        self._started = False
        self._lock = threading.Lock()
        self.beats = 0  # rounds that renewed (tests watch it)

    def start(self) -> None:
        with self._lock:
            if not self._started:
                self._started = True
                start_os_thread(self._loop)

    def close(self) -> None:
        self._closing = True

    def _loop(self) -> None:
        store: tuple[LeaseStore, Presence] | None = None
        while not self._closing:
            started = time.monotonic()
            try:
                store = store or self._connect()
                leases, presence = store
                # A new connection (a reconnect): its leases named the old one; again, at once.
                while leases.beat(self.worker_id, self.stops.held(), presence):
                    pass
                self.beats += 1
            except redis.RedisError as err:
                log.warning("could not renew execution leases: %s", err)
            except Exception:  # the leases keep every execution alive: never stop renewing
                log.exception("renewing leases failed")
            time.sleep(max(RENEW_EVERY_SECONDS - (time.monotonic() - started), 0.05))


class Leases:
    def __init__(
        self,
        settings: Settings,
        store: ExecutionStore,
        leases: LeaseStore,
        stops: Stops,
        outbox,
        *,
        expire_wait: Callable | None = None,
        clock: Callable[[], float] = time.monotonic,
        end_process: Callable[[], None] = exit_process,
        presence: Presence | None = None,
    ):
        self.store = store
        self.leases = leases
        self.presence = presence
        self.waits = WaitingStore(store)
        self.stops = stops  # which executions run here, and how to stop them all
        self.outbox = outbox  # a shutdown waits until it has published everything
        self._expire_wait = expire_wait or self.waits.expire
        self._clock = clock  # monotonic seconds
        self._end_process = end_process  # tests pass their own
        self._last_reap: float | None = None
        self._stop_all_at: float | None = None
        self._exit_when_idle_after: float | None = None
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Start watching in the background (once)."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="watch", daemon=True)
                self._thread.start()

    def close(self) -> None:
        self._closing.set()

    def _loop(self) -> None:
        while not self._closing.wait(WATCH_EVERY_SECONDS):
            self.tick()

    def tick(self) -> None:
        """One round: stop what outlived a shutdown's grace, exit if done, reap, end expired
        waits."""
        try:
            if self._stop_all_at is not None and self._clock() >= self._stop_all_at:
                self.stops.stop_all()
            self._exit_if_done(self.stops.running())
            if self.presence is not None:
                reap_the_dead(self.store, self.presence)
            self._reap_if_due()
            for record in self.waits.due():
                self._expire_wait(record)
            prune_if_due(self.store)  # the execution history, at its own pace (core/pruning.py)
        except redis.RedisError as err:
            log.warning("could not look for lost executions: %s", err)
        except Exception:  # never stop watching
            log.exception("looking for lost executions failed")

    def _reap_if_due(self) -> None:
        now = self._clock()
        if self._last_reap is not None and now - self._last_reap < REAP_EVERY_SECONDS:
            return
        self._last_reap = now
        for execution_id in self.leases.candidates():
            record = self.store.reap(execution_id)
            if record is None or record.finished or record.status == Status.WAITING:
                self.leases.forget(execution_id)

    # --- shutdown -------------------------------------------------------------------------
    def stop_all_after(self, grace_seconds: float) -> None:
        """Warm shutdown: running executions may finish within the grace period; then the watch
        stops them, so their streams end with an error line instead of waiting on a dead
        worker. (Called from a signal handler: it only sets a deadline.)"""
        now = self._clock()
        self._stop_all_at = now + grace_seconds
        # Celery's own warm shutdown of a gevent worker can take seconds after the last task
        # (and occasionally far longer); once nothing runs and everything is published, there
        # is nothing left to protect: the watch then ends the process.
        self._exit_when_idle_after = now + EXIT_IDLE_AFTER_SECONDS

    def _exit_if_done(self, running: list[str]) -> None:
        exit_after = self._exit_when_idle_after
        if exit_after is None or running or self._clock() < exit_after:
            return
        if not self.outbox.idle():
            return
        log.warning("shutting down: no execution left, exiting")
        self._end_process()
