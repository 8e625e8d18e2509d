"""What the outside world lends an execution. The engine does no I/O of its own: whoever runs it
(the CLI, a Celery worker, the api in regular mode, a test) builds a Services and hands it in,
with the clients that do: a Redis client, the chat model clients (models/clients.py), the HTTP
Request nodes' client (models/http_requests.py), the Code node's JavaScript runner (sandbox/),
and how to share the process (a pause, a CPU clock; runtime/ under gevent). tests/test_layout.py
keeps the engine free of sockets, TLS, HTTP clients, Redis and gevent."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from core.credentials import CredentialStore
from core.keys import Keys
from engine.http_client import HttpClient
from engine.llm import ChatModels
from memory.base import ChatMemory
from memory.journal import Journal

if TYPE_CHECKING:
    from redis import Redis

    from engine.code_runner import CodeRunner


def let_others_run() -> None:
    """A moment for other threads (a gevent runner lends its own: runtime/timers.py)."""
    time.sleep(0)


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
    # Builds the clients of the model nodes that talk to a server (engine/llm.py ChatModels;
    # models/clients.py). None: such a node fails with a message saying so. A gevent worker's
    # read their streams in greenlets, which a stop interrupts in the middle of a socket wait.
    chat_models: ChatModels | None = None
    # Sends the HTTP Request nodes' requests (engine/http_client.py; models/http_requests.py),
    # under the deployment's bounds: where it may connect, how large an answer may be. None: such
    # a node fails with a message saying so.
    http: HttpClient | None = None
    # Told after each chat-model call the Agent makes: "success" or "error", and how many
    # tokens (streamed pieces) the model produced. A worker lends one that counts them.
    on_model_call: Callable[[str, int], None] | None = None
    # CPU seconds one run of an execution may use (None: unbounded), checked between nodes and
    # every few thousand expression steps (engine/cpu.py). A worker sets it from
    # MINI_N8N_EXECUTION_CPU_SECONDS.
    cpu_seconds: float | None = None
    # CPU seconds the calling thread has used; a gevent runner lends one that counts the
    # calling greenlet only (runtime/cpu_clock.py), so other executions' work is not charged.
    cpu_clock: Callable[[], float] = time.thread_time
    # Called at checkpoints, at most every few milliseconds, so a run that computes lets the
    # rest of its process run.
    pause: Callable[[], None] = let_others_run
    # Runs the Code node's JavaScript in an isolate of its own (engine/code_runner.py; a
    # worker's: sandbox/pool.py). None: a Code node fails with a message saying so.
    code_runner: CodeRunner | None = None
    # Set per execution by a worker: memory turns wait there until the step that records the
    # run's end writes them (memory/journal.py). None: turns are written as they come.
    journal: Journal | None = None
    # The base of the URLs the engine writes for the outside (n8n's WEBHOOK_URL): a Wait
    # node's $execution.resumeUrl is `<webhook_url>webhook-waiting/<execution id>?signature=…`.
    webhook_url: str = "http://localhost:5678/"
    # The stored workflow with this id, loaded (an Execute Workflow node's sub-workflow);
    # LookupError when there is none. None: such a node fails with a message saying so.
    workflows: Callable[[str], Any] | None = None  # an engine.workflow.Workflow
    # Starts a workflow as an execution of its own, on any worker, and answers its id
    # (an Execute Workflow node that does not wait for its sub-workflow): (workflow, the trigger
    # to start from, its items, the caller's execution id). None: such a node fails.
    start_workflow: Callable[[Any, str, list[dict[str, Any]], str], str] | None = None
