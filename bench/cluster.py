"""One Redis against a three-primary Redis Cluster, in one run: the same load, the
same processes, only REDIS_URL and MINI_N8N_REDIS_CLUSTER differ.

Each configuration is a fresh deployment (one api process, two Celery workers of --concurrency
50, a zero-delay model); the Celery broker is a plain Redis of its own in both, so what is
compared is state, memory and the relay. SESSIONS clients send one message each at once, in
ROUNDS rounds, and read the answer to its end. Printed: messages/s, and Redis CPU per message
(INFO cpu of every state node, before and after): the work a cluster spreads over its shards.

    python bench/cluster.py [SESSIONS] [ROUNDS]
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse

import redis
from _common import redis_server
from scale_workers import ANSWER, chat, cpu_seconds

from tests.e2e.deployment import Deployment, chat_url, fresh_ids
from tests.e2e.sockets import process_tree
from tests.scale.servers import valkey_cluster
from tests.workflows import REDIS_CHAT, example


def redis_cpu(urls: list[str]) -> list[float]:
    """Seconds of CPU each Redis server has used since it started."""
    seconds = []
    for url in urls:
        client = redis.Redis.from_url(url)
        info = client.info("cpu")
        seconds.append(float(info["used_cpu_sys"]) + float(info["used_cpu_user"]))
        client.close()
    return seconds


async def rounds(base: str, path: str, sessions: int, count: int) -> tuple[float, int]:
    url = urlparse(base)
    started, exact = time.monotonic(), 0
    for r in range(count):
        texts = await asyncio.gather(
            *(chat(url.hostname, url.port, path, f"c{r}-{i}") for i in range(sessions))
        )
        exact += sum(1 for t in texts if t == ANSWER)
    return time.monotonic() - started, exact


def one_configuration(name: str, urls: list[str], broker: str, sessions: int, count: int) -> str:
    cluster = len(urls) > 1
    deploy = Deployment(urls[0], cluster, CELERY_BROKER_URL=broker, MINI_N8N_QUEUE_TIMEOUT="600")
    try:
        base = deploy.start_api()
        workers = [deploy.start_worker(concurrency=50) for _ in range(2)]
        workflow = deploy.activate(fresh_ids(example(REDIS_CHAT)))
        path = urlparse(chat_url(base, workflow)).path
        asyncio.run(rounds(base, path, 20, 1))  # warm: pools open, imports done
        pids = [*process_tree(deploy.apis[0][0].pid), *(w.pid for w in workers)]
        before, cpu_before = redis_cpu(urls), sum(cpu_seconds(p) for p in pids)
        seconds, exact = asyncio.run(rounds(base, path, sessions, count))
        used = [a - b for a, b in zip(redis_cpu(urls), before, strict=True)]
        ours = sum(cpu_seconds(p) for p in pids) - cpu_before
        per = max(exact, 1) / 1000
        shards = " / ".join(f"{u / per:.2f}" for u in used)
        return (
            f"{name:<16} {exact:>6} {seconds:>8.1f} {exact / seconds:>7.1f} "
            f"{sum(used) / per:>10.2f} ({shards})  {ours / per:>8.1f}"
        )
    finally:
        deploy.stop()


def main(sessions: int, count: int) -> None:
    print(f"{sessions} sessions x {count} rounds, zero-delay model, 1 api, 2 workers; CPU in ms")
    print("redis             exact  seconds  msgs/s  redis CPU/msg (per node)  mini-n8n CPU/msg")
    with contextlib.ExitStack() as stack:
        broker = stack.enter_context(redis_server())
        single = stack.enter_context(redis_server())
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        cluster = stack.enter_context(valkey_cluster(workdir))
        print(one_configuration("one server", [single], broker, sessions, count), flush=True)
        print(
            one_configuration("cluster of 3", cluster.node_urls(), broker, sessions, count),
            flush=True,
        )


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    main(*(args + [100, 10][len(args) :]))
