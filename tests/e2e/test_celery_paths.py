"""Celery's own paths through the worker's task strategy (worker/library_internals.py), with the
library shortcuts on and off: the broker connection lost and the consumer restarted (the
worker's connections killed while executions stream and while it is idle, Redis restarted
empty), task events turned on, revoke with terminate, warm and cold shutdown, and a prefork
pool. After each, the worker process is alive (or was stopped on purpose), every execution it
had ended with its answer or an error line, and the next chat is answered.

Real processes (gunicorn + gevent api, Celery workers) on a Redis of the module's own, which
the tests kill connections of and restart."""

from __future__ import annotations

import os
import signal
import socket
import threading
from pathlib import Path

import pytest
import redis

from core.liveness import lost_within
from core.settings import Settings
from mini_n8n.redis_server import EmbeddedRedis
from tests.e2e.client import ChatReply, stream_chat
from tests.e2e.deployment import MINI_N8N, Deployment, Process, chat_url, fresh_ids
from tests.waiting import wait_until
from tests.workflows import REDIS_CHAT, example, with_model_delay
from worker.celery_app import TASK_NAME, create_celery

LEASE_SECONDS = 2
TIMEOUT = 30.0
FINISHED = {"success", "error", "canceled", "crashed"}
ANSWER = "Based on the tools: Calculator returned 42."


class Paths:
    """An api and a worker on a Redis of their own, the shortcuts on or off; a slow chat (tokens
    200 ms apart) and a quick one."""

    def __init__(self, shortcuts: str):
        self.server = EmbeddedRedis().start()  # no persistence: a restart comes back empty
        self.deploy = Deployment(
            self.server.url,
            MINI_N8N_LIBRARY_SHORTCUTS=shortcuts,
            MINI_N8N_LEASE_SECONDS=str(LEASE_SECONDS),
            MINI_N8N_KEEPALIVE_SECONDS="1",
        )
        self.base = self.deploy.start_api()
        self.worker = self.deploy.start_worker()
        self.slow = fresh_ids(with_model_delay(example(REDIS_CHAT), 200))
        self.quick = fresh_ids(example(REDIS_CHAT))
        self.activate()
        self.control = create_celery(
            Settings(redis_url=self.server.url, broker_url=self.server.url)
        )

    def activate(self) -> None:
        self.deploy.activate(self.slow)
        self.deploy.activate(self.quick)

    def close(self) -> None:
        self.control.close()
        self.deploy.stop()
        self.server.stop()

    def live_worker(self) -> Process:
        """The worker, started anew if a test stopped it."""
        if self.worker.proc.poll() is not None:
            self.worker = self.deploy.start_worker()
        return self.worker

    def node(self) -> str:
        return f"worker-{self.worker.pid}@{socket.gethostname()}"

    def next_chat_is_answered(self, session: str) -> None:
        reply = stream_chat(chat_url(self.base, self.quick), "What is 6 * 7?", session)
        assert reply.types()[-1] == "end", reply.chunks
        assert reply.text() == ANSWER

    def executions_end(self, replies: list[ChatReply]) -> None:
        """Each stream ended with its answer or an error line, and its record is finished."""
        for reply in replies:
            assert reply.types()[-1] in ("end", "error"), reply.chunks
        ids = [r.headers["x-execution-id"] for r in replies]
        wait_until(
            lambda: all((self.deploy.execution(i) or {}).get("status") in FINISHED for i in ids),
            lost_within(LEASE_SECONDS) + TIMEOUT,
            "every execution to be finished",
        )

    def kill_connections(self, pids: list[int]) -> int:
        """CLIENT KILL every connection these processes hold to Redis; how many there were."""
        client = redis.Redis.from_url(self.server.url)
        try:
            ports = local_ports(pids)
            ids = [c["id"] for c in client.client_list() if port_of(c["addr"]) in ports]
            for client_id in ids:
                client.execute_command("CLIENT", "KILL", "ID", client_id)
            return len(ids)
        finally:
            client.close()


def port_of(addr: str) -> int:
    return int(addr.rsplit(":", 1)[1])


def family(pid: int) -> list[int]:
    """A process and its descendants (a prefork worker's pool processes)."""
    found = [pid]
    for task in Path(f"/proc/{pid}/task").iterdir():
        children = (task / "children").read_text().split()
        for child in children:
            found += family(int(child))
    return found


def local_ports(pids: list[int]) -> set[int]:
    """The local TCP ports of these processes' sockets (Linux /proc)."""
    inodes = set()
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:  # closed meanwhile
                continue
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[9] in inodes:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


class Streams:
    """Slow chats streaming in the background, each started (its first item arrived)."""

    def __init__(self, paths: Paths, count: int, tag: str):
        self.replies: list[ChatReply] = []
        self.threads = []
        started = [threading.Event() for _ in range(count)]
        url = chat_url(paths.base, paths.slow)
        for i in range(count):

            def run(i=i) -> None:
                self.replies.append(
                    stream_chat(
                        url,
                        "tell me a long story",
                        f"{tag}-{i}",
                        timeout=TIMEOUT,
                        on_chunk=lambda c: c["type"] == "item" and started[i].set(),
                    )  # fmt: skip
                )
                started[i].set()

            self.threads.append(threading.Thread(target=run, daemon=True))
            self.threads[-1].start()
        for event in started:
            assert event.wait(TIMEOUT), "a stream never started"

    def join(self) -> list[ChatReply]:
        for thread in self.threads:
            thread.join(TIMEOUT + lost_within(LEASE_SECONDS))
            assert not thread.is_alive(), "a stream did not end"
        return self.replies


@pytest.fixture(scope="module", params=["on", "off"], ids=["shortcuts on", "shortcuts off"])
def paths(request):
    setup = Paths(request.param)
    yield setup
    setup.close()


def connected_lines(worker: Process) -> int:
    return sum("Connected to redis" in line for line in list(worker.lines))


def test_killed_connections_while_executions_stream_leave_the_worker_serving(paths):
    worker = paths.live_worker()
    streams = Streams(paths, 3, "kill-busy")
    connected = connected_lines(worker)
    assert paths.kill_connections([worker.pid]) > 0
    paths.executions_end(streams.join())
    wait_until(lambda: connected_lines(worker) > connected, TIMEOUT, "the consumer to reconnect")
    paths.next_chat_is_answered("kill-busy-next")
    assert worker.proc.poll() is None
    assert not any("Unrecoverable" in line for line in worker.lines), worker.output()


def test_killed_connections_of_an_idle_worker_leave_it_serving(paths):
    worker = paths.live_worker()
    paths.next_chat_is_answered("kill-idle-before")
    connected = connected_lines(worker)
    assert paths.kill_connections([worker.pid]) > 0
    wait_until(lambda: connected_lines(worker) > connected, TIMEOUT, "the consumer to reconnect")
    paths.next_chat_is_answered("kill-idle-next")
    assert worker.proc.poll() is None


def test_an_empty_redis_restart_leaves_the_worker_serving_once_workflows_are_back(paths):
    worker = paths.live_worker()
    streams = Streams(paths, 2, "restart")
    connected = connected_lines(worker)
    port = paths.server.port
    paths.server.stop()
    paths.server = EmbeddedRedis(port=port).start()
    for reply in streams.join():
        assert reply.types()[-1] in ("end", "error"), reply.chunks
    wait_until(lambda: connected_lines(worker) > connected, TIMEOUT, "the consumer to reconnect")
    paths.activate()  # the workflows are back
    paths.next_chat_is_answered("restart-next")
    assert worker.proc.poll() is None


def test_with_task_events_on_celery_is_told_of_every_task(paths):
    worker = paths.live_worker()
    seen: list[dict] = []
    listening = threading.Event()
    with paths.control.connection_for_read() as connection:
        receiver = paths.control.events.Receiver(connection, handlers={"*": seen.append})
        # kombu's ConsumerMixin hook: its queue is bound and consumed from here on
        receiver.on_consume_ready = lambda *args, **kwargs: listening.set()
        listener = threading.Thread(
            target=receiver.capture, kwargs={"limit": None, "timeout": TIMEOUT}, daemon=True
        )
        listener.start()
        assert listening.wait(TIMEOUT), "the event receiver never started"
        try:
            told_of_a_task(paths, seen)
        finally:
            receiver.should_stop = True
            listener.join(TIMEOUT)
    assert worker.proc.poll() is None


def told_of_a_task(paths: Paths, seen: list[dict]) -> None:
    control = paths.control.control
    control.enable_events(destination=[paths.node()], reply=True, timeout=5)
    try:
        reply = stream_chat(chat_url(paths.base, paths.quick), "What is 6 * 7?", "events")
        assert reply.text() == ANSWER
        execution_id = reply.headers["x-execution-id"]

        def kinds() -> list[str]:
            return [e["type"] for e in list(seen) if e.get("uuid") == execution_id]

        wait_until(lambda: "task-succeeded" in kinds(), TIMEOUT, "the task-succeeded event")
        assert kinds() == ["task-received", "task-started", "task-succeeded"]
    finally:
        control.disable_events(destination=[paths.node()], reply=True, timeout=5)


def test_a_running_execution_revoked_with_terminate_ends_and_the_worker_goes_on(paths):
    worker = paths.live_worker()
    streams = Streams(paths, 1, "terminate")
    (execution_id,) = [
        r["id"]
        for r in (paths.deploy.execution(i) for i in running_ids(paths))
        if r and r.get("sessionId") == "terminate-0"
    ]
    paths.control.control.revoke(
        execution_id, terminate=True, destination=[paths.node()], reply=True, timeout=5
    )
    (reply,) = streams.join()
    assert reply.types()[-1] == "error", reply.chunks
    paths.executions_end([reply])
    paths.next_chat_is_answered("terminate-next")
    assert worker.proc.poll() is None


def running_ids(paths: Paths) -> list[str]:
    keys = paths.deploy.keys
    return paths.deploy.redis.zrange(keys.workflow_executions(paths.slow["id"]), 0, -1)


def test_a_warm_shutdown_lets_running_executions_finish(paths):
    worker = paths.live_worker()
    streams = Streams(paths, 2, "warm")
    worker.proc.send_signal(signal.SIGTERM)
    replies = streams.join()
    for reply in replies:
        assert reply.types()[-1] == "end", reply.chunks
    assert worker.proc.wait(TIMEOUT) == 0
    for reply in replies:
        assert paths.deploy.execution(reply.headers["x-execution-id"])["status"] == "success"
    paths.live_worker()
    paths.next_chat_is_answered("warm-next")


def test_a_cold_shutdown_ends_running_executions_with_an_error_line(paths):
    worker = paths.live_worker()
    streams = Streams(paths, 2, "cold")
    worker.proc.send_signal(signal.SIGQUIT)
    worker.proc.wait(TIMEOUT)
    replies = streams.join()
    for reply in replies:
        assert reply.types()[-1] == "error", reply.chunks
    paths.executions_end(replies)
    paths.live_worker()
    paths.next_chat_is_answered("cold-next")


def test_a_prefork_worker_answers_and_survives_killed_connections(paths):
    queue = f"{paths.deploy.keys.prefix}prefork"
    argv = [*MINI_N8N, "worker", "--pool", "prefork", "--concurrency", "2", "--queues", queue]
    worker = Process("prefork worker", argv, paths.deploy.env)
    paths.deploy.processes.append(worker)
    worker.wait_for_line(" ready.")
    base = paths.deploy.start_api(MINI_N8N_TASK_QUEUE=queue)
    url = chat_url(base, paths.quick)
    assert stream_chat(url, "What is 6 * 7?", "prefork-1").text() == ANSWER
    connected = connected_lines(worker)
    assert paths.kill_connections(family(worker.pid)) > 0
    wait_until(lambda: connected_lines(worker) > connected, TIMEOUT, "the consumer to reconnect")
    assert stream_chat(url, "What is 6 * 7?", "prefork-2").text() == ANSWER
    assert worker.proc.poll() is None
    assert f"{TASK_NAME}[" in worker.output()
