"""Where a first item's time goes, hop by hop, in queue mode and in-process (issue 26).

One message at a time to the OpenAI chat export (OpenAI Chat Model, Redis Chat Memory) against
a fake OpenAI-compatible server that answers at once. The fake runs in this process, so the
client's clock and the fake's are one (time.monotonic), and each message splits into three hops:

  to the model      client's POST -> the model request arrives: the api (trigger, record, and in
                    queue mode the task, the worker's claim), the memory read, the request built
  the model         request arrived -> its first token written (the fake: the floor)
  to the client     first token written -> the client reads the first item: the worker's publish,
                    the relay and the api's NDJSON line (in-process: the api's own delivery)

Two api processes on one Redis (one in regular mode, one in queue mode with one worker), rounds
interleaved so the machine's noise falls on both alike. The ratio of the first items' medians is
the issue's target (queue mode at most 1.3x in-process).

    python bench/first_item.py [N]
"""

from __future__ import annotations

import json
import os
import sys
import time

import httpx
from _common import pct, redis_server
from cpu_per_message import ANSWER, EXPORT, MESSAGE, credentials_file

from tests.e2e.deployment import Deployment, chat_url, fresh_ids
from tests.fakes.openai_server import FakeOpenAI, start_fake_openai

HOPS = ("to the model", "the model", "to the client", "first item")


def one_message(client: httpx.Client, url: str, session: str, fake: FakeOpenAI) -> list[float]:
    """The three hops and the first item, in seconds."""
    asked = len(fake.requests)
    body = {"action": "sendMessage", "sessionId": session, "chatInput": MESSAGE}
    start = time.monotonic()
    first, text = None, ""
    with client.stream("POST", url, json=body) as response:
        for line in response.iter_lines():
            if line:
                chunk = json.loads(line)
                if chunk["type"] == "item":
                    first = first or time.monotonic()
                    text += chunk["content"]
    assert text == ANSWER and first is not None, text
    arrived = fake.requests[asked]["at"]
    token = min(at for at, kind, _ in fake.sent if kind == "content" and at >= arrived)
    return [arrived - start, token - arrived, first - token, first - start]


def serial(client, url: str, n: int, tag: str, fake: FakeOpenAI) -> list[list[float]]:
    runs = []
    for i in range(n):
        fake.sent.clear()  # a long run must not grow the fake's logs without end
        runs.append(one_message(client, url, f"{tag}{i // 10}", fake))  # 10 turns per session
        fake.requests.clear()
    return runs


def main(n: int) -> None:
    fake, openai_url = start_fake_openai()
    creds = None
    try:
        with redis_server() as redis_url:
            creds = credentials_file(openai_url, redis_url)
            deploy = Deployment(redis_url, MINI_N8N_CREDENTIALS_FILE=creds)
            try:
                regular = deploy.start_api(EXECUTIONS_MODE="regular")
                queued = deploy.start_api()
                deploy.start_worker()
                workflow = deploy.activate(fresh_ids(json.loads(EXPORT.read_text())))
                modes = {
                    "in-process": chat_url(regular, workflow),
                    "queue": chat_url(queued, workflow),
                }
                runs: dict[str, list[list[float]]] = {mode: [] for mode in modes}
                with httpx.Client(timeout=30) as client:
                    for mode, url in modes.items():
                        serial(client, url, 30, f"warm-{mode}-", fake)
                    for round_ in range(5):
                        for mode, url in modes.items():
                            runs[mode] += serial(client, url, n // 5, f"{mode}{round_}-", fake)
                report(runs)
            finally:
                deploy.stop()
    finally:
        fake.stop()
        if creds:
            os.unlink(creds)


def report(runs: dict[str, list[list[float]]]) -> None:
    count = len(runs["queue"])
    print(f"one message at a time, {count} per mode; p50 (p99) in ms")
    print(f"{'':16}{'in-process':>20}{'queue':>20}{'queue - in-process':>22}")
    for i, hop in enumerate(HOPS):
        local = [r[i] * 1000 for r in runs["in-process"]]
        queue = [r[i] * 1000 for r in runs["queue"]]
        print(
            f"{hop:16}{pct(local, 50):11.2f} ({pct(local, 99):6.2f})"
            f"{pct(queue, 50):11.2f} ({pct(queue, 99):6.2f})"
            f"{pct(queue, 50) - pct(local, 50):16.2f}"
        )
    local = pct([r[3] for r in runs["in-process"]], 50)
    queue = pct([r[3] for r in runs["queue"]], 50)
    print(f"first item, queue / in-process at p50: x{queue / local:.2f} (target <= 1.3)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
