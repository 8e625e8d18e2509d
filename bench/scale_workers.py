"""Capacity that grows with workers: with a slow model (200 ms per token) and 1,000
concurrent sessions, messages per second for 1, 2 and 4 workers of a fixed concurrency.

Each configuration is a fresh deployment (one api process, N Celery workers with --concurrency C).
1,000 clients (asyncio, raw sockets) each send one chat message at once and read the NDJSON
answer to its end; the rate is messages completed exactly per second of wall time. A worker's
concurrency bounds what it runs at once, so the rate should double with the workers until the
machine's cores (CPU per message, printed too) are the limit.

    python bench/scale_workers.py [SESSIONS] [CONCURRENCY]
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from urllib.parse import urlparse

from _common import redis_server

from tests.e2e.deployment import Deployment, chat_url, fresh_ids
from tests.e2e.sockets import process_tree
from tests.workflows import REDIS_CHAT, example, with_model_delay

DELAY_MS = 200
ANSWER = "Based on the tools: Calculator returned 437."
WORKER_COUNTS = (1, 2, 4, 8)


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process and its children that were waited for."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


async def chat(host: str, port: int, path: str, session: str) -> str:
    reader, writer = await asyncio.open_connection(host, port, limit=1 << 20)
    body = json.dumps({"action": "sendMessage", "sessionId": session, "chatInput": "19 * 23?"})
    writer.write(
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}".encode()
    )
    await writer.drain()
    raw = await reader.read()  # Connection: close, so the answer ends with the connection
    writer.close()
    text = ""
    for line in raw.split(b"\n"):
        start = line.find(b"{")  # chunked framing: the JSON object is what follows the size line
        if start >= 0:
            chunk = json.loads(line[start:])
            if chunk.get("type") == "item":
                text += chunk["content"]
    return text


async def load(base: str, path: str, sessions: int) -> tuple[float, int]:
    url = urlparse(base)
    started = time.monotonic()
    texts = await asyncio.gather(
        *(chat(url.hostname, url.port, path, f"scale{i}") for i in range(sessions))
    )
    return time.monotonic() - started, sum(1 for t in texts if t == ANSWER)


def one_configuration(redis_url: str, workers: int, concurrency: int, sessions: int) -> str:
    deploy = Deployment(redis_url, MINI_N8N_QUEUE_TIMEOUT="600")
    try:
        base = deploy.start_api()
        procs = [deploy.start_worker(concurrency=concurrency) for _ in range(workers)]
        workflow = deploy.activate(fresh_ids(with_model_delay(example(REDIS_CHAT), DELAY_MS)))
        path = urlparse(chat_url(base, workflow)).path
        asyncio.run(load(base, path, 1))  # warm: pools open, imports done
        api_pids = process_tree(deploy.apis[0][0].pid)  # gunicorn's master and workers
        cpu_before = sum(cpu_seconds(p.pid) for p in procs)
        api_before = sum(cpu_seconds(p) for p in api_pids)
        seconds, exact = asyncio.run(load(base, path, sessions))
        cpu = sum(cpu_seconds(p.pid) for p in procs) - cpu_before
        api_cpu = sum(cpu_seconds(p) for p in api_pids) - api_before
        per = max(exact, 1) / 1000
        return (
            f"{workers:>7} {concurrency:>11} {sessions:>8} {exact:>6} {seconds:>8.1f} "
            f"{exact / seconds:>7.1f} {cpu / per:>13.1f} {api_cpu / per:>10.1f}"
        )
    finally:
        deploy.stop()


def main(sessions: int, concurrency: int) -> None:
    print(f"{DELAY_MS} ms per token, 7 tokens per answer, {os.cpu_count()} cores; CPU in ms")
    print("workers concurrency messages  exact  seconds  msgs/s  worker CPU/msg  api CPU/msg")
    with redis_server() as redis_url:
        for workers in WORKER_COUNTS:
            print(one_configuration(redis_url, workers, concurrency, sessions), flush=True)


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    main(*(args + [1000, 25][len(args) :]))
