"""CPU per chat message: what one message costs the api and the worker, with the
OpenAI Chat Model node against a local fake OpenAI-compatible server (zero delay, an 8-word
echo), in queue mode with one api process and one worker.

1. The first message after a worker started: its time to first item, beside the warm median
   of the serial messages that follow (the warm-start target: within twice the median).
2. SESSIONS sessions send messages back to back for SECONDS seconds. The CPU time (utime +
   stime, from /proc) of the api's and the worker's process trees is read before and after and
   divided by the messages answered; messages/s and first-item p50/p99 are printed beside it.

The fake server runs in a process of its own, so its work is charged to neither.

    python bench/cpu_per_message.py [SECONDS] [SESSIONS]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import redis
from _common import pct, redis_server

from tests.e2e.deployment import ROOT, Deployment, chat_url, fresh_ids
from tests.e2e.sockets import process_tree

EXPORT = ROOT / "examples" / "n8n-exports" / "chat-openai-redis.json"
MESSAGE = "one two three four five six"  # the fake answers "You said: " + it: 8 words
ANSWER = f"You said: {MESSAGE}"
TICKS = os.sysconf("SC_CLK_TCK")

FAKE = """
import sys, threading, time
from tests.fakes.openai_server import start_fake_openai
server, url = start_fake_openai()
print(url, flush=True)
while True:  # a long run must not grow the fake's logs without end
    time.sleep(1)
    server.requests.clear()
    server.sent.clear()
"""


def cpu_seconds(root_pid: int) -> float:
    """utime + stime of a process and its children, in seconds."""
    total = 0
    for pid in process_tree(root_pid):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    return total / TICKS


def command_calls(client: redis.Redis) -> dict[str, int]:
    """Calls of each command Redis has served so far (the broker's included: it is the same
    Redis here, as `mini-n8n up` runs it)."""
    stats = client.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}


def start_fake() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", FAKE],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    return proc, proc.stdout.readline().strip()


def credentials_file(openai_url: str, redis_url: str) -> str:
    from urllib.parse import urlsplit

    at = urlsplit(redis_url)
    creds = [
        {
            "id": "bench-openai",
            "name": "OpenAi account",
            "type": "openAiApi",
            "data": {"apiKey": "sk-bench", "url": openai_url},
        },
        {
            "id": "bench-redis",
            "name": "Redis account",
            "type": "redis",
            "data": {"host": at.hostname, "port": at.port, "database": 0, "password": ""},
        },
    ]
    handle, path = tempfile.mkstemp(prefix="bench-creds-", suffix=".json")
    with os.fdopen(handle, "w") as out:
        json.dump(creds, out)
    return path


def one_message(client: httpx.Client, url: str, session: str) -> float:
    """Seconds to the first item; the whole answer is checked."""
    body = {"action": "sendMessage", "sessionId": session, "chatInput": MESSAGE}
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
    return first - start


def load(url: str, sessions: int, seconds: float) -> list[float]:
    firsts: list[float] = []
    deadline = time.monotonic() + seconds
    lock = threading.Lock()

    def session(s: int) -> None:
        with httpx.Client(timeout=60) as client:
            i = 0
            while time.monotonic() < deadline:
                first = one_message(client, url, f"load{s}-{i // 10}")  # 10 turns per session
                with lock:
                    firsts.append(first)
                i += 1

    threads = [threading.Thread(target=session, args=(s,)) for s in range(sessions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return firsts


def first_after_worker_start(deploy: Deployment, base: str, client: httpx.Client):
    """The warm-start target: the first message a newly started worker answers, beside the warm
    median. As in a scale-up, the api already serves the workflow and the client's connection
    is open: neither the api's first request for a workflow version nor a new TCP connection
    (each a cost of its own, nothing to do with the worker) is counted. A first message with
    both too (a new workflow, a new client, a new worker) is printed beside it."""
    workflow = deploy.activate(fresh_ids(json.loads(EXPORT.read_text())))
    url = chat_url(base, workflow)
    worker = _restart_worker(deploy, None)
    one_message(client, url, "earlier")  # the api has served this workflow
    worker = _restart_worker(deploy, worker)
    client.get(f"{base}/healthz").raise_for_status()  # the connection is open again
    cold = one_message(client, url, "cold")
    warm = [one_message(client, url, f"warm{i // 10}") for i in range(40)]
    median = pct(warm, 50)
    print(
        f"first message after a worker start: first item {cold * 1000:.1f} ms; warm median "
        f"{median * 1000:.1f} ms (ratio {cold / median:.2f}, target <= 2)"
    )
    fresh = deploy.activate(fresh_ids(json.loads(EXPORT.read_text())))
    worker = _restart_worker(deploy, worker)
    with httpx.Client(timeout=60) as new_client:
        coldest = one_message(new_client, chat_url(base, fresh), "coldest")
    print(
        f"  with a workflow the api had not served and a new connection too: "
        f"{coldest * 1000:.1f} ms (ratio {coldest / median:.2f})"
    )
    return worker, url


def _restart_worker(deploy: Deployment, worker):
    if worker is not None:
        worker.stop()
        deploy.processes.remove(worker)
    return deploy.start_worker()


def main(seconds: float, sessions: int) -> None:
    print(f"code from {ROOT}")  # the tree whose processes run (bench/compare.py checks it)
    fake, openai_url = start_fake()
    creds = None
    try:
        with redis_server() as redis_url:
            creds = credentials_file(openai_url, redis_url)
            deploy = Deployment(redis_url, MINI_N8N_CREDENTIALS_FILE=creds)
            try:
                base = deploy.start_api()
                client = httpx.Client(timeout=60)
                worker, url = first_after_worker_start(deploy, base, client)
                api_pid, worker_pid = deploy.apis[0][0].pid, worker.pid
                load(url, sessions, 3)  # warm every pool and session
                stats = redis.Redis.from_url(redis_url)
                calls0 = command_calls(stats)
                api0, worker0, t0 = cpu_seconds(api_pid), cpu_seconds(worker_pid), time.monotonic()
                firsts = load(url, sessions, seconds)
                elapsed = time.monotonic() - t0
                api_cpu = cpu_seconds(api_pid) - api0
                worker_cpu = cpu_seconds(worker_pid) - worker0
                calls = command_calls(stats)
                n = len(firsts)
                print(f"{sessions} sessions back to back, {n} messages in {elapsed:.1f} s")
                print(f"  messages/s            {n / elapsed:8.1f}")
                print(f"  api CPU per message   {api_cpu / n * 1000:8.2f} ms   (target <= 3)")
                print(f"  worker CPU per message{worker_cpu / n * 1000:8.2f} ms   (target <= 10)")
                print(
                    f"  first item            p50 {pct(firsts, 50) * 1000:.1f} ms   "
                    f"p99 {pct(firsts, 99) * 1000:.1f} ms"
                )
                per = {c: (calls[c] - calls0.get(c, 0)) / n for c in calls}
                print(f"  Redis commands per message {sum(per.values()):6.1f}  (INFO commandstats)")
                top = sorted(per.items(), key=lambda kv: -kv[1])[:12]
                print("    " + ", ".join(f"{c} {v:.1f}" for c, v in top if v >= 0.05))
            finally:
                deploy.stop()
    finally:
        fake.terminate()
        fake.wait()
        if creds:
            os.unlink(creds)


if __name__ == "__main__":
    main(
        float(sys.argv[1]) if len(sys.argv) > 1 else 20.0,
        int(sys.argv[2]) if len(sys.argv) > 2 else 32,
    )
