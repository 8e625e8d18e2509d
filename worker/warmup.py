"""Warm start: what a worker's first execution would otherwise import, build or
connect, done before the worker takes a task, so the first message after a start or a
scale-up is about as fast as the rest.

Measured on a first execution (cProfile, and bench/cpu_per_message.py's first message against
its warm median), the costs left after importing the node modules were all firsts: the Lua
scripts' first load, the Redis pool's first connections, reading and parsing the workflow's
version, the Redis memory credential's client (building a redis-py client reads package
metadata) and its first connection, and the model endpoint's client and its first (TCP, on a
real endpoint TLS) connection.

Credential endpoints can be slow or unreachable; they are warmed in a background thread that
the worker waits for only briefly (WAIT_SECONDS): a slow one is finished on first use instead.
"""

from __future__ import annotations

import logging
import socket
import threading
from typing import Any

import redis

from core.executions import ExecutionStore
from core.workflow_snapshots import ref_of
from core.workflow_store import WorkflowStore
from engine.services import Services
from models.clients import ModelClients
from worker.workflow_cache import WorkflowCache

log = logging.getLogger("mini_n8n.worker")

# Connections one execution holds at once (its own commands, the outbox's publish, the lease
# renewal): opened now, so none of the first execution's commands waits for a connect.
POOL_CONNECTIONS = 4
# How long the worker waits for its credentials' endpoints before it reports ready anyway.
WAIT_SECONDS = 2.0
# Active workflows parsed at start, at most (about a millisecond each).
MAX_PRELOADED = 200


def warm(
    store: ExecutionStore, services: Services, models: ModelClients, workflows: WorkflowCache
) -> None:
    import engine.nodes  # noqa: F401  (every node type)

    models.warm()
    socket.getaddrinfo("localhost", 0)  # gevent's resolver starts its thread on first use
    try:
        store.load_scripts()
        open_pool(store.client, POOL_CONNECTIONS)
        preload_workflows(store, workflows)
    except redis.RedisError as err:  # connected and loaded on first use instead
        log.warning("Redis not warmed: %s", err)
    endpoints = threading.Thread(target=warm_credentials, args=(services, models), daemon=True)
    endpoints.start()
    endpoints.join(WAIT_SECONDS)


def open_pool(client: redis.Redis, count: int) -> None:
    """Connect `count` of the pool's connections (taken at once, so each is a new one)."""
    pool = client.connection_pool
    taken = []
    try:
        for _ in range(count):
            taken.append(pool.get_connection())
    finally:
        for conn in taken:
            pool.release(conn)


def preload_workflows(store: ExecutionStore, workflows: WorkflowCache) -> None:
    """Parse the active workflows' current versions now, filed under the references the api's
    tasks will name (core/workflow_snapshots.py), instead of reading and parsing each in its
    first execution. An invalid one is left to that execution, which reports it."""
    from engine.workflow import load_workflow

    saved = WorkflowStore(store.client, store.keys, load_workflow).list()
    for raw in [r for r in saved if r.get("active")][:MAX_PRELOADED]:
        try:
            workflows.put_ref(ref_of(raw), load_workflow(raw))
        except Exception as err:
            log.info("workflow %s not preloaded: %s", raw.get("id"), type(err).__name__)


def warm_credentials(services: Services, models: ModelClients) -> None:
    """Build the client of every configured Redis memory and model credential, and connect it."""
    store = services.credentials
    if store is None:
        return
    for entry in store.redacted():
        ref = {"id": entry["id"], "name": entry["name"]}
        try:
            _warm_credential(services, models, entry["type"], ref)
        except Exception as err:  # the execution that needs it reports it properly
            log.info("credential %r not warmed: %s", entry["name"], type(err).__name__)


def _warm_credential(
    services: Services, models: ModelClients, type_name: str, ref: dict[str, Any]
) -> None:
    if type_name == "redis" and services.redis_for_credential is not None:
        services.redis_for_credential(ref).ping()
    elif type_name == "openAiApi" and services.credentials is not None:
        models.warm_endpoint(services.credentials.resolve(type_name, ref))
