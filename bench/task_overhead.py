"""What a task costs the worker before any workflow runs: Celery's and kombu's part
(BRPOP, the unacked bookkeeping, the request, the trace, two log lines) plus decoding the payload
and a claim that fails at once. N tasks naming executions that do not exist are pushed onto the
queue as the api writes them (worker/celery_app.py redis_message); the worker's CPU time (utime +
stime of its process tree) over the batch, per task.

    python bench/task_overhead.py [N]
"""

from __future__ import annotations

import sys
import time

import redis
from _common import redis_server
from cpu_per_message import cpu_seconds

from core.execution_record import ExecutionRecord
from core.task import TaskPayload
from tests.e2e.deployment import Deployment
from worker.celery_app import redis_message


def batch(client: redis.Redis, queue: str, n: int, tag: str) -> None:
    """Push n tasks and return once the worker has taken them all and gone quiet."""
    messages = [
        redis_message(
            TaskPayload(
                record=ExecutionRecord(f"{tag}{i}", "wf"),
                start_node="Trigger",
                items=[{"json": {"chatInput": "hi"}}],
                streaming=True,
                response_mode="streaming",
                workflow_ref="v1",
            ),
            queue,
        )
        for i in range(n)
    ]
    for i in range(0, n, 100):
        client.lpush(queue, *messages[i : i + 100])
    while client.llen(queue):
        time.sleep(0.05)
    time.sleep(1.0)  # the last tasks run to their end (each takes well under a millisecond)


def main(n: int) -> None:
    with redis_server() as url:
        deploy = Deployment(url)
        try:
            worker = deploy.start_worker()
            client = redis.Redis.from_url(url)
            queue = f"{deploy.keys.prefix}queue"
            batch(client, queue, 300, "warm")
            before = cpu_seconds(worker.pid)
            batch(client, queue, n, "task")
            used = cpu_seconds(worker.pid) - before
            print(f"worker CPU per task dropped at its claim: {used / n * 1e6:.0f} us ({n} tasks)")
        finally:
            deploy.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3000)
