"""What one api process shares across requests: the Redis client (a bounded pool), the stores,
the relay and the Celery producer. The relay and Celery are built on first use, inside the
worker process gunicorn forked, never at import time."""

from __future__ import annotations

import threading

import redis
from flask import current_app

from api.launcher import Launcher
from api.relay import Relay
from api.workflow_store import WorkflowStore
from memory.redis import RedisMemory
from mini_n8n.keys import Keys
from mini_n8n.settings import Settings
from worker.executions import ExecutionStore

REDIS_POOL_SIZE = 64  # requests beyond this wait for a connection instead of opening more


class ApiRuntime:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.keys = Keys(settings.key_prefix)
        pool = redis.BlockingConnectionPool.from_url(
            settings.redis_url,
            max_connections=REDIS_POOL_SIZE,
            timeout=10,
            decode_responses=True,
            client_name="mini-n8n-api",
        )
        self.redis = redis.Redis(connection_pool=pool)
        self.workflows = WorkflowStore(self.redis, self.keys)
        self.executions = ExecutionStore(self.redis, self.keys, settings.executions_ttl)
        self.memory = RedisMemory(self.redis, self.keys)
        self._relay: Relay | None = None
        self._celery = None
        self._lock = threading.Lock()
        self.launcher = Launcher(settings, self.keys, self.executions, self.relay, self.celery)

    def relay(self) -> Relay:
        with self._lock:
            if self._relay is None:
                self._relay = Relay(self.settings.redis_url)
            return self._relay

    def celery(self):
        with self._lock:
            if self._celery is None:
                from worker.celery_app import create_celery

                self._celery = create_celery(self.settings)
            return self._celery


def runtime() -> ApiRuntime:
    return current_app.extensions["mini_n8n"]
