"""What the outside world lends an execution. The engine does no I/O of its own: whoever runs it
(the CLI, a Celery worker, a test) builds a Services and hands it in."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from core.credentials import CredentialStore
from core.keys import Keys
from memory.base import ChatMemory
from memory.journal import Journal

if TYPE_CHECKING:
    from redis import Redis

# Runs a function in the background; returns how to interrupt it (a blocking read included).
Spawn = Callable[[Callable[[], None]], Callable[[], None]]


def let_others_run() -> None:
    """A moment for other threads (a gevent runner lends its own: worker/greenlets.py)."""
    time.sleep(0)


def spawn_thread(fn: Callable[[], None]) -> Callable[[], None]:
    """A daemon thread. A thread cannot be interrupted: the returned stop does nothing, and the
    function notices it is no longer wanted at its next step."""
    threading.Thread(target=fn, daemon=True).start()
    return lambda: None


@dataclass
class Services:
    redis: Redis | None = None  # a client (decode_responses=True) for nodes that need one
    credentials: CredentialStore | None = None  # what a node's credential references resolve to
    keys: Keys = field(default_factory=Keys)
    clock: Callable[[], float] = time.time  # wall clock in seconds; tests inject their own
    sleep: Callable[[float], None] = time.sleep
    simple_memory: ChatMemory | None = None  # the process-wide memory behind Simple Memory
    queue_mode: bool = False  # True on Celery workers: Simple Memory warns that it forgets
    # ref -> client for the Redis memory's own `redis` credential (core/redis_credentials.py)
    redis_for_credential: Callable[[Mapping[str, Any]], Redis] | None = None
    # How a model's streaming read runs beside the execution; a gevent worker lends greenlets,
    # which a stop can interrupt in the middle of a socket wait.
    spawn: Spawn = spawn_thread
    # Told after each chat-model call the Agent makes: "success" or "error", and how many
    # tokens (streamed pieces) the model produced. A worker lends one that counts them.
    on_model_call: Callable[[str, int], None] | None = None
    # CPU seconds one run of an execution may use (None: unbounded), checked between nodes and
    # every few thousand expression steps (engine/cpu.py). A worker sets it from
    # MINI_N8N_EXECUTION_CPU_SECONDS.
    cpu_seconds: float | None = None
    # CPU seconds the calling thread has used; a gevent runner lends one that counts the
    # calling greenlet only (core/cpu_clock.py), so other executions' work is not charged.
    cpu_clock: Callable[[], float] = time.thread_time
    # Called at checkpoints, at most every few milliseconds, so a run that computes lets the
    # rest of its process run.
    pause: Callable[[], None] = let_others_run
    # Set per execution by a worker: memory turns wait there until the step that records the
    # run's end writes them (memory/journal.py). None: turns are written as they come.
    journal: Journal | None = None
