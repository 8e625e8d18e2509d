"""Open streams: how many concurrent streaming requests one api process holds
with a slow model, its memory per open stream, and its Redis connection count.

N clients (asyncio, raw sockets) each open a streaming chat and keep reading while a slow mock
model (5 s per token) answers; once every stream has delivered its first token, the api worker's
RSS and its TCP connections to Redis are read from /proc. Every stream must then complete.
Each kind of answer is counted: complete and exact streams, streams that ended otherwise, and
refusals by status (an overloaded api answers 503 JSON with Retry-After, never 500).

    python bench/open_streams.py [N] [DELAY_MS]

Every stream must be open at the moment of measurement, so a stream must outlast the time the
api takes to start all N (about 75 starts/s on a busy 2-core machine): for 10,000 streams give
the model 20,000 ms per token (each stream then stays open about 140 s).
"""

from __future__ import annotations

import asyncio
import collections
import json
import resource
import sys
import time
from urllib.parse import urlparse

from _common import redis_server

from tests.e2e.deployment import Deployment, chat_url, fresh_ids
from tests.e2e.sockets import connections_to_port, process_tree
from tests.workflows import REDIS_CHAT, example, with_model_delay

DELAY_MS = 5000  # 7 tokens: each stream stays open about 35 s
ANSWER = "Based on the tools: Calculator returned 437."


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


async def first_token_watch(host, port, path, session, ready: list, settled: set) -> str:
    try:
        return await _watch(host, port, path, session, ready)
    finally:
        settled.add(session)  # ended, with or without a first token


async def _watch(host, port, path, session, ready: list) -> str:
    """Like one_stream, but notes when its first item arrives."""
    reader, writer = await asyncio.open_connection(host, port, limit=1 << 20)
    body = json.dumps(
        {"action": "sendMessage", "sessionId": session, "chatInput": "What is 19 * 23?"}
    )
    writer.write(
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}".encode()
    )
    await writer.drain()
    status_line = await reader.readline()
    status = status_line.split(b" ")[1].decode() if status_line.count(b" ") >= 2 else "none"
    if status != "200":
        rest = await reader.read()
        writer.close()
        head, _, payload = rest.partition(b"\r\n\r\n")
        retry = b"retry-after:" in head.lower()
        return f"[HTTP {status}{' Retry-After' if retry else ''}: {payload[:80]!r}]"
    buffer, text, first = b"", "", False
    while True:
        data = await reader.read(65536)
        if not data:
            break
        buffer += data
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            line = line.strip()
            start = line.find(b"{")
            if start < 0:
                continue
            chunk = json.loads(line[start:])
            if chunk.get("type") == "error":
                text += f" [error: {chunk.get('content')}]"
            if chunk.get("type") == "item":
                text += chunk["content"]
                if not first:
                    first = True
                    ready.append((time.monotonic(), session))
    writer.close()
    return text


async def run(n: int, base: str, path: str, api_pid: int, redis_port: int) -> None:
    url = urlparse(base)
    ready: list[tuple[float, str]] = []
    settled: set[str] = set()
    worker_pid = [p for p in process_tree(api_pid) if p != api_pid][0]
    idle_rss = rss_kb(worker_pid)
    idle_conns = connections_to_port(api_pid, redis_port)
    started = time.monotonic()
    tasks = [
        asyncio.create_task(
            first_token_watch(url.hostname, url.port, path, f"open{i}", ready, settled)
        )
        for i in range(n)
    ]
    # Wait until every stream delivered a token or ended (a refusal ends without one).
    while len(settled | {session for _, session in ready}) < n:
        if time.monotonic() - started > 600:
            break
        await asyncio.sleep(0.2)
    open_rss = rss_kb(worker_pid)
    open_conns = connections_to_port(api_pid, redis_port)
    still_open = sum(not t.done() for t in tasks)
    print(
        f"{len(ready)} of {n} streams delivered a first token within "
        f"{time.monotonic() - started:.1f} s; {still_open} were open at once when measured"
    )
    texts = await asyncio.gather(*tasks)
    complete = sum(1 for t in texts if t == ANSWER)
    failures = collections.Counter(t[-100:] for t in texts if t != ANSWER)
    refused = collections.Counter(t.split(":")[0] + "]" for t in texts if t.startswith("[HTTP"))
    print(
        f"api worker RSS: {idle_rss / 1024:.1f} MiB idle -> {open_rss / 1024:.1f} MiB "
        f"with {still_open} open streams"
    )
    print(f"memory per open stream: {(open_rss - idle_rss) / max(still_open, 1):.1f} KiB")
    print(f"api Redis connections: {idle_conns} idle, {open_conns} with {still_open} open streams")
    print(f"complete and exact answers: {complete} of {n}")
    print(f"refused: {dict(refused) or 'none'}")
    print(f"other endings: {n - complete - sum(refused.values())}")
    for text, count in failures.most_common(4):
        print(f"  {count} ended: ...{text}")


def main(n: int, delay_ms: int = DELAY_MS) -> None:
    # Each stream is a socket in this process and in the api (which inherits the limit).
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, 2 * n + 1024)) if hard != resource.RLIM_INFINITY else 2 * n + 1024
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    with redis_server() as redis_url:
        deploy = Deployment(redis_url)
        try:
            base = deploy.start_api()
            deploy.start_worker(concurrency=n + 100)
            workflow = deploy.activate(fresh_ids(with_model_delay(example(REDIS_CHAT), delay_ms)))
            path = urlparse(chat_url(base, workflow)).path
            api_pid = deploy.apis[0][0].pid
            # One warm-up request so the pools are open before the idle reading.
            asyncio.run(run(1, base, path, api_pid, urlparse(redis_url).port))
            asyncio.run(run(n, base, path, api_pid, urlparse(redis_url).port))
            marks = ("Error", "TIMEOUT", "Booting worker", "exiting", "CRITICAL")
            errors = [
                line for p, _ in deploy.apis for line in p.lines if any(m in line for m in marks)
            ]
            if errors:
                print(
                    f"api log lines naming an error or a worker restart: {len(errors)}; the last:"
                )
                print("".join(errors[-5:]))
        finally:
            deploy.stop()


if __name__ == "__main__":
    main(
        int(sys.argv[1]) if len(sys.argv) > 1 else 2000,
        int(sys.argv[2]) if len(sys.argv) > 2 else DELAY_MS,
    )
