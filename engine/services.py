"""What the outside world lends an execution. The engine does no I/O of its own: whoever runs it
(the CLI, a Celery worker, a test) builds a Services and hands it in."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mini_n8n.keys import Keys


@dataclass
class Services:
    redis: Any = None  # a redis.Redis client (decode_responses=True) for nodes that need one
    credentials: Any = None  # an object with resolve(type_name, ref) -> dict (mini_n8n.credentials)
    keys: Keys = field(default_factory=Keys)
    clock: Callable[[], float] = time.time  # wall clock in seconds; tests inject their own
    sleep: Callable[[float], None] = time.sleep
    simple_memory: Any = None  # the process-wide in-process ChatMemory behind Simple Memory
    queue_mode: bool = False  # True on Celery workers: Simple Memory warns that it forgets
    # ref -> redis.Redis for the Redis memory's own `redis` credential (worker/redis_credentials)
    redis_for_credential: Callable[[Any], Any] | None = None
