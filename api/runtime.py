"""What one api process shares across requests: the Redis client (a bounded pool), the stores,
the relay and the Celery producer. The relay and Celery are built on first use, inside the
worker process gunicorn forked, never at import time."""

from __future__ import annotations

import logging
import threading
from functools import partial
from typing import TYPE_CHECKING

import redis
from flask import current_app

from api.admission import Admission
from api.launcher import Launcher
from api.liveness import DeadWorkerWatch, LivenessChecks
from api.relay import Relay
from core.executions import ExecutionStore
from core.keys import Keys
from core.presence import Presence
from core.redis_clients import connect, pools
from core.settings import Settings
from core.signin_throttle import SigninThrottle
from core.user_sessions import UserSessions
from core.users import UserStore
from core.workflow_store import WorkflowStore
from engine.services import Services
from engine.workflow import load_workflow
from memory.redis import RedisMemory
from memory.window import InProcessMemory
from runtime.cpu_clock import task_clock
from runtime.timers import pause

if TYPE_CHECKING:
    from core.credentials import CredentialStore
    from core.redis_credentials import RedisConnections

log = logging.getLogger("mini_n8n.api")

# How long a browser stays signed in: a bookmark keeps working across restarts of the server and
# of the browser (the cookie's Max-Age, and a user session's TTL in Redis).
SESSION_SECONDS = 30 * 24 * 3600

# Every request needs Redis for a few short commands; a small fixed pool, filled once, serves
# thousands of requests a second and keeps the api's connection count constant under load.
REDIS_POOL_SIZE = 8


class ApiRuntime:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.keys = Keys.from_settings(settings)
        self.redis = connect(
            settings.redis_url,
            settings.redis_cluster,
            blocking_pool=REDIS_POOL_SIZE,  # per node in a cluster
            # While Redis is paused every connection of the pool waits: so does a request for one.
            timeout=settings.redis_timeout_seconds,
            # Rides out a Redis pause or failover: a request waits rather than fails.
            socket_timeout=settings.redis_timeout_seconds,
            decode_responses=True,
            client_name="mini-n8n-api",
        )
        # Imports and activations are refused past MINI_N8N_MAX_NODES.
        self.workflows = WorkflowStore(
            self.redis, self.keys, partial(load_workflow, max_nodes=settings.max_nodes)
        )
        self.executions = ExecutionStore.from_settings(self.redis, self.keys, settings)
        self.memory = RedisMemory(self.redis, self.keys)
        self.users = UserStore(self.redis, self.keys)
        self.user_sessions = UserSessions(self.redis, self.keys, self.users, SESSION_SECONDS)
        self.signin_throttle = SigninThrottle(self.redis, self.keys)
        self._relay: Relay | None = None
        self._celery = None
        self._lock = threading.Lock()
        self._warm = False
        self._credentials: CredentialStore | None = None
        self._redis_connections: RedisConnections | None = None
        self.liveness = LivenessChecks(self.executions)
        presence = Presence(self.redis, self.keys, settings.lease_seconds)
        self.dead_workers = DeadWorkerWatch(self.executions, presence)
        self.admission = Admission(settings.max_starting, settings.start_wait_seconds)
        self.launcher = Launcher(settings, self.keys, self.executions, self.relay, self.celery)

    def close(self) -> None:
        """Stop what this process runs in the background for the app (regular mode's
        executions): an app made and dropped in one process (a test) leaves nothing behind."""
        self.launcher.close()
        self.dead_workers.close()

    def warm(self) -> None:
        """Open the whole pool once, so the connection count does not depend on load."""
        with self._lock:
            if self._warm:
                return
            self._warm = True
        conns = []
        try:
            for pool in pools(self.redis):
                conns += [(pool, pool.get_connection()) for _ in range(REDIS_POOL_SIZE)]
        except redis.RedisError:
            self._warm = False  # Redis is not there yet; try again on a later request
        finally:
            for pool, conn in conns:
                pool.release(conn)

    def warm_start(self) -> None:
        """Everything the first chat message would otherwise build, built once the process
        starts (gunicorn's post_worker_init): the Redis pool, the relay's connection, the
        Celery producer. Redis not being there yet is no error: each is built on first use."""
        self.warm()
        self.dead_workers.start()
        try:
            self.launcher.warm()
        except Exception as err:
            log.warning("warm start incomplete, finished on first use: %s", err)

    def relay(self) -> Relay:
        with self._lock:
            if self._relay is None:
                self._relay = Relay(
                    self.settings.redis_url,
                    cluster=self.settings.redis_cluster,
                    # Redis paused: the confirmation comes once it is back (as every command).
                    subscribe_timeout=self.settings.redis_timeout_seconds,
                )
            return self._relay

    @property
    def credentials(self):
        """The deployment's CredentialStore, read once (CredentialError if the file is bad)."""
        with self._lock:
            if self._credentials is None:
                from core.credentials import CredentialStore

                self._credentials = CredentialStore.from_env()
            return self._credentials

    def redis_for_credential(self, ref):
        """The Redis client a memory node's `redis` credential names (the workers' rule)."""
        if self._redis_connections is None:
            from core.redis_credentials import RedisConnections

            store = self.credentials
            with self._lock:
                if self._redis_connections is None:
                    self._redis_connections = RedisConnections(store, self.redis)
        return self._redis_connections(ref)

    def engine_services(self) -> Services:
        """What engine code run in the api (loadPreviousSession) is lent: this deployment's Redis,
        keys and Redis credentials. Simple Memory gets an empty memory: its sessions live inside
        the worker processes, which the api cannot read."""
        return Services(
            redis=self.redis,
            keys=self.keys,
            simple_memory=InProcessMemory(),
            queue_mode=self.settings.executions_mode == "queue",
            redis_for_credential=self.redis_for_credential,
            cpu_seconds=self.settings.execution_cpu_seconds,  # regular mode runs them here
            cpu_clock=task_clock(),
            pause=pause,
        )

    def celery(self):
        with self._lock:
            if self._celery is None:
                from worker.celery_app import create_celery

                self._celery = create_celery(self.settings)
            return self._celery


def runtime() -> ApiRuntime:
    return current_app.extensions["mini_n8n"]
