"""Soak: N chat messages through two apis and two workers, mixing streaming chats (some of a
workflow that does not save its successful runs), clients that leave mid-stream, and
responseNodes conversations whose reply resumes them on the other worker (the POST goes to api A
and worker A, the chat socket and so the reply to api B and worker B). Prints the RSS of each api
and worker after warm-up and at the end, Redis' used_memory and key count before, during and
after the run, and, once the executions' age (short for the run) has passed, what Redis still
holds, by kind of key: the workflows and the chat memories should be all.

    python bench/soak.py [N] [--concurrency C] [--max-age-hours H]
    python bench/soak.py --measure M     # bytes per message, default settings and unsaved runs

Redis: TEST_REDIS_URL, else an embedded valkey for the run (bench/_common.py).
"""

from __future__ import annotations

import argparse
import itertools
import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable

import httpx
import psutil
from _common import redis_server

from core.pruning import PRUNE_EVERY_SECONDS
from core.retention import UNSAVED_GRACE_SECONDS
from tests.chat.conversation import FIRST, ask_name_workflow, next_frame, open_chat, reply, start
from tests.e2e.deployment import Deployment, chat_url, fresh_ids
from tests.workflows import REDIS_CHAT, example, with_model_delay

SESSIONS = 400  # streaming chat sessions, reused: memories grow by a turn per message
# One unit of work and how many messages it sends; the mix, by weight.
KINDS = {"stream": 1, "unsaved": 1, "leave": 1, "conversation": 2}
MIX = ["stream"] * 5 + ["unsaved"] * 2 + ["leave"] + ["conversation"] * 2
SAMPLE_SECONDS = 5.0


class Soak:
    def __init__(self, deploy: Deployment, concurrency: int):
        self.deploy = deploy
        self.concurrency = concurrency
        self.flows = {
            "stream": deploy.activate(fresh_ids(example(REDIS_CHAT))),
            "unsaved": deploy.activate(unsaved(fresh_ids(example(REDIS_CHAT)))),
            "leave": deploy.activate(fresh_ids(with_model_delay(example(REDIS_CHAT), 15))),
            "conversation": deploy.activate(ask_name_workflow()),
        }
        self.sent = Counter()  # messages sent, by kind
        self.failed = Counter()
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._units = itertools.count()

    def run(self, messages: int) -> None:
        """Send `messages` messages (about: a conversation's two go together)."""
        target = self.done() + messages
        threads = [
            threading.Thread(target=self._client, args=(target,), daemon=True)
            for _ in range(self.concurrency)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def done(self) -> int:
        with self._lock:
            return sum(self.sent.values())

    def _client(self, target: int) -> None:
        with httpx.Client(timeout=60) as http:
            while self.done() < target:
                unit = next(self._units)
                kind = MIX[unit % len(MIX)]
                try:
                    ok = getattr(self, f"_{kind}")(http, unit)
                except Exception as err:  # counted and shown: a soak goes on
                    ok = False
                    with self._lock:
                        self.errors.append(f"{kind}: {type(err).__name__}: {err}"[:200])
                with self._lock:
                    self.sent[kind] += KINDS[kind]
                    self.failed[kind] += 0 if ok else 1

    def _url(self, kind: str, unit: int) -> str:
        base = (self.deploy.api_a, self.deploy.api_b)[unit % 2]
        return chat_url(base, self.flows[kind])

    def _stream(self, http: httpx.Client, unit: int, kind: str = "stream") -> bool:
        session = f"soak-{unit % SESSIONS}"
        chunks = streamed(http, self._url(kind, unit), f"What is {unit} * 2?", session)
        text = "".join(c.get("content", "") for c in chunks if c["type"] == "item")
        return text == f"Based on the tools: Calculator returned {unit * 2}."

    def _unsaved(self, http: httpx.Client, unit: int) -> bool:
        return self._stream(http, unit, "unsaved")

    def _leave(self, http: httpx.Client, unit: int) -> bool:
        """A client that goes away after the first item: the execution still finishes."""
        body = {"action": "sendMessage", "sessionId": f"soak-left-{unit}", "chatInput": "hello"}
        with http.stream("POST", self._url("leave", unit), json=body) as response:
            for line in response.iter_lines():
                if line.strip() and json.loads(line)["type"] == "item":
                    return response.status_code == 200
        return False

    def _conversation(self, http: httpx.Client, unit: int) -> bool:
        """Started on api A (worker A); replied to over api B's socket (worker B resumes it)."""
        session = f"soak-conv-{unit}"
        execution_id = start(self.deploy.api_a, self.flows["conversation"], session)
        with open_chat(self.deploy.api_b, session, execution_id) as ws:
            if next_frame(ws) != FIRST:
                return False
            reply(ws, session, "Ada")
            return next_frame(ws) == "Nice to meet you, Ada!"


def unsaved(workflow: dict) -> dict:
    workflow["settings"] = {"saveDataSuccessExecution": "none"}
    return workflow


def streamed(http: httpx.Client, url: str, message: str, session: str) -> list[dict]:
    body = {"action": "sendMessage", "sessionId": session, "chatInput": message}
    with http.stream("POST", url, json=body) as response:
        return [json.loads(line) for line in response.iter_lines() if line.strip()]


# --- figures ------------------------------------------------------------------------------
def rss_mib(pid: int) -> float:
    """The resident memory of a process and its children (gunicorn's workers), MiB."""
    root = psutil.Process(pid)
    total = sum(p.memory_info().rss for p in [root, *root.children(recursive=True)])
    return total / 2**20


def processes(deploy: Deployment) -> dict[str, int]:
    workers = [p for p in deploy.processes if p.name == "worker"]
    apis = [proc for proc, _ in deploy.apis]
    named = {"worker A": workers[0], "worker B": workers[1], "api A": apis[0], "api B": apis[1]}
    return {name: proc.pid for name, proc in named.items()}


def redis_figures(deploy: Deployment) -> tuple[float, int]:
    return deploy.redis.info("memory")["used_memory"] / 2**20, deploy.redis.dbsize()


def key_kinds(deploy: Deployment) -> Counter:
    """Every key of the deployment (its prefix), by kind."""
    prefix = deploy.keys.prefix
    kinds: Counter = Counter()
    for key in deploy.redis.scan_iter(count=1000):
        name = key[len(prefix) :] if key.startswith(prefix) else f"(other) {key}"
        kinds[name.split(":")[0] if ":" in name else name] += 1
    return kinds


class Sampler:
    """Redis' used memory and key count every few seconds while the soak runs."""

    def __init__(self, deploy: Deployment, progress: Callable[[], int]):
        self.deploy, self.progress = deploy, progress
        self.samples: list[tuple[float, int, float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._started = time.monotonic()

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(SAMPLE_SECONDS):
            used, count = redis_figures(self.deploy)
            sample = (time.monotonic() - self._started, self.progress(), used, count)
            self.samples.append(sample)
            print(f"  {sample[0]:6.0f} s  {sample[1]:7d} messages  Redis {used:7.1f} MiB, "
                  f"{count:6d} keys", flush=True)  # fmt: skip


def soak(n: int, concurrency: int, max_age_hours: float) -> None:
    env = {"EXECUTIONS_DATA_MAX_AGE": str(max_age_hours)}
    with redis_server() as url, Deployment.routed_pair(url, **env) as deploy:
        runner = Soak(deploy, concurrency)
        used, count = redis_figures(deploy)
        print(f"{n} messages, {concurrency} clients, executions' max age {max_age_hours} h "
              f"({max_age_hours * 3600:.0f} s)")  # fmt: skip
        print(f"before:  Redis {used:.1f} MiB, {count} keys")
        warmup = max(n // 10, 500)
        started = time.monotonic()
        with Sampler(deploy, runner.done):
            runner.run(warmup)
            pids = processes(deploy)
            after_warmup = {name: rss_mib(pid) for name, pid in pids.items()}
            runner.run(n - runner.done())
        elapsed = time.monotonic() - started
        at_end = {name: rss_mib(pid) for name, pid in pids.items()}
        report_run(runner, elapsed, after_warmup, at_end, redis_figures(deploy))
        settle = max(max_age_hours * 3600, UNSAVED_GRACE_SECONDS) + 2 * PRUNE_EVERY_SECONDS
        print(f"waiting {settle:.0f} s for the executions' age and the unsaved ones' grace")
        time.sleep(settle)
        report_after(deploy)


def report_run(runner: Soak, elapsed: float, warm: dict, end: dict, redis_end) -> None:
    done = runner.done()
    print(f"sent {done} messages in {elapsed:.0f} s ({done / elapsed:.0f}/s): {dict(runner.sent)}")
    print(f"failed units: {dict(runner.failed)}")
    for error in runner.errors[:5]:
        print(f"  {error}")
    for name in warm:
        growth = (end[name] - warm[name]) / warm[name] * 100
        print(f"RSS {name:<8} after warm-up {warm[name]:6.1f} MiB, at the end "
              f"{end[name]:6.1f} MiB ({growth:+.1f} %)")  # fmt: skip
    print(f"end:     Redis {redis_end[0]:.1f} MiB, {redis_end[1]} keys")


def report_after(deploy: Deployment) -> None:
    used, count = redis_figures(deploy)
    kinds = key_kinds(deploy)
    chat = sum(deploy.redis.memory_usage(k) or 0 for k in deploy.redis.scan_iter(
        match=deploy.keys.chat("*"), count=1000))  # fmt: skip
    print(f"after:   Redis {used:.1f} MiB, {count} keys; chat memory lists {chat / 2**20:.1f} MiB")
    print(f"         keys by kind: {dict(sorted(kinds.items()))}")
    prefix = deploy.keys.prefix
    others = sorted(k[len(prefix) :] for k in deploy.redis.scan_iter(match=f"{prefix}*", count=1000)
                    if not k.startswith(deploy.keys.chat("")))  # fmt: skip
    print(f"         besides chat memory: {others[:20]}")
    left = {k: v for k, v in kinds.items() if k in ("execution", "session")}
    history = deploy.redis.zcard(deploy.keys.executions_history())
    print(f"         execution and session keys left: {left or 'none'}; history entries: {history}")


# --- bytes per message --------------------------------------------------------------------
def measure(m: int) -> None:
    """Redis bytes one message adds, with the default settings (history kept) and with a
    workflow that does not save successful runs (during its grace, and after)."""
    with redis_server() as url, Deployment.routed_pair(url) as deploy:
        runner = Soak(deploy, 8)
        for kind in ("stream", "unsaved"):
            before = deploy.redis.info("memory")["used_memory"]
            sessions = [f"m-{kind}-{uuid.uuid4().hex[:8]}" for _ in range(m // 4)]
            with httpx.Client(timeout=60) as http:
                for i in range(m):
                    url = runner._url(kind, i)
                    streamed(http, url, f"What is {i} * 2?", sessions[i % len(sessions)])
            grown = deploy.redis.info("memory")["used_memory"] - before
            print(f"{kind}: {grown / m:.0f} bytes per message ({m} messages, 4 per session)")
            parts(deploy, runner.flows[kind]["id"], sessions, m)
        time.sleep(UNSAVED_GRACE_SECONDS + 5)
        print(f"unsaved, after the {UNSAVED_GRACE_SECONDS} s grace: "
              f"{deploy.redis.info('memory')['used_memory'] / 2**20:.1f} MiB used in all")  # fmt: skip


def parts(deploy: Deployment, workflow_id: str, sessions: list[str], m: int) -> None:
    """What a message's bytes are made of: its record, its memory turn, its index entries."""
    r, keys = deploy.redis, deploy.keys
    ids = r.zrange(keys.workflow_executions(workflow_id), 0, -1)
    records = [r.memory_usage(keys.execution(i)) or 0 for i in ids[:200]]
    record = sum(records) / len(records) if records else 0.0
    turns = sum(r.memory_usage(keys.chat(s)) or 0 for s in sessions) / m
    indexes = ((r.memory_usage(keys.executions_history()) or 0)
               + (r.memory_usage(keys.workflow_executions(workflow_id)) or 0)) / max(len(ids), 1)  # fmt: skip
    print(f"  record {record:.0f} B ({len(ids)} listed), memory turn {turns:.0f} B, "
          f"index entries {indexes:.0f} B per listed execution")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("n", nargs="?", type=int, default=100_000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--max-age-hours", type=float, default=0.01)
    parser.add_argument("--measure", type=int, default=0, metavar="M")
    args = parser.parse_args()
    if args.measure:
        measure(args.measure)
    else:
        soak(args.n, args.concurrency, args.max_age_hours)


if __name__ == "__main__":
    main()
