"""Where a first item's time goes, hop by hop, in queue mode and in-process.

One message at a time to the OpenAI chat export (OpenAI Chat Model, Redis Chat Memory) against
a fake OpenAI-compatible server that answers at once. The fake runs in this process, so the
client's clock and the fake's are one (time.monotonic), and each message splits into three hops:

  to the model      client's POST -> the model request arrives: the api (trigger, record, and in
                    queue mode the task, the worker's claim), the memory read, the request built
  the model         request arrived -> its first token written (the fake: the floor)
  to the client     first token written -> the client reads the first item: the worker's publish,
                    the relay and the api's NDJSON line (in-process: the api's own delivery)

Finer hops come from Redis's own clock (MONITOR, read raw by a thread here and parsed after the
run, so it costs both modes the same few microseconds per command): when the api's create script
ran (the execution recorded and, in queue mode, its task enqueued), when the worker's claim script
ran (the task started), and when the PUBLISH that carried the first item ran. Each hop ends where
the next begins:

  api in            POST -> the create script (HTTP, routing, the trigger)
  to the worker     create -> the claim script: the task's hop through the broker and Celery
  to the model      claim (in-process: create) -> the model request arrives
  the model         request -> its first token written
  to the publish    first token -> the PUBLISH of the first item (queue mode only)
  to the client     that PUBLISH (in-process: the first token) -> the client reads the item

Two api processes on one Redis (one in regular mode, one in queue mode with one worker), rounds
interleaved so the machine's noise falls on both alike. The ratio of the first items' medians is
the target (queue mode at most 1.3x in-process): printed over all messages, and round by
round with the median of the rounds' ratios (on a shared machine whose speed drifts, the ratio
within a round is the steadier figure).

    python bench/first_item.py [N]
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from urllib.parse import urlsplit

import httpx
import redis
from _common import pct, redis_server
from cpu_per_message import ANSWER, EXPORT, MESSAGE, credentials_file

from core import execution_scripts
from tests.e2e.deployment import Deployment, chat_url, fresh_ids
from tests.fakes.openai_server import FakeOpenAI, start_fake_openai

ROUNDS = 10  # the machine's speed drifts: each round compares the two modes close in time
HOPS = ("to the model", "the model", "to the client", "first item")
FINE = ("api in", "to the worker", "to the model", "the model", "to the publish", "to the client")
CREATE = hashlib.sha1(execution_scripts.CREATE.encode()).hexdigest().encode()
CLAIMS = {
    hashlib.sha1(script.encode()).hexdigest().encode()
    for script in (execution_scripts.CLAIM, execution_scripts.CLAIM_AT_TURN)
}
WALL = time.time() - time.monotonic()  # Redis stamps commands with the wall clock


class Monitor:
    """Every command Redis runs, with its time: raw bytes copied to a file by a process of its
    own while the bench runs (no thread here competes with the client and the fake for this
    process), parsed after."""

    READER = (
        "import socket, sys\n"
        "sock = socket.create_connection((sys.argv[1], int(sys.argv[2])))\n"
        "sock.sendall(b'MONITOR\\r\\n')\n"
        "with open(sys.argv[3], 'wb', buffering=0) as out:\n"
        "    while chunk := sock.recv(1 << 20):\n"
        "        out.write(chunk)\n"
    )

    def __init__(self, redis_url: str):
        url = urlsplit(redis_url)
        with tempfile.NamedTemporaryFile(prefix="mini-n8n-monitor-", delete=False) as made:
            self.path = made.name
        args = [url.hostname or "localhost", str(url.port or 6379), self.path]
        self.proc = subprocess.Popen([sys.executable, "-c", self.READER, *args])
        client = redis.Redis.from_url(redis_url)
        while not any(c.get("cmd") == "monitor" for c in client.client_list()):
            time.sleep(0.01)  # polls until Redis lists the monitor: no command may be missed
        client.close()

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()
        os.unlink(self.path)

    def commands(self) -> list[tuple[float, bytes, bytes, bool]]:
        """(monotonic time, command, first argument, whether it carries an item chunk) of every
        command seen so far."""
        out = []
        with open(self.path, "rb") as raw:
            data = raw.read()
        for line in data.split(b"\r\n"):
            if not line.startswith(b"+") or b'] "' not in line:
                continue
            stamp, _, rest = line[1:].partition(b" ")
            words = rest.partition(b'] "')[2].split(b'" "')
            command = words[0].rstrip(b'"').upper()
            first = words[1].rstrip(b'"') if len(words) > 1 else b""
            # MONITOR escapes the event's JSON, and the lines' JSON inside it, once more each.
            item = b"type:item" in rest.replace(b"\\", b"").replace(b'"', b"")
            out.append((float(stamp) - WALL, command, first, item))
        return out


def one_message(client: httpx.Client, url: str, session: str, fake: FakeOpenAI) -> list[float]:
    """The three hops and the first item, in seconds; then the clock times the fine hops need
    (the POST, the model request's arrival, the first token, the first item's reading)."""
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
    return [
        arrived - start,
        token - arrived,
        first - token,
        first - start,
        start,
        arrived,
        token,
        first,
    ]


def fine_hops(
    run: list[float], commands: list[tuple[float, bytes, bytes, bool]]
) -> list[float] | None:
    """The fine hops of one message from Redis's log of it (None if a step is missing)."""
    start, arrived, token, first = run[4:8]
    seen = [command for command in commands if start <= command[0] <= first]
    create = next((at for at, cmd, arg, _ in seen if cmd == b"EVALSHA" and arg == CREATE), None)
    claim = next((at for at, cmd, arg, _ in seen if cmd == b"EVALSHA" and arg in CLAIMS), None)
    # The first item's own PUBLISH: the begin line's may come after the first token, once the
    # model request goes out before it.
    publish = next((at for at, cmd, _, item in seen if cmd == b"PUBLISH" and item), None)
    if create is None:
        return None
    if claim is None or publish is None:  # in-process: no task, the api delivers its own items
        return [create - start, 0.0, arrived - create, token - arrived, 0.0, first - token]
    return [
        create - start,
        claim - create,
        arrived - claim,
        token - arrived,
        publish - token,
        first - publish,
    ]


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
                monitor = Monitor(redis_url)
                with httpx.Client(timeout=30) as client:
                    for mode, url in modes.items():
                        serial(client, url, 30, f"warm-{mode}-", fake)
                    ratios = []
                    for round_ in range(ROUNDS):
                        # Each round's two modes side by side in time, the first of them in turn.
                        order = list(modes.items())[:: 1 if round_ % 2 == 0 else -1]
                        firsts = {}
                        for mode, url in order:
                            done = serial(client, url, n // ROUNDS, f"{mode}{round_}-", fake)
                            runs[mode] += done
                            firsts[mode] = pct([r[3] for r in done], 50)
                        ratios.append(firsts["queue"] / firsts["in-process"])
                report(runs)
                print(
                    f"the same, round by round ({ROUNDS} rounds of {n // ROUNDS} per mode): "
                    + " ".join(f"x{r:.2f}" for r in ratios)
                    + f"; median x{statistics.median(ratios):.2f}"
                )
                report_fine(runs, monitor.commands())
                monitor.stop()
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


def report_fine(runs: dict[str, list[list[float]]], commands) -> None:
    commands.sort()
    fine = {}
    for mode, mode_runs in runs.items():
        fine[mode] = [hops for r in mode_runs if (hops := fine_hops(r, commands))]
    print(
        f"\nthe same messages hop by hop, from Redis's MONITOR; p50 in ms "
        f"({len(fine['in-process'])} and {len(fine['queue'])} messages with every step seen)"
    )
    print(f"{'':16}{'in-process':>12}{'queue':>12}{'queue - in-process':>22}")
    for i, hop in enumerate(FINE):
        local = pct([h[i] * 1000 for h in fine["in-process"]], 50)
        queue = pct([h[i] * 1000 for h in fine["queue"]], 50)
        print(f"{hop:16}{local:12.2f}{queue:12.2f}{queue - local:16.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
