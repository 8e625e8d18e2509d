"""A real deployment for end-to-end tests: gunicorn+gevent api processes and Celery worker
processes, started from the `mini-n8n` command against the test session's Redis, each test
deployment under its own key prefix."""

from __future__ import annotations

import contextlib
import copy
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx

from core.keys import Keys
from core.redis_clients import connect
from core.workflow_store import WorkflowStore
from engine.workflow import load_workflow
from mini_n8n.redis_server import EmbeddedRedis, free_port
from tests.e2e.client import ChatReply, stream_chat
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
MINI_N8N = [sys.executable, "-m", "mini_n8n.cli"]
START_TIMEOUT = 30.0


class Process:
    def __init__(self, name: str, argv: list[str], env: dict[str, str], cwd: Path = ROOT):
        self.name = name
        self.proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.lines: list[str] = []
        self._seen = threading.Condition()  # notified on every line read
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)
            with self._seen:
                self._seen.notify_all()

    def wait_for_line(self, marker: str, timeout: float = START_TIMEOUT) -> None:
        """Until a line holding `marker` has been printed (at any time since the start)."""
        with self._seen:
            found = self._seen.wait_for(lambda: any(marker in line for line in self.lines), timeout)
        if not found:
            raise RuntimeError(f"{self.name} did not print {marker!r}:\n{self.output()}")

    def output(self) -> str:
        return "".join(self.lines[-60:])

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Deployment:
    def __init__(self, redis_url: str, cluster: bool = False, **env: str):
        """`cluster`: `redis_url` names a node of a Redis Cluster (the broker is then given as
        CELERY_BROKER_URL)."""
        self.redis_url = redis_url
        self.keys = Keys(prefix=f"e2e{uuid.uuid4().hex[:8]}:", cluster=cluster)
        self.redis = connect(redis_url, cluster, decode_responses=True)
        self.workflows = WorkflowStore(self.redis, self.keys, load_workflow)
        self.env = {
            **os.environ,
            "REDIS_URL": redis_url,
            "MINI_N8N_KEY_PREFIX": self.keys.prefix,
            "MINI_N8N_TASK_QUEUE": f"{self.keys.prefix}queue",
            "MINI_N8N_REDIS_CLUSTER": str(cluster).lower(),
            "PYTHONUNBUFFERED": "1",
            **env,
        }
        self.processes: list[Process] = []
        self.apis: list[tuple[Process, str]] = []

    @classmethod
    @contextlib.contextmanager
    def running(cls, redis_url: str, cluster: bool = False, **env: str) -> Iterator[Deployment]:
        """One api (`.base`) and one worker (`.worker`), stopped on the way out."""
        deploy = cls(redis_url, cluster, **env)
        try:
            deploy.base = deploy.start_api()
            deploy.worker = deploy.start_worker()
            yield deploy
        finally:
            deploy.stop()

    @classmethod
    @contextlib.contextmanager
    def routed_pair(cls, redis_url: str, cluster: bool = False, **env: str) -> Iterator[Deployment]:
        """Two workers on queues of their own, each fed by its own api (`.api_a` → `.worker_a`,
        `.api_b` → `.worker_b`): a message's worker is chosen by the api it is sent to, so
        consecutive messages can be forced onto different workers."""
        deploy = cls(redis_url, cluster, **env)
        try:
            qa, qb = f"{deploy.keys.prefix}qa", f"{deploy.keys.prefix}qb"
            deploy.worker_a = deploy.start_worker(queue=qa)
            deploy.worker_b = deploy.start_worker(queue=qb)
            deploy.api_a = deploy.start_api(MINI_N8N_TASK_QUEUE=qa)
            deploy.api_b = deploy.start_api(MINI_N8N_TASK_QUEUE=qb)
            yield deploy
        finally:
            deploy.stop()

    # --- processes ------------------------------------------------------------------------
    def start_api(self, **env: str) -> str:
        port = free_port()
        merged = {**self.env, "PORT": str(port), "HOST": "127.0.0.1", **env}
        proc = Process(f"api:{port}", [*MINI_N8N, "api"], merged)
        self.processes.append(proc)
        base = f"http://127.0.0.1:{port}"
        _wait_http(f"{base}/healthz", proc)
        self.apis.append((proc, base))
        return base

    def start_worker(self, queue: str | None = None, concurrency: int = 100, **env: str) -> Process:
        argv = [*MINI_N8N, "worker", "--concurrency", str(concurrency)]
        if queue:
            argv += ["--queues", queue]
        proc = Process("worker", argv, {**self.env, **env})
        self.processes.append(proc)
        proc.wait_for_line(" ready.")
        return proc

    def stop(self) -> None:
        # Signal every process first, then wait: they shut down in parallel.
        for proc in self.processes:
            if proc.proc.poll() is None:
                proc.proc.send_signal(signal.SIGTERM)
        for proc in self.processes:
            proc.stop()
        self.redis.close()

    # --- data -----------------------------------------------------------------------------
    def activate(self, workflow: dict) -> dict:
        self.workflows.save(workflow)
        self.workflows.activate(workflow["id"])
        return workflow

    def converse(self, workflow: dict, session: str) -> tuple[list[ChatReply], list[int]]:
        """A routed pair's three-turn conversation (6 * 7, my name is Ada, what is my name?)
        through api_a, api_b, api_a: the replies, and the pid of the worker of each."""
        route = [self.api_a, self.api_b, self.api_a]
        messages = ["What is 6 * 7?", "my name is Ada", "What is my name?"]
        replies = [
            stream_chat(chat_url(base, workflow), message, session)
            for base, message in zip(route, messages, strict=True)
        ]
        pids = [self.execution(r.headers["x-execution-id"])["worker"]["pid"] for r in replies]
        return replies, pids

    def execution(self, execution_id: str) -> dict | None:
        raw = self.redis.get(self.keys.execution(execution_id))
        return json.loads(raw) if raw else None

    def chat_list(self, session_id: str, workflow_id: str | None = None) -> list[dict]:
        """A session's memory: a public chat's, or a protected workflow's (`workflow_id`)."""
        key = self.keys.chat(session_id, workflow_id)
        return [json.loads(x) for x in self.redis.lrange(key, 0, -1)]


@contextlib.contextmanager
def on_its_own_redis(**env: str) -> Iterator[Deployment]:
    """An api and a worker on an embedded Redis of their own (`.server`), which the test may
    stop, start again or fill."""
    server = EmbeddedRedis().start()
    deploy = Deployment(server.url, **env)
    deploy.server = server
    try:
        deploy.base = deploy.start_api()
        deploy.worker = deploy.start_worker()
        yield deploy
    finally:
        deploy.stop()
        deploy.server.stop()  # the one running now: a test may have started another


def restart_redis(server: EmbeddedRedis, *, empty: bool = False) -> EmbeddedRedis:
    """`server` stopped and started again on its port: with its append-only file, or empty."""
    port, data_dir = server.port, server.data_dir
    server.stop()
    if empty and data_dir:
        for path in Path(data_dir).rglob("*"):
            if path.is_file():
                path.unlink()
    return EmbeddedRedis(port=port, data_dir=data_dir).start()


def fresh_ids(workflow: dict) -> dict:
    """A copy with a new workflow id and webhook ids, so tests never share a URL."""
    workflow = copy.deepcopy(workflow)
    workflow["id"] = uuid.uuid4().hex[:16]
    for node in workflow["nodes"]:
        if "webhookId" in node:
            node["webhookId"] = str(uuid.uuid4())
        if node["type"] == "n8n-nodes-base.webhook":
            node["parameters"]["path"] = f"hook-{uuid.uuid4().hex[:8]}"
    return workflow


def chat_url(base: str, workflow: dict) -> str:
    trigger = next(n for n in workflow["nodes"] if n["type"].endswith("chatTrigger"))
    path = trigger["parameters"].get("path") or f"{trigger['webhookId']}/chat"
    return f"{base}/webhook/{path}"


def _wait_http(url: str, proc: Process) -> None:
    def answers() -> bool:
        if proc.proc.poll() is not None:
            raise RuntimeError(f"{proc.name} exited:\n{proc.output()}")
        try:
            return httpx.get(url, timeout=1.0).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(answers, START_TIMEOUT, f"{proc.name} to answer {url}")
    except AssertionError:
        raise RuntimeError(f"{proc.name} did not answer {url}:\n{proc.output()}") from None


WORKER_LOSS = (
    "The worker running this execution died (its process is gone).",
    "The worker running this execution was lost (it stopped renewing its lease).",
)


def kill_worker_mid_stream(deploy: Deployment, workflow: dict, session: str) -> ChatReply:
    """Send a message to a worker of its own and SIGKILL that worker at the first token: the
    stream must end with a worker-loss error line and the record say crashed. How soon is
    printed (tests/e2e/test_worker_loss.py shows which of the two paths ends it; the time is a
    figure of bench/worker_loss.py). Returns the reply."""
    queue = f"{deploy.keys.prefix}qv"
    victim = deploy.start_worker(queue=queue)
    api = deploy.start_api(MINI_N8N_TASK_QUEUE=queue)
    killed_at: list[float] = []

    def on_chunk(chunk):
        if chunk["type"] == "item" and not killed_at:
            victim.proc.send_signal(signal.SIGKILL)
            killed_at.append(time.monotonic())

    reply = stream_chat(chat_url(api, workflow), "What is 19 * 23?", session, on_chunk=on_chunk)
    assert killed_at, "the stream never started"
    assert reply.chunks[-1]["type"] == "error"
    assert reply.chunks[-1]["content"] in WORKER_LOSS, reply.chunks[-1]
    print(f"\nSIGKILL -> error line: {reply.ended_at - killed_at[0]:.2f} s, {reply.chunks[-1]}")
    record = deploy.execution(reply.headers["x-execution-id"])
    assert record["status"] == "crashed" and record["worker"]["pid"] == victim.pid
    return reply
