"""Queue mode against in-process: time to first item and total time for one message,
p50/p99, then throughput with 32 concurrent sessions.

The same workflow (calculator chat, zero-delay model, Redis memory) is sent over HTTP to two api
processes on one Redis: one in regular mode (EXECUTIONS_MODE=regular: the api runs the execution
itself, as n8n does without queue mode) and one in queue mode (Celery -> worker -> Redis pub/sub
-> relay). The difference is what the queue costs. The engine alone and a bare Redis PING are
printed as floors.

    python bench/queue_latency.py [N]
"""

from __future__ import annotations

import concurrent.futures
import json
import sys
import time

import httpx
import redis
from _common import pct, redis_server, summary

from core.keys import Keys
from engine.executor import run_workflow
from engine.hooks import Hooks
from engine.services import Services
from engine.workflow import load_workflow
from tests.e2e.deployment import Deployment, chat_url, fresh_ids
from tests.workflows import REDIS_CHAT, example

ANSWER = "Based on the tools: Calculator returned 437."


def engine_only(url: str, n: int) -> list[float]:
    services = Services(redis=redis.Redis.from_url(url, decode_responses=True), keys=Keys("bench:"))
    workflow = load_workflow(example(REDIS_CHAT))
    total = []
    for i in range(n):
        item = {"json": {"sessionId": f"p{i}", "chatInput": "What is 19 * 23?"}}
        start = time.perf_counter()
        run_workflow(
            workflow,
            [item],
            hooks=Hooks().add_handler("sendChunk", len),
            services=services,
            streaming=True,
        )
        total.append(time.perf_counter() - start)
    return total


def one_message(client: httpx.Client, url: str, session: str) -> tuple[float, float]:
    body = {"action": "sendMessage", "sessionId": session, "chatInput": "What is 19 * 23?"}
    start = time.perf_counter()
    first, text = None, ""
    with client.stream("POST", url, json=body) as response:
        for line in response.iter_lines():
            if line:
                chunk = json.loads(line)
                if chunk["type"] == "item":
                    first = first or time.perf_counter()
                    text += chunk["content"]
    assert text == ANSWER, text
    return first - start, time.perf_counter() - start


def serial(client: httpx.Client, url: str, n: int, tag: str) -> tuple[list[float], list[float]]:
    firsts, totals = [], []
    for i in range(n):
        first, total = one_message(client, url, f"{tag}{i}")
        firsts.append(first)
        totals.append(total)
    return firsts, totals


def floors(url: str, base: str, client: httpx.Client, n: int) -> tuple[list[float], list[float]]:
    ping_client, ping, health = redis.Redis.from_url(url), [], []
    for _ in range(n):
        t = time.perf_counter()
        ping_client.ping()
        ping.append(time.perf_counter() - t)
        t = time.perf_counter()
        client.get(f"{base}/healthz")
        health.append(time.perf_counter() - t)
    return ping, health


def main(n: int) -> None:
    with redis_server() as url:
        deploy = Deployment(url)
        try:
            regular = deploy.start_api(EXECUTIONS_MODE="regular")
            queued = deploy.start_api()
            deploy.start_worker()
            workflow = deploy.activate(fresh_ids(example(REDIS_CHAT)))
            client = httpx.Client(timeout=30)
            for base in (regular, queued):
                serial(client, chat_url(base, workflow), 30, "warm")
            ping, health = floors(url, queued, client, n)
            # Interleave the two modes in rounds so machine noise hits both alike.
            r_first, r_total, q_first, q_total = [], [], [], []
            for round_ in range(5):
                f, t = serial(client, chat_url(regular, workflow), n // 5, f"r{round_}-")
                r_first += f
                r_total += t
                f, t = serial(client, chat_url(queued, workflow), n // 5, f"q{round_}-")
                q_first += f
                q_total += t
            print(f"one message at a time, {len(q_total)} messages per mode")
            print(summary("bare Redis PING (floor)", ping))
            print(summary("HTTP GET /healthz (HTTP floor)", health))
            print(summary("engine alone, no HTTP", engine_only(url, n)))
            print(summary("in-process (regular): first item", r_first))
            print(summary("in-process (regular): total", r_total))
            print(summary("queue mode: first item", q_first))
            print(summary("queue mode: total", q_total))
            first = (pct(q_first, 50) - pct(r_first, 50)) * 1000
            total = (pct(q_total, 50) - pct(r_total, 50)) * 1000
            print(
                f"queue mode adds at p50: {first:.2f} ms to the first item, {total:.2f} ms in total"
            )
            throughput(chat_url(queued, workflow), "queue mode")
            throughput(chat_url(regular, workflow), "in-process (regular)")
        finally:
            deploy.stop()


def throughput(chat: str, label: str, sessions: int = 32, per_session: int = 25) -> None:
    def session(s: int) -> int:
        with httpx.Client(timeout=60) as client:
            for _ in range(per_session):
                one_message(client, chat, f"t{s}")
        return per_session

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=sessions) as pool:
        done = sum(pool.map(session, range(sessions)))
    elapsed = time.perf_counter() - start
    print(
        f"{label}, {sessions} concurrent sessions: {done} messages in {elapsed:.2f} s = {done / elapsed:.0f} messages/s"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
