"""In-process engine benchmark: executions per second and time to first chunk for the
calculator chat with a zero-delay model, Redis memory on a real Redis.

    python bench/in_process.py [N]
"""

from __future__ import annotations

import sys
import time

import redis
from _common import redis_server, summary

from core.keys import Keys
from engine.executor import run_workflow
from engine.hooks import Hooks
from engine.services import Services
from engine.workflow import load_workflow
from tests.workflows import REDIS_CHAT, example


class FirstItem:
    def __init__(self) -> None:
        self.at: float | None = None

    def __call__(self, chunk: dict) -> None:
        if chunk["type"] == "item" and self.at is None:
            self.at = time.perf_counter()


def main(n: int) -> None:
    with redis_server() as url:
        client = redis.Redis.from_url(url, decode_responses=True)
        ping = []
        for _ in range(n):
            t = time.perf_counter()
            client.ping()
            ping.append(time.perf_counter() - t)
        services = Services(redis=client, keys=Keys("bench:"))
        workflow = load_workflow(example(REDIS_CHAT))
        first, total = [], []
        for i in range(n):
            seen = FirstItem()
            item = {"json": {"sessionId": f"b{i % 50}", "chatInput": "What is 19 * 23?"}}
            start = time.perf_counter()
            hooks = Hooks().add_handler("sendChunk", seen)
            run = run_workflow(workflow, [item], hooks=hooks, services=services, streaming=True)
            end = time.perf_counter()
            assert run.status == "success", run.error
            first.append(seen.at - start)
            total.append(end - start)
        print(f"in-process calculator chat, {n} executions, Redis memory")
        print(summary("bare Redis PING (floor)", ping))
        print(summary("time to first item chunk", first))
        print(summary("whole execution", total))
        print(f"{'executions per second (serial)':<34} {n / sum(total):8.0f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 500)
